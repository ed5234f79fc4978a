#include "sim/trace.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <unordered_map>

#include "core/quote.h"

namespace tessera::sim {
namespace {

// Walks the data rows of a CSV text whose columns are located by header name.
// Views returned point into the text, which must outlive the table.
class CsvTable {
 public:
  // Reads the header. Columns are numbered required first, then optional.
  // Fails on an empty text or a missing or repeated column.
  static Result<CsvTable> Open(std::string_view text, std::string_view file_name,
                               std::span<const std::string_view> required,
                               std::span<const std::string_view> optional) {
    if (text.starts_with("\xef\xbb\xbf")) text.remove_prefix(3);  // UTF-8 byte-order mark
    CsvTable table(text, file_name);
    if (text.find_first_not_of("\r\n") == std::string_view::npos) {
      return table.ErrorAt(1, "file is empty, expected a header line");
    }
    table.NextLine();
    table.header_fields_ = table.fields_.size();
    table.names_.assign(required.begin(), required.end());
    table.names_.insert(table.names_.end(), optional.begin(), optional.end());
    table.index_.assign(table.names_.size(), -1);
    for (size_t c = 0; c < table.names_.size(); ++c) {
      const std::string_view name = table.names_[c];
      for (size_t f = 0; f < table.fields_.size(); ++f) {
        if (table.fields_[f] != name) continue;
        if (table.index_[c] >= 0) {
          return table.Error("column " + std::string(name) + " appears twice in the header");
        }
        table.index_[c] = static_cast<int>(f);
      }
      if (c < required.size() && table.index_[c] < 0) {
        return table.Error("missing column " + std::string(name) + " (the header is " +
                           QuoteInput(table.line_text_) + ")");
      }
    }
    return table;
  }

  // Moves to the next data row: true, or false at the end. Fails on a blank
  // line before the end or a row whose field count differs from the header's.
  Result<bool> Next() {
    if (pos_ >= text_.size()) return false;
    NextLine();
    if (line_text_.empty()) {
      if (text_.find_first_not_of("\r\n", pos_) == std::string_view::npos) return false;
      return Error("blank line in the middle of the file");
    }
    if (fields_.size() != header_fields_) {
      return Error("the row has " + std::to_string(fields_.size()) +
                   " fields, the header has " + std::to_string(header_fields_));
    }
    return true;
  }

  int line() const { return line_; }
  bool Has(int column) const { return index_[column] >= 0; }
  // The field of `column` in this row; empty when the column is absent.
  std::string_view Field(int column) const {
    return Has(column) ? fields_[index_[column]] : std::string_view();
  }

  // "FILE:LINE: what".
  Status Error(std::string_view what) const { return ErrorAt(line_, what); }
  Status ErrorAt(int line, std::string_view what) const {
    return InvalidArgument(std::string(file_name_) + ":" + std::to_string(line) + ": " +
                           std::string(what));
  }
  // "FILE:LINE: column NAME: what".
  Status ColumnError(int column, std::string_view what) const {
    return Error("column " + std::string(names_[column]) + ": " + std::string(what));
  }

  // A non-negative integer no larger than `max`.
  Result<int64_t> Int(int column, int64_t max = std::numeric_limits<int64_t>::max()) const {
    const std::string_view f = Field(column);
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), value);
    if (ec == std::errc::result_out_of_range) {
      return ColumnError(column, QuoteInput(f) + " is too large");
    }
    if (ec != std::errc() || end != f.data() + f.size()) {
      return ColumnError(column, QuoteInput(f) + " is not an integer");
    }
    if (value < 0) return ColumnError(column, std::string(f) + " is negative");
    if (value > max) {
      return ColumnError(column, std::string(f) + " is more than " + std::to_string(max));
    }
    return value;
  }

  // As Int, but -1 when the column is absent or the field empty.
  Result<int64_t> OptionalInt(int column) const {
    if (Field(column).empty()) return int64_t{-1};
    return Int(column);
  }

  // A non-empty field, unique in its column across rows.
  Result<std::string> UniqueName(int column) {
    const std::string_view name = Field(column);
    if (name.empty()) return ColumnError(column, "is empty");
    const auto [it, inserted] = first_line_.emplace(name, line_);
    if (!inserted) {
      return ColumnError(column, "duplicate name " + QuoteInput(name) + " (first on line " +
                                     std::to_string(it->second) + ")");
    }
    return std::string(name);
  }

  // Data rows at most; for reserving.
  size_t RowCapacity() const {
    return static_cast<size_t>(std::count(text_.begin(), text_.end(), '\n')) + 1;
  }

 private:
  CsvTable(std::string_view text, std::string_view file_name)
      : text_(text), file_name_(file_name) {}

