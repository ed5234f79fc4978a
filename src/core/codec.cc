#include "core/codec.h"

#include <cstdint>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/timestamp.h"

namespace tessera::core {
namespace {

// Decoding uses std::map objects (log-time lookups even on hostile input);
// encoding keeps insertion order so "v" comes first, as documented.
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// "ANNOTATION: PATH: WHAT", or "ANNOTATION: WHAT" for the document itself.
Status Bad(std::string_view annotation, std::string_view path, std::string_view what) {
  std::string message(annotation);
  message += ": ";
  if (!path.empty()) {
    message += path;
    message += ": ";
  }
  message += what;
  return InvalidArgument(std::move(message));
}

std::string FieldPath(std::string_view parent, std::string_view key) {
  return parent.empty() ? std::string(key) : std::string(parent) + "." + std::string(key);
}

std::string ElementPath(std::string_view parent, size_t i) {
  return std::string(parent) + "[" + std::to_string(i) + "]";
}

// What a mistyped value is, for "must be an integer, got ...".
std::string Describe(const Json& j) {
  if (j.is_number_float()) return "number " + j.dump();
  return j.type_name();
}

// "0", "1", "0.5": a bound as a person writes it.
std::string Shortest(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// OK when lo <= value <= hi; otherwise an error naming `path`.
Status CheckRange(std::string_view annotation, std::string_view path, int64_t value, int64_t lo,
                  int64_t hi) {
  if (value >= lo && value <= hi) return Status();
  if (value < 0 && lo == 0) {
    return Bad(annotation, path, "must not be negative, got " + std::to_string(value));
  }
  return Bad(annotation, path,
             std::to_string(value) + " is out of range " + std::to_string(lo) + ".." +
                 std::to_string(hi));
}

// Typed access to the fields of one JSON object, naming each in errors.
class ObjectReader {
 public:
  // Fails unless `value` is an object. `value` must outlive the reader.
  static Result<ObjectReader> Make(std::string_view annotation, const Json& value,
                                   std::string path) {
    if (!value.is_object()) {
      return Bad(annotation, path.empty() ? std::string_view("document") : path,
                 "must be a JSON object, got " + Describe(value));
    }
    return ObjectReader(annotation, &value, std::move(path));
  }

  const std::string& path() const { return path_; }
  std::string_view annotation() const { return annotation_; }

  bool Has(const char* key) const { return object_->contains(key); }

  Result<const Json*> Field(const char* key) const {
    auto it = object_->find(key);
    if (it == object_->end()) {
      return Bad(annotation_, FieldPath(path_, key), "required field is missing");
    }
    return &*it;
  }

  Result<int64_t> Int(const char* key, int64_t lo, int64_t hi) const {
    TESSERA_ASSIGN_OR_RETURN(const Json* j, Field(key));
    const std::string path = FieldPath(path_, key);
    if (j->is_number_unsigned()) {
      const auto u = j->get<uint64_t>();
      if (u > static_cast<uint64_t>(kInt64Max)) {
        return Bad(annotation_, path,
                   std::to_string(u) + " is out of range " + std::to_string(lo) + ".." +
                       std::to_string(hi));
      }
    } else if (!j->is_number_integer()) {
      return Bad(annotation_, path, "must be an integer, got " + Describe(*j));
    }
    const auto value = j->get<int64_t>();
    TESSERA_RETURN_IF_ERROR(CheckRange(annotation_, path, value, lo, hi));
    return value;
  }

  Result<std::string> String(const char* key, bool allow_empty) const {
    TESSERA_ASSIGN_OR_RETURN(const Json* j, Field(key));
    if (!j->is_string()) {
      return Bad(annotation_, FieldPath(path_, key), "must be a string, got " + Describe(*j));
    }
    std::string value = j->get<std::string>();
    if (value.empty() && !allow_empty) {
      return Bad(annotation_, FieldPath(path_, key), "must not be empty");
    }
    return value;
  }

  Result<bool> Bool(const char* key) const {
    TESSERA_ASSIGN_OR_RETURN(const Json* j, Field(key));
    if (!j->is_boolean()) {
      return Bad(annotation_, FieldPath(path_, key), "must be true or false, got " + Describe(*j));
    }
    return j->get<bool>();
  }

  // A number (integer or not) in lo..hi.
  Result<double> Number(const char* key, double lo, double hi) const {
    TESSERA_ASSIGN_OR_RETURN(const Json* j, Field(key));
    const std::string path = FieldPath(path_, key);
    if (!j->is_number()) return Bad(annotation_, path, "must be a number, got " + Describe(*j));
    const double value = j->get<double>();
    if (!(value >= lo && value <= hi)) {
      return Bad(annotation_, path, j->dump() + " is out of range " + Shortest(lo) + ".." + Shortest(hi));
    }
    return value;
  }

  Result<const Json*> Array(const char* key) const {
    TESSERA_ASSIGN_OR_RETURN(const Json* j, Field(key));
    if (!j->is_array()) {
      return Bad(annotation_, FieldPath(path_, key), "must be an array, got " + Describe(*j));
    }
    return j;
  }

 private:
  ObjectReader(std::string_view annotation, const Json* object, std::string path)
      : annotation_(annotation), object_(object), path_(std::move(path)) {}

  std::string_view annotation_;
  const Json* object_;
  std::string path_;
};

// Parses `text` and checks it is an object of version kCodecVersion.
Result<Json> ParseVersioned(std::string_view annotation, std::string_view text) {
  Json root;
  try {
    root = Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    std::string_view what = e.what();  // "[json.exception.parse_error.101] parse error at ..."
    if (const size_t end = what.find("] "); end != std::string_view::npos) {
      what.remove_prefix(end + 2);
    }
    return Bad(annotation, "", "not valid JSON: " + std::string(what));
  }
  TESSERA_ASSIGN_OR_RETURN(ObjectReader top, ObjectReader::Make(annotation, root, ""));
  TESSERA_ASSIGN_OR_RETURN(const Json* v, top.Field("v"));
  if (!v->is_number_integer()) {
    return Bad(annotation, "v", "must be an integer, got " + Describe(*v));
  }
  const std::string version = v->dump();  // any size of integer, as written
  if (version != std::to_string(kCodecVersion)) {
    return Bad(annotation, "",
               "unsupported version " + version + ", this Tessera reads version " +
                   std::to_string(kCodecVersion));
  }
  return root;
}

// Indexes in 0..kMaxGpuIndex, each at most once. `path_of(i)` names item i.
template <typename Items, typename PathOf>
Status CheckGpuIndexes(std::string_view annotation, const Items& items, PathOf path_of) {
  std::vector<int> first_seen(kMaxGpuIndex + 1, -1);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string path = path_of(i) + ".index";
    const int index = items[i].index;
    TESSERA_RETURN_IF_ERROR(CheckRange(annotation, path, index, 0, kMaxGpuIndex));
    if (first_seen[index] >= 0) {
      return Bad(annotation, path,
                 std::to_string(index) + " appears twice (also " +
                     path_of(static_cast<size_t>(first_seen[index])) + ")");
    }
    first_seen[index] = static_cast<int>(i);
  }
  return Status();
}

// Encodes `j` compactly; strings that are not UTF-8 cannot be encoded.
Result<std::string> Dump(std::string_view annotation, const OrderedJson& j) {
  try {
    return j.dump();
  } catch (const OrderedJson::exception&) {
    return Bad(annotation, "", "a string field is not valid UTF-8");
  }
}

Result<std::vector<GpuInfo>> ReadInventory(std::string_view json) {
  const std::string_view ann = kInventoryAnnotation;
  TESSERA_ASSIGN_OR_RETURN(Json root, ParseVersioned(ann, json));
  TESSERA_ASSIGN_OR_RETURN(ObjectReader top, ObjectReader::Make(ann, root, ""));
  TESSERA_ASSIGN_OR_RETURN(const Json* list, top.Array("gpus"));
  std::vector<GpuInfo> gpus;
  gpus.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(ObjectReader r,
                             ObjectReader::Make(ann, (*list)[i], ElementPath("gpus", i)));
    GpuInfo g;
    TESSERA_ASSIGN_OR_RETURN(int64_t index, r.Int("index", 0, kMaxGpuIndex));
    TESSERA_ASSIGN_OR_RETURN(g.uuid, r.String("uuid", /*allow_empty=*/true));
    TESSERA_ASSIGN_OR_RETURN(g.model, r.String("model", /*allow_empty=*/true));
    TESSERA_ASSIGN_OR_RETURN(g.memory_mib, r.Int("memMiB", 0, kInt64Max));
    TESSERA_ASSIGN_OR_RETURN(int64_t sms, r.Int("sms", 0, kIntMax));
    TESSERA_ASSIGN_OR_RETURN(int64_t numa, r.Int("numa", -1, kIntMax));
    TESSERA_ASSIGN_OR_RETURN(g.healthy, r.Bool("healthy"));
    if (r.Has("slots")) {  // optional: written only when the node limits sharers
      TESSERA_ASSIGN_OR_RETURN(int64_t slots, r.Int("slots", 0, kIntMax));
      g.max_sharers = static_cast<int>(slots);
    }
    if (r.Has("mps")) {  // optional: written only when the node runs MPS for the GPU
      TESSERA_ASSIGN_OR_RETURN(g.mps, r.Bool("mps"));
    }
    g.index = static_cast<int>(index);
    g.sm_count = static_cast<int>(sms);
    g.numa_node = static_cast<int>(numa);
    gpus.push_back(std::move(g));
  }
  TESSERA_RETURN_IF_ERROR(ValidateInventory(gpus));
  return gpus;
}

// Reads top's "containers": [{"name": ..., "gpus": [...]}, ...], each GPU
// entry with `read_gpu`, into Container values (.name, .gpus).
template <typename Container, typename ReadGpu>
Result<std::vector<Container>> ReadContainers(const ObjectReader& top, ReadGpu read_gpu) {
  const std::string_view ann = top.annotation();
  TESSERA_ASSIGN_OR_RETURN(const Json* containers, top.Array("containers"));
  std::vector<Container> out;
  for (size_t c = 0; c < containers->size(); ++c) {
    TESSERA_ASSIGN_OR_RETURN(
        ObjectReader cr, ObjectReader::Make(ann, (*containers)[c], ElementPath("containers", c)));
    Container container;
    TESSERA_ASSIGN_OR_RETURN(container.name, cr.String("name", /*allow_empty=*/false));
    TESSERA_ASSIGN_OR_RETURN(const Json* gpus, cr.Array("gpus"));
    for (size_t i = 0; i < gpus->size(); ++i) {
      TESSERA_ASSIGN_OR_RETURN(
          ObjectReader r, ObjectReader::Make(ann, (*gpus)[i], ElementPath(cr.path() + ".gpus", i)));
      TESSERA_ASSIGN_OR_RETURN(auto gpu, read_gpu(r));
      container.gpus.push_back(std::move(gpu));
    }
    out.push_back(std::move(container));
  }
  return out;
}

Result<Assignment> ReadAssignment(std::string_view json) {
  const std::string_view ann = kAssignmentAnnotation;
  TESSERA_ASSIGN_OR_RETURN(Json root, ParseVersioned(ann, json));
  TESSERA_ASSIGN_OR_RETURN(ObjectReader top, ObjectReader::Make(ann, root, ""));
  Assignment assignment;
  TESSERA_ASSIGN_OR_RETURN(assignment.node, top.String("node", /*allow_empty=*/false));
  TESSERA_ASSIGN_OR_RETURN(
      assignment.containers, ReadContainers<ContainerAssignment>(top, [](const ObjectReader& r) -> Result<GpuShare> {
        GpuShare g;
        TESSERA_ASSIGN_OR_RETURN(int64_t index, r.Int("index", 0, kMaxGpuIndex));
        TESSERA_ASSIGN_OR_RETURN(g.uuid, r.String("uuid", /*allow_empty=*/true));
        TESSERA_ASSIGN_OR_RETURN(g.mem_mib, r.Int("memMiB", 0, kInt64Max));
        TESSERA_ASSIGN_OR_RETURN(g.core_milli, r.Int("coreMilli", 0, kCoreMilliPerGpu));
        g.index = static_cast<int>(index);
        return g;
      }));
  TESSERA_RETURN_IF_ERROR(ValidateAssignment(assignment));
  return assignment;
}

Result<PodUsage> ReadUsage(std::string_view json) {
  const std::string_view ann = kUsageAnnotation;
  TESSERA_ASSIGN_OR_RETURN(Json root, ParseVersioned(ann, json));
  TESSERA_ASSIGN_OR_RETURN(ObjectReader top, ObjectReader::Make(ann, root, ""));
  PodUsage usage;
  TESSERA_ASSIGN_OR_RETURN(std::string at, top.String("at", /*allow_empty=*/false));
  Result<WallTime> when = ParseRfc3339(at);
  if (!when.ok()) return Bad(ann, "at", when.status().message());
  usage.at = *when;
  TESSERA_ASSIGN_OR_RETURN(
      usage.containers, ReadContainers<ContainerUsage>(top, [](const ObjectReader& r) -> Result<GpuUse> {
        GpuUse g;
        TESSERA_ASSIGN_OR_RETURN(int64_t index, r.Int("index", 0, kMaxGpuIndex));
        TESSERA_ASSIGN_OR_RETURN(g.uuid, r.String("uuid", /*allow_empty=*/true));
        TESSERA_ASSIGN_OR_RETURN(g.mem_used_mib, r.Int("memUsedMiB", 0, kInt64Max));
        TESSERA_ASSIGN_OR_RETURN(g.utilization, r.Number("utilization", 0, 1));
        g.index = static_cast<int>(index);
        return g;
      }));
  TESSERA_RETURN_IF_ERROR(ValidateUsage(usage));
  return usage;
}

}  // namespace