  // Advances to the next line, splitting it into fields_.
  void NextLine() {
    size_t end = text_.find('\n', pos_);
    if (end == std::string_view::npos) end = text_.size();
    line_text_ = text_.substr(pos_, end - pos_);
    if (line_text_.ends_with('\r')) line_text_.remove_suffix(1);
    pos_ = end + 1;
    ++line_;
    fields_.clear();
    size_t start = 0;
    while (true) {
      const size_t comma = line_text_.find(',', start);
      const size_t length = comma == std::string_view::npos ? comma : comma - start;
      fields_.push_back(line_text_.substr(start, length));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }

  std::string_view text_;
  std::string_view file_name_;
  size_t pos_ = 0;
  int line_ = 0;
  std::string_view line_text_;
  std::vector<std::string_view> fields_;
  size_t header_fields_ = 0;
  std::vector<std::string_view> names_;  // wanted columns, required first
  std::vector<int> index_;                // field index of each wanted column, or -1
  std::unordered_map<std::string_view, int> first_line_;  // name -> line it first appeared on
};

enum NodeColumn { kNodeName, kNodeCpu, kNodeMemory, kNodeGpu, kNodeModel };
constexpr std::array<std::string_view, 5> kNodeRequired = {"sn", "cpu_milli", "memory_mib", "gpu",
                                                           "model"};

enum PodColumn {
  kPodName, kPodCpu, kPodMemory, kPodNumGpu, kPodGpuMilli,  // required
  kPodGpuSpec, kPodQos, kPodCreation, kPodDeletion,         // optional
};
constexpr std::array<std::string_view, 5> kPodRequired = {"name", "cpu_milli", "memory_mib",
                                                          "num_gpu", "gpu_milli"};
constexpr std::array<std::string_view, 4> kPodOptional = {"gpu_spec", "qos", "creation_time",
                                                          "deletion_time"};

// Splits "A|B" into models; an empty piece is an error.
Result<std::vector<std::string>> ParseGpuSpec(const CsvTable& table) {
  const std::string_view spec = table.Field(kPodGpuSpec);
  std::vector<std::string> models;
  if (spec.empty()) return models;
  size_t start = 0;
  while (true) {
    const size_t bar = spec.find('|', start);
    const size_t length = bar == std::string_view::npos ? bar : bar - start;
    const std::string_view model = spec.substr(start, length);
    if (model.empty()) return table.ColumnError(kPodGpuSpec, "empty model name in " + QuoteInput(spec));
    models.emplace_back(model);
    if (bar == std::string_view::npos) return models;
    start = bar + 1;
  }
}

// Checks that num_gpu and gpu_milli describe a request the placement code accepts.
Status CheckGpuShare(const CsvTable& table, const TracePod& pod) {
  const std::string gpus = std::to_string(pod.num_gpu);
  const std::string milli = std::to_string(pod.gpu_milli);
  if (pod.num_gpu > 0 && pod.gpu_milli == 0) {
    return table.Error("num_gpu is " + gpus + " but gpu_milli is 0");
  }
  if (pod.num_gpu == 0 && pod.gpu_milli > 0) {
    return table.Error("gpu_milli is " + milli + " but num_gpu is 0");
  }
  if (pod.num_gpu > 1 && pod.gpu_milli != core::kCoreMilliPerGpu) {
    return table.Error("num_gpu is " + gpus + ", so gpu_milli must be 1000 (whole GPUs), not " +
                       milli);
  }
  return Status();
}

Result<TracePod> ParsePodRow(CsvTable& table) {
  TracePod pod;
  TESSERA_ASSIGN_OR_RETURN(pod.name, table.UniqueName(kPodName));
  TESSERA_ASSIGN_OR_RETURN(pod.cpu_milli, table.Int(kPodCpu));
  TESSERA_ASSIGN_OR_RETURN(pod.memory_mib, table.Int(kPodMemory));
  TESSERA_ASSIGN_OR_RETURN(int64_t num_gpu, table.Int(kPodNumGpu, kMaxTraceGpus));
  pod.num_gpu = static_cast<int>(num_gpu);
  TESSERA_ASSIGN_OR_RETURN(pod.gpu_milli, table.Int(kPodGpuMilli, core::kCoreMilliPerGpu));
  TESSERA_RETURN_IF_ERROR(CheckGpuShare(table, pod));
  TESSERA_ASSIGN_OR_RETURN(pod.gpu_spec, ParseGpuSpec(table));
  pod.qos = std::string(table.Field(kPodQos));
  TESSERA_ASSIGN_OR_RETURN(pod.creation_time, table.OptionalInt(kPodCreation));
  TESSERA_ASSIGN_OR_RETURN(pod.deletion_time, table.OptionalInt(kPodDeletion));
  if (pod.creation_time >= 0 && pod.deletion_time >= 0 && pod.deletion_time < pod.creation_time) {
    return table.Error("deletion_time " + std::to_string(pod.deletion_time) +
                       " is before creation_time " + std::to_string(pod.creation_time));
  }
  return pod;
}

Result<TraceNode> ParseNodeRow(CsvTable& table) {
  TraceNode node;
  TESSERA_ASSIGN_OR_RETURN(node.name, table.UniqueName(kNodeName));
  TESSERA_ASSIGN_OR_RETURN(node.cpu_milli, table.Int(kNodeCpu));
  TESSERA_ASSIGN_OR_RETURN(node.memory_mib, table.Int(kNodeMemory));
  TESSERA_ASSIGN_OR_RETURN(int64_t gpus, table.Int(kNodeGpu, kMaxTraceGpus));
  node.gpu_count = static_cast<int>(gpus);
  node.model = std::string(table.Field(kNodeModel));
  return node;
}

// The whole file at `path`, or NOT_FOUND "PATH: cannot open: REASON".
Result<std::string> ReadFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return NotFound(path + ": cannot open: " + std::strerror(errno));
  std::string data;
  std::array<char, 1 << 16> buf;
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) data.append(buf.data(), n);
  const bool failed = std::ferror(f) != 0;
  const int error = errno;
  std::fclose(f);
  if (failed) return NotFound(path + ": cannot read: " + std::strerror(error));
  return data;
}

}  // namespace

Result<std::vector<TraceNode>> ParseNodeCsv(std::string_view text, std::string_view file_name) {
  TESSERA_ASSIGN_OR_RETURN(CsvTable table, CsvTable::Open(text, file_name, kNodeRequired, {}));
  std::vector<TraceNode> nodes;
  nodes.reserve(table.RowCapacity());
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool more, table.Next());
    if (!more) return nodes;
    TESSERA_ASSIGN_OR_RETURN(TraceNode node, ParseNodeRow(table));
    nodes.push_back(std::move(node));
  }
}

Result<std::vector<TracePod>> ParsePodCsv(std::string_view text, std::string_view file_name) {
  TESSERA_ASSIGN_OR_RETURN(CsvTable table,
                           CsvTable::Open(text, file_name, kPodRequired, kPodOptional));
  std::vector<TracePod> pods;
  pods.reserve(table.RowCapacity());
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(bool more, table.Next());
    if (!more) return pods;
    TESSERA_ASSIGN_OR_RETURN(TracePod pod, ParsePodRow(table));
    pods.push_back(std::move(pod));
  }
}

Result<std::vector<TraceNode>> ReadNodeCsv(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseNodeCsv(text, path);
}

Result<std::vector<TracePod>> ReadPodCsv(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParsePodCsv(text, path);
}

core::NodeInfo ToNodeInfo(const TraceNode& node) {
  core::NodeInfo info{.name = node.name, .cpu_milli = node.cpu_milli,
                      .memory_mib = node.memory_mib, .gpus = {}};
  info.gpus.reserve(static_cast<size_t>(node.gpu_count));
  for (int i = 0; i < node.gpu_count; ++i) {
    info.gpus.push_back(core::GpuInfo{.index = i, .uuid = "", .model = node.model,
                                      .memory_mib = 0, .sm_count = 0, .numa_node = -1,
                                      .healthy = true});
  }
  return info;
}

core::PodRequest ToPodRequest(const TracePod& pod) {
  core::ContainerRequest main{
      .name = "main",
      .gpu_count = pod.num_gpu,
      .mem_mib_per_gpu = 0,
      .core_milli_per_gpu = pod.num_gpu > 0 ? pod.gpu_milli : 0,
      .models = core::ModelSelector{.allowed = pod.gpu_spec, .avoided = {}},
  };
  return core::PodRequest{.key = pod.name,
                          .cpu_milli = pod.cpu_milli,
                          .memory_mib = pod.memory_mib,
                          .containers = {std::move(main)},
                          .priority = core::Priority::kNormal};
}

Result<TraceCluster> LoadTrace(const std::string& nodes_path, const std::string& pods_path) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<TraceNode> nodes, ReadNodeCsv(nodes_path));
  TESSERA_ASSIGN_OR_RETURN(std::vector<TracePod> pods, ReadPodCsv(pods_path));
  TraceCluster out;
  for (const auto& n : nodes) {
    out.nodes.push_back(ToNodeInfo(n));
    out.gpus += n.gpu_count;
  }
  if (out.gpus == 0) return InvalidArgument(nodes_path + ": the cluster has no GPUs");
  for (const auto& p : pods) out.pods.push_back(ToPodRequest(p));
  std::sort(out.nodes.begin(), out.nodes.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::sort(out.pods.begin(), out.pods.end(), [](auto& a, auto& b) { return a.key < b.key; });
  return out;
}

}  // namespace tessera::sim