Status ValidateInventory(const std::vector<GpuInfo>& gpus) {
  const std::string_view ann = kInventoryAnnotation;
  auto path_of = [](size_t i) { return ElementPath("gpus", i); };
  TESSERA_RETURN_IF_ERROR(CheckGpuIndexes(ann, gpus, path_of));
  for (size_t i = 0; i < gpus.size(); ++i) {
    const GpuInfo& g = gpus[i];
    TESSERA_RETURN_IF_ERROR(CheckRange(ann, path_of(i) + ".memMiB", g.memory_mib, 0, kInt64Max));
    TESSERA_RETURN_IF_ERROR(CheckRange(ann, path_of(i) + ".sms", g.sm_count, 0, kIntMax));
    TESSERA_RETURN_IF_ERROR(CheckRange(ann, path_of(i) + ".numa", g.numa_node, -1, kIntMax));
  }
  return Status();
}

Status ValidateAssignment(const Assignment& assignment) {
  const std::string_view ann = kAssignmentAnnotation;
  if (assignment.node.empty()) return Bad(ann, "node", "must not be empty");
  std::set<std::string_view> names;
  for (size_t c = 0; c < assignment.containers.size(); ++c) {
    const ContainerAssignment& container = assignment.containers[c];
    const std::string cpath = ElementPath("containers", c);
    if (container.name.empty()) return Bad(ann, cpath + ".name", "must not be empty");
    if (!names.insert(container.name).second) {
      return Bad(ann, cpath + ".name", "container \"" + container.name + "\" appears twice");
    }
    auto path_of = [&](size_t i) { return ElementPath(cpath + ".gpus", i); };
    TESSERA_RETURN_IF_ERROR(CheckGpuIndexes(ann, container.gpus, path_of));
    for (size_t i = 0; i < container.gpus.size(); ++i) {
      const GpuShare& g = container.gpus[i];
      TESSERA_RETURN_IF_ERROR(CheckRange(ann, path_of(i) + ".memMiB", g.mem_mib, 0, kInt64Max));
      TESSERA_RETURN_IF_ERROR(
          CheckRange(ann, path_of(i) + ".coreMilli", g.core_milli, 0, kCoreMilliPerGpu));
    }
  }
  return Status();
}

Status ValidateUsage(const PodUsage& usage) {
  const std::string_view ann = kUsageAnnotation;
  if (usage.at < kMinRfc3339Time || usage.at > kMaxRfc3339Time) return Bad(ann, "at", "must lie in the years 1700..2199");
  std::set<std::string_view> names;
  for (size_t c = 0; c < usage.containers.size(); ++c) {
    const ContainerUsage& container = usage.containers[c];
    const std::string cpath = ElementPath("containers", c);
    if (container.name.empty()) return Bad(ann, cpath + ".name", "must not be empty");
    if (!names.insert(container.name).second) {
      return Bad(ann, cpath + ".name", "container \"" + container.name + "\" appears twice");
    }
    auto path_of = [&](size_t i) { return ElementPath(cpath + ".gpus", i); };
    TESSERA_RETURN_IF_ERROR(CheckGpuIndexes(ann, container.gpus, path_of));
    for (size_t i = 0; i < container.gpus.size(); ++i) {
      const GpuUse& g = container.gpus[i];
      TESSERA_RETURN_IF_ERROR(CheckRange(ann, path_of(i) + ".memUsedMiB", g.mem_used_mib, 0, kInt64Max));
      if (!(g.utilization >= 0 && g.utilization <= 1)) {  // also NaN
        return Bad(ann, path_of(i) + ".utilization", Json(g.utilization).dump() + " is out of range 0..1");
      }
    }
  }
  return Status();
}

Result<std::string> EncodeInventory(const std::vector<GpuInfo>& gpus) {
  TESSERA_RETURN_IF_ERROR(ValidateInventory(gpus));
  OrderedJson list = OrderedJson::array();
  for (const GpuInfo& g : gpus) {
    list.push_back({{"index", g.index},       {"uuid", g.uuid},    {"model", g.model},
                    {"memMiB", g.memory_mib}, {"sms", g.sm_count}, {"numa", g.numa_node},
                    {"healthy", g.healthy}});
    if (g.max_sharers > 0) list.back()["slots"] = g.max_sharers;
    if (g.mps) list.back()["mps"] = true;
  }
  return Dump(kInventoryAnnotation, {{"v", kCodecVersion}, {"gpus", std::move(list)}});
}

Result<std::string> EncodeAssignment(const Assignment& assignment) {
  TESSERA_RETURN_IF_ERROR(ValidateAssignment(assignment));
  OrderedJson containers = OrderedJson::array();
  for (const ContainerAssignment& c : assignment.containers) {
    OrderedJson gpus = OrderedJson::array();
    for (const GpuShare& g : c.gpus) {
      gpus.push_back({{"index", g.index},
                      {"uuid", g.uuid},
                      {"memMiB", g.mem_mib},
                      {"coreMilli", g.core_milli}});
    }
    containers.push_back({{"name", c.name}, {"gpus", std::move(gpus)}});
  }
  return Dump(kAssignmentAnnotation, {{"v", kCodecVersion},
                                      {"node", assignment.node},
                                      {"containers", std::move(containers)}});
}

Result<std::string> EncodeUsage(const PodUsage& usage) {
  TESSERA_RETURN_IF_ERROR(ValidateUsage(usage));
  OrderedJson containers = OrderedJson::array();
  for (const ContainerUsage& c : usage.containers) {
    OrderedJson gpus = OrderedJson::array();
    for (const GpuUse& g : c.gpus) {
      gpus.push_back({{"index", g.index},
                      {"uuid", g.uuid},
                      {"memUsedMiB", g.mem_used_mib},
                      {"utilization", g.utilization}});
    }
    containers.push_back({{"name", c.name}, {"gpus", std::move(gpus)}});
  }
  return Dump(kUsageAnnotation,
              {{"v", kCodecVersion}, {"at", FormatRfc3339(usage.at)}, {"containers", std::move(containers)}});
}

// The readers above only use accessors that cannot throw, but nlohmann can
// still surprise; nothing it throws may leave this file.
Result<std::vector<GpuInfo>> DecodeInventory(std::string_view json) {
  try {
    return ReadInventory(json);
  } catch (const Json::exception& e) {
    return Bad(kInventoryAnnotation, "", e.what());
  }
}

Result<Assignment> DecodeAssignment(std::string_view json) {
  try {
    return ReadAssignment(json);
  } catch (const Json::exception& e) {
    return Bad(kAssignmentAnnotation, "", e.what());
  }
}

Result<PodUsage> DecodeUsage(std::string_view json) {
  try {
    return ReadUsage(json);
  } catch (const Json::exception& e) {
    return Bad(kUsageAnnotation, "", e.what());
  }
}

}  // namespace tessera::core
