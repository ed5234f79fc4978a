#include "core/podspec.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "core/codec.h"
#include "core/quantity.h"

namespace tessera::core {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxGpusPerContainer = 64;
constexpr int64_t kMaxCorePercent = 100;

// The member `key` of `obj`, or nullptr when `obj` is not an object or lacks it.
const Json* Member(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// The text of a quantity: API servers send strings; hand-written JSON may
// use integers.
Result<std::string> QuantityText(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return value.dump();
  return InvalidArgument("must be a quantity string such as \"8192\", got " +
                         (value.is_number() ? "number " + value.dump() : std::string(value.type_name())));
}

std::string ContainerWhere(std::string_view key, std::string_view kind, const std::string& name) {
  return std::string(key) + " " + std::string(kind) + " \"" + name + "\"";
}

// One container of the pod spec, with its name and resources checked.
struct ContainerSpec {
  std::string name;
  const Json* requests = nullptr;
  const Json* limits = nullptr;
};

Result<std::vector<ContainerSpec>> ReadContainers(const Json& pod, std::string_view key,
                                                  const char* field, bool required) {
  std::vector<ContainerSpec> out;
  const Json* spec = Member(pod, "spec");
  const Json* list = spec ? Member(*spec, field) : nullptr;
  if (list == nullptr || list->is_null()) {
    if (required) return InvalidArgument(std::string(key) + ": spec." + field + " is missing");
    return out;
  }
  if (!list->is_array())
    return InvalidArgument(std::string(key) + ": spec." + field + " must be an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& c = (*list)[i];
    const std::string where = std::string(key) + ": spec." + field + "[" + std::to_string(i) + "]";
    if (!c.is_object()) return InvalidArgument(where + " must be an object");
    ContainerSpec cs;
    const Json* name = Member(c, "name");
    if (name == nullptr || !name->is_string() || name->get<std::string>().empty())
      return InvalidArgument(where + ": name must be a non-empty string");
    cs.name = name->get<std::string>();
    if (const Json* res = Member(c, "resources"); res != nullptr && !res->is_null()) {
      if (!res->is_object()) return InvalidArgument(where + ": resources must be an object");
      for (auto [part, slot] : {std::pair{"requests", &cs.requests}, std::pair{"limits", &cs.limits}}) {
        const Json* m = Member(*res, part);
        if (m == nullptr || m->is_null()) continue;
        if (!m->is_object())
          return InvalidArgument(where + ": resources." + part + " must be an object");
        *slot = m;
      }
    }
    out.push_back(std::move(cs));
  }
  return out;
}

// The value of `resource` in `first`, else in `second`; nullptr when neither
// names it. `*from` says which ("limits" or "requests").
const Json* Lookup(const ContainerSpec& c, const std::string& resource, bool limits_first,
                   const char** from) {
  const Json* order[2] = {limits_first ? c.limits : c.requests, limits_first ? c.requests : c.limits};
  const char* names[2] = {limits_first ? "limits" : "requests", limits_first ? "requests" : "limits"};
  for (int i = 0; i < 2; ++i) {
    if (order[i] == nullptr) continue;
    if (const Json* v = Member(*order[i], resource)) {
      *from = names[i];
      return v;
    }
  }
  return nullptr;
}

// CPU and memory of one container (requests, else limits).
Result<HostResources> ContainerHost(const ContainerSpec& c, const std::string& where) {
  HostResources out;
  const char* from = "";
  if (const Json* v = Lookup(c, "cpu", /*limits_first=*/false, &from)) {
    auto text = QuantityText(*v);
    auto cpu = text.ok() ? ParseCpuMilli(*text) : Result<int64_t>(text.status());
    if (!cpu.ok())
      return InvalidArgument(where + ": resources." + from + ".cpu: " + cpu.status().message());
    out.cpu_milli = *cpu;
  }
  if (const Json* v = Lookup(c, "memory", /*limits_first=*/false, &from)) {
    auto text = QuantityText(*v);
    auto mem = text.ok() ? ParseMemoryMiB(*text) : Result<int64_t>(text.status());
    if (!mem.ok())
      return InvalidArgument(where + ": resources." + from + ".memory: " + mem.status().message());
    out.memory_mib = *mem;
  }
  return out;
}

// A whole-number extended resource; `unit` completes "write a whole number of ...".
Result<int64_t> ParseWhole(const Json& value, const std::string& where, const std::string& resource,
                           std::string_view unit, std::string_view example) {
  auto text = QuantityText(value);
  if (!text.ok()) return InvalidArgument(where + ": " + resource + ": " + text.status().message());
  auto n = ParseCount(*text);
  if (n.ok()) return n;
  std::string what = "\"" + *text + "\" is not a whole number";
  if (!text->empty() && text->front() == '-') what = "\"" + *text + "\" is negative";
  if (n.status().message().find("too large") != std::string::npos) what = n.status().message();
  return InvalidArgument(where + ": " + resource + ": " + what + "; write a whole number of " +
                         std::string(unit) + " such as \"" + std::string(example) + "\"");
}

// GPU memory is a count of MiB; "8Gi" would mean 8 * 2^30 MiB, so say so.
Result<int64_t> ParseGpuMem(const Json& value, const std::string& where, const std::string& resource) {
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text.size() >= 2 && text.back() == 'i') {
      auto q = ParseQuantity(text);
      std::string hint;
      if (q.ok() && q->milli % (int64_t{1000} << 20) == 0)
        hint = ": write \"" + std::to_string(q->milli / (int64_t{1000} << 20)) + "\"";
      return InvalidArgument(where + ": " + resource + ": \"" + text +
                             "\" has a unit suffix; the value is a plain number of MiB" + hint);
    }
  }
  return ParseWhole(value, where, resource, "MiB", "8192");
}

Result<std::vector<std::string>> ParseModels(const Json& annotations, std::string_view name,
                                             std::string_view key) {
  std::vector<std::string> out;
  const Json* v = Member(annotations, name);
  if (v == nullptr) return out;
  const std::string where = std::string(key) + ": annotation " + std::string(name);
  if (!v->is_string()) return InvalidArgument(where + " must be a string such as \"A100|H100\"");
  const std::string text = v->get<std::string>();
  size_t start = 0;
  while (true) {
    const size_t bar = text.find('|', start);
    std::string item = text.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    if (item.empty())
      return InvalidArgument(where + ": \"" + text + "\" has an empty model name; list models as \"A100|H100\"");
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return out;
}

Result<Priority> ParsePriority(const Json& annotations, std::string_view key) {
  const Json* v = Member(annotations, kPriorityAnnotation);
  if (v == nullptr) return Priority::kNormal;
  const std::string text = v->is_string() ? v->get<std::string>() : v->dump();
  if (text == "high") return Priority::kHigh;
  if (text == "normal") return Priority::kNormal;
  if (text == "low") return Priority::kLow;
  return InvalidArgument(std::string(key) + ": annotation " + std::string(kPriorityAnnotation) + ": \"" +
                         text + "\" is not one of high, normal, low");
}

Result<Isolation> ParseIsolation(const Json& annotations, std::string_view key) {
  const Json* v = Member(annotations, kIsolationAnnotation);
  if (v == nullptr) return Isolation::kHook;
  const std::string text = v->is_string() ? v->get<std::string>() : v->dump();
  for (Isolation i : {Isolation::kHook, Isolation::kMps, Isolation::kNone}) {
    if (text == IsolationName(i)) return i;
  }
  return InvalidArgument(std::string(key) + ": annotation " + std::string(kIsolationAnnotation) + ": \"" + text +
                         "\" is not one of hook, mps, none");
}

Result<bool> ParseCoreHard(const Json& annotations, std::string_view key) {
  const Json* v = Member(annotations, kCorePolicyAnnotation);
  if (v == nullptr) return false;
  const std::string text = v->is_string() ? v->get<std::string>() : v->dump();
  if (text == "share") return false;
  if (text == "hard") return true;
  return InvalidArgument(std::string(key) + ": annotation " + std::string(kCorePolicyAnnotation) + ": \"" +
                         text + "\" is not one of share, hard");
}

// tessera.io/gpu-core-limit as core milli per GPU (0 when absent), checked
// against the pod's GPU containers and policy.
Result<int64_t> ParseCoreLimit(const Json& annotations, const PodRequest& req) {
  const Json* v = Member(annotations, kCoreLimitAnnotation);
  if (v == nullptr) return 0;
  const std::string text = v->is_string() ? v->get<std::string>() : v->dump();
  const std::string where = req.key + ": annotation " + std::string(kCoreLimitAnnotation) + ": \"" + text + "\"";
  int64_t percent = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), percent);
  if (ec != std::errc() || end != text.data() + text.size() || percent < 1 || percent > kMaxCorePercent)
    return InvalidArgument(where + " is not a whole percent of one GPU from 1 to 100");
  if (req.core_hard)
    return InvalidArgument(where + ": a burst ceiling needs " + std::string(kCorePolicyAnnotation) +
                           ": share (the default), not hard");
  if (req.isolation == Isolation::kMps)
    return InvalidArgument(where + ": MPS fixes a container's thread percentage at start; "
                           "no burst with tessera.io/isolation: mps");
  const int64_t milli = percent * (kCoreMilliPerGpu / kMaxCorePercent);
  bool any = false;
  for (const ContainerRequest& c : req.containers) {
    if (c.gpu_count == 0) continue;
    any = true;
    if (c.core_milli_per_gpu == 0 || c.core_milli_per_gpu >= kCoreMilliPerGpu)
      return InvalidArgument(where + ": container \"" + c.name +
                             "\" asks for no fraction of a GPU's compute (gpu-core), so there is nothing to burst from");
    if (milli < c.core_milli_per_gpu)
      return InvalidArgument(where + " is below container \"" + c.name + "\"'s gpu-core request of " +
                             std::to_string(c.core_milli_per_gpu / (kCoreMilliPerGpu / kMaxCorePercent)) +
                             " %; the ceiling must be at least the request");
  }
  if (!any) return InvalidArgument(where + ": the pod asks for no GPU");
  return milli;
}

// The names `c` uses among `candidates` (limits or requests), in that order.
std::vector<std::string> NamesUsed(const ContainerSpec& c, const std::vector<const std::string*>& candidates) {
  std::vector<std::string> out;
  for (const std::string* n : candidates) {
    for (const Json* m : {c.limits, c.requests}) {
      if (m != nullptr && Member(*m, *n) != nullptr) {
        out.push_back(*n);
        break;
      }
    }
  }
  return out;
}

std::vector<const std::string*> TesseraNames(const ResourceNames& names) {
  return {&names.gpu, &names.mem, &names.core};
}
std::vector<const std::string*> GpushareNamesOf(const ResourceNames& names) {
  if (!names.gpushare.enabled) return {};
  return {&names.gpushare.mem};
}
std::vector<const std::string*> HamiNamesOf(const ResourceNames& names) {
  if (!names.hami.enabled) return {};
  return {&names.hami.gpu, &names.hami.mem, &names.hami.mem_percent, &names.hami.core};
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// gpushare: GiB of one GPU's memory; the container gets exactly one GPU.
Result<ContainerRequest> GpushareGpus(const ContainerSpec& c, const std::string& where,
                                      const GpushareNames& names) {
  ContainerRequest out;
  out.name = c.name;
  const char* from = "";
  const Json* mem = Lookup(c, names.mem, /*limits_first=*/true, &from);
  if (mem == nullptr) return out;
  if (mem->is_string()) {
    const std::string text = mem->get<std::string>();
    if (text.size() >= 2 && text.back() == 'i')
      return InvalidArgument(where + ": " + names.mem + ": \"" + text +
                             "\" has a unit suffix; gpushare counts GiB as a plain number, such as \"3\"");
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t gib, ParseWhole(*mem, where, names.mem, "GiB", "3"));
  if (gib == 0) return out;  // gpushare: 0 asks for no GPU
  if (gib > (int64_t{1} << 20))
    return InvalidArgument(where + ": " + names.mem + ": " + std::to_string(gib) +
                           " GiB is more than any GPU has");
  out.gpu_count = 1;
  out.mem_mib_per_gpu = gib * 1024;
  return out;
}

// HAMi: count, then per GPU MiB or percent of memory, and percent of compute.
Result<ContainerRequest> HamiGpus(const ContainerSpec& c, const std::string& where, const HamiNames& names) {
  ContainerRequest out;
  out.name = c.name;
  const char* from = "";
  const Json* count = Lookup(c, names.gpu, /*limits_first=*/true, &from);
  const Json* mem = Lookup(c, names.mem, true, &from);
  const Json* percent = Lookup(c, names.mem_percent, true, &from);
  const Json* core = Lookup(c, names.core, true, &from);
  if (mem != nullptr && percent != nullptr)
    return InvalidArgument(where + ": sets both " + names.mem + " and " + names.mem_percent +
                           "; keep one (MiB or percent of the GPU's memory)");
  if (mem != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(out.mem_mib_per_gpu, ParseGpuMem(*mem, where, names.mem));
  }
  if (percent != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(int64_t p, ParseWhole(*percent, where, names.mem_percent, "percent", "50"));
    if (p > 100)
      return InvalidArgument(where + ": " + names.mem_percent + ": " + std::to_string(p) +
                             " is over 100 (percent of one GPU's memory)");
    if (p == 0)
      return InvalidArgument(where + ": " + names.mem_percent + ": 0 asks for no memory; write 100 for the " +
                             "whole memory, or " + names.mem + " in MiB");
    if (p != 100)
      return InvalidArgument(where + ": " + names.mem_percent + ": " + std::to_string(p) +
                             " % is not supported (Tessera sizes memory shares in MiB, so a percent would "
                             "depend on the GPU chosen); write " + names.mem + " in MiB instead, or 100 for "
                             "the whole memory");
  }
  if (core != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(int64_t pc, ParseWhole(*core, where, names.core, "percent", "30"));
    if (pc > kMaxCorePercent)
      return InvalidArgument(where + ": " + names.core + ": " + std::to_string(pc) +
                             " is over 100 (percent of one GPU); for more than one GPU set " + names.gpu +
                             " to the number of GPUs");
    out.core_milli_per_gpu = pc * (kCoreMilliPerGpu / kMaxCorePercent);
  }
  const bool whole_memory = percent != nullptr && out.mem_mib_per_gpu == 0;
  if (count != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(int64_t n, ParseWhole(*count, where, names.gpu, "GPUs", "1"));
    if (n > kMaxGpusPerContainer)
      return InvalidArgument(where + ": " + names.gpu + ": " + std::to_string(n) +
                             " GPUs is more than any node has (max 64)");
    out.gpu_count = static_cast<int>(n);
  } else if (out.mem_mib_per_gpu > 0 || out.core_milli_per_gpu > 0 || whole_memory) {
    out.gpu_count = 1;  // HAMi: a share without a count asks for one GPU
  }
  if (out.gpu_count == 0) {
    if (out.mem_mib_per_gpu > 0 || out.core_milli_per_gpu > 0)
      return InvalidArgument(where + ": " + names.gpu + ": 0 GPUs, yet " + names.mem + " or " + names.core +
                             " is set; ask for at least one GPU");
    return out;
  }
  // No memory size, or all of it: the whole memory. Tessera holds a GPU's
  // whole memory only with the whole GPU, so that is what the share becomes.
  if (out.mem_mib_per_gpu == 0 && (out.core_milli_per_gpu == 0 || whole_memory)) {
    if (out.core_milli_per_gpu != 0 && out.core_milli_per_gpu != kCoreMilliPerGpu)
      return InvalidArgument(where + ": " + names.mem_percent + ": 100 with " + names.core +
                             " below 100 is not supported (a GPU's whole memory comes with the whole GPU); "
                             "write " + names.mem + " in MiB instead");
    out.core_milli_per_gpu = kCoreMilliPerGpu;
  }
  return out;
}

// The GPU part of one container's request, in Tessera's own names.
Result<ContainerRequest> TesseraGpus(const ContainerSpec& c, const std::string& where, const ResourceNames& names) {
  ContainerRequest out;
  out.name = c.name;
  const char* from = "";
  const Json* count = Lookup(c, names.gpu, /*limits_first=*/true, &from);
  const Json* mem = Lookup(c, names.mem, true, &from);
  const Json* core = Lookup(c, names.core, true, &from);
  if (mem != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(out.mem_mib_per_gpu, ParseGpuMem(*mem, where, names.mem));
  }
  if (core != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(int64_t percent, ParseWhole(*core, where, names.core, "percent", "30"));
    if (percent > kMaxCorePercent)
      return InvalidArgument(where + ": " + names.core + ": " + std::to_string(percent) +
                             " is over 100 (percent of one GPU); for more than one GPU set " +
                             names.gpu + " to the number of whole GPUs");
    out.core_milli_per_gpu = percent * (kCoreMilliPerGpu / kMaxCorePercent);
  }
  if (count != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(int64_t n, ParseWhole(*count, where, names.gpu, "GPUs", "1"));
    if (n > kMaxGpusPerContainer)
      return InvalidArgument(where + ": " + names.gpu + ": " + std::to_string(n) +
                             " GPUs is more than any node has (max 64)");
    out.gpu_count = static_cast<int>(n);
  } else if (mem != nullptr || core != nullptr) {
    out.gpu_count = 1;
  }
  if (count != nullptr && mem == nullptr && core == nullptr) out.core_milli_per_gpu = kCoreMilliPerGpu;
  return out;
}

// The GPU part of one container's request, in whichever vocabulary it uses.
// Using names of two vocabularies is a mistake: say which.
Result<ContainerRequest> ContainerGpus(const ContainerSpec& c, const std::string& where,
                                       const ResourceNames& names) {
  const std::vector<std::string> tessera = NamesUsed(c, TesseraNames(names));
  const std::vector<std::string> gpushare = NamesUsed(c, GpushareNamesOf(names));
  const std::vector<std::string> hami = NamesUsed(c, HamiNamesOf(names));
  const int vocabularies = !tessera.empty() + !gpushare.empty() + !hami.empty();
  if (vocabularies > 1) {
    std::vector<std::string> all = tessera;
    all.insert(all.end(), gpushare.begin(), gpushare.end());
    all.insert(all.end(), hami.begin(), hami.end());
    return InvalidArgument(where + ": mixes GPU resources of different front ends (" + JoinNames(all) +
                           "); ask in one of them: Tessera's (" + names.mem + "), gpushare's (" +
                           names.gpushare.mem + ") or HAMi's (" + names.hami.mem + ")");
  }
  if (!gpushare.empty()) return GpushareGpus(c, where, names.gpushare);
  if (!hami.empty()) return HamiGpus(c, where, names.hami);
  return TesseraGpus(c, where, names);
}

bool NamesAny(const ContainerSpec& c, const ResourceNames& names) {
  const std::vector<std::string> all = names.All();
  for (const Json* m : {c.requests, c.limits}) {
    if (m == nullptr) continue;
    for (const std::string& n : all)
      if (Member(*m, n) != nullptr) return true;
  }
  return false;
}

Result<HostResources> HostOf(const std::vector<ContainerSpec>& containers,
                             const std::vector<ContainerSpec>& inits, std::string_view key) {
  HostResources sum, init_max;
  for (const auto& c : containers) {
    TESSERA_ASSIGN_OR_RETURN(HostResources h, ContainerHost(c, ContainerWhere(key, "container", c.name)));
    sum.cpu_milli += h.cpu_milli;
    sum.memory_mib += h.memory_mib;
  }
  for (const auto& c : inits) {
    TESSERA_ASSIGN_OR_RETURN(HostResources h,
                             ContainerHost(c, ContainerWhere(key, "init container", c.name)));
    init_max.cpu_milli = std::max(init_max.cpu_milli, h.cpu_milli);
    init_max.memory_mib = std::max(init_max.memory_mib, h.memory_mib);
  }
  return HostResources{std::max(sum.cpu_milli, init_max.cpu_milli),
                       std::max(sum.memory_mib, init_max.memory_mib)};
}

Result<PodRequest> ReadPodRequest(const Json& pod, const ResourceNames& names) {
  TESSERA_ASSIGN_OR_RETURN(std::string key, PodKey(pod));
  TESSERA_ASSIGN_OR_RETURN(auto containers, ReadContainers(pod, key, "containers", /*required=*/true));
  TESSERA_ASSIGN_OR_RETURN(auto inits, ReadContainers(pod, key, "initContainers", /*required=*/false));
  PodRequest req;
  req.key = key;
  TESSERA_ASSIGN_OR_RETURN(HostResources host, HostOf(containers, inits, key));
  req.cpu_milli = host.cpu_milli;
  req.memory_mib = host.memory_mib;
  for (const auto& c : inits) {
    if (NamesAny(c, names))
      return InvalidArgument(ContainerWhere(key, "init container", c.name) +
                             ": GPU shares are only supported for regular containers; move " +
                             names.gpu + ", " + names.mem + " and " + names.core + " to one of them");
  }
  Json no_annotations = Json::object();
  const Json* annotations = &no_annotations;
  if (const Json* meta = Member(pod, "metadata")) {
    if (const Json* a = Member(*meta, "annotations"); a != nullptr && a->is_object()) annotations = a;
  }
  ModelSelector models;
  TESSERA_ASSIGN_OR_RETURN(models.allowed, ParseModels(*annotations, kModelAnnotation, key));
  TESSERA_ASSIGN_OR_RETURN(models.avoided, ParseModels(*annotations, kModelAvoidAnnotation, key));
  TESSERA_ASSIGN_OR_RETURN(req.priority, ParsePriority(*annotations, key));
  TESSERA_ASSIGN_OR_RETURN(req.isolation, ParseIsolation(*annotations, key));
  TESSERA_ASSIGN_OR_RETURN(req.core_hard, ParseCoreHard(*annotations, key));
  for (const auto& c : containers) {
    TESSERA_ASSIGN_OR_RETURN(ContainerRequest cr,
                             ContainerGpus(c, ContainerWhere(key, "container", c.name), names));
    if (cr.gpu_count > 0) cr.models = models;
    req.containers.push_back(std::move(cr));
  }
  TESSERA_ASSIGN_OR_RETURN(req.core_limit_milli, ParseCoreLimit(*annotations, req));
  TESSERA_RETURN_IF_ERROR(ValidateRequest(req));
  return req;
}

Result<int64_t> Allocatable(const Json& node, const std::string& name, const char* resource) {
  const Json* status = Member(node, "status");
  const Json* alloc = status ? Member(*status, "allocatable") : nullptr;
  const Json* v = alloc ? Member(*alloc, resource) : nullptr;
  const std::string where = "node " + name + ": status.allocatable." + resource;
  if (v == nullptr) return InvalidArgument(where + " is missing");
  auto text = QuantityText(*v);
  if (!text.ok()) return InvalidArgument(where + ": " + text.status().message());
  auto value = std::string_view(resource) == "cpu" ? ParseCpuMilli(*text) : ParseMemoryMiB(*text);
  if (!value.ok()) return InvalidArgument(where + ": " + value.status().message());
  return value;
}

Result<NodeInfo> ReadNode(const Json& node) {
  const Json* meta = Member(node, "metadata");
  const Json* name = meta ? Member(*meta, "name") : nullptr;
  if (name == nullptr || !name->is_string() || name->get<std::string>().empty())
    return InvalidArgument("node object has no metadata.name");
  NodeInfo info;
  info.name = name->get<std::string>();
  const Json* annotations = Member(*meta, "annotations");
  const Json* inventory = annotations ? Member(*annotations, kInventoryAnnotation) : nullptr;
  if (inventory == nullptr)
    return NotFound("not a GPU node (no " + std::string(kInventoryAnnotation) + " annotation)");
  if (!inventory->is_string())
    return InvalidArgument(std::string(kInventoryAnnotation) + ": must be a string");
  TESSERA_ASSIGN_OR_RETURN(info.gpus, DecodeInventory(inventory->get<std::string>()));
  std::sort(info.gpus.begin(), info.gpus.end(),
            [](const GpuInfo& a, const GpuInfo& b) { return a.index < b.index; });
  for (size_t i = 0; i < info.gpus.size(); ++i) {
    if (info.gpus[i].index != static_cast<int>(i)) {
      std::string list;
      for (const auto& g : info.gpus) list += (list.empty() ? "" : ", ") + std::to_string(g.index);
      return InvalidArgument(std::string(kInventoryAnnotation) +
                             ": GPU indexes must be 0..n-1 without gaps, got " + list);
    }
  }
  TESSERA_ASSIGN_OR_RETURN(info.cpu_milli, Allocatable(node, info.name, "cpu"));
  TESSERA_ASSIGN_OR_RETURN(info.memory_mib, Allocatable(node, info.name, "memory"));
  return info;
}

}  // namespace

std::vector<std::string> ResourceNames::All() const {
  std::vector<std::string> out = {gpu, mem, core};
  for (const std::string* n : GpushareNamesOf(*this)) out.push_back(*n);
  for (const std::string* n : HamiNamesOf(*this)) out.push_back(*n);
  return out;
}

std::string_view FrontEndName(FrontEnd front_end) {
  switch (front_end) {
    case FrontEnd::kTessera: return "tessera";
    case FrontEnd::kGpushare: return "gpushare";
    case FrontEnd::kHami: return "hami";
    case FrontEnd::kNone: break;
  }
  return "none";
}

namespace {
// `container` as a ContainerSpec without any checks (nullptr members when absent).
ContainerSpec LenientSpec(const Json& container) {
  ContainerSpec c;
  if (const Json* res = Member(container, "resources")) {
    if (const Json* l = Member(*res, "limits"); l != nullptr && l->is_object()) c.limits = l;
    if (const Json* r = Member(*res, "requests"); r != nullptr && r->is_object()) c.requests = r;
  }
  return c;
}
}  // namespace

FrontEnd FrontEndOf(const nlohmann::json& container, const ResourceNames& names) {
  const ContainerSpec c = LenientSpec(container);
  if (!NamesUsed(c, TesseraNames(names)).empty()) return FrontEnd::kTessera;
  if (!NamesUsed(c, GpushareNamesOf(names)).empty()) return FrontEnd::kGpushare;
  if (!NamesUsed(c, HamiNamesOf(names)).empty()) return FrontEnd::kHami;
  return FrontEnd::kNone;
}

int64_t GpushareGiB(const nlohmann::json& container, const ResourceNames& names) {
  const ContainerSpec c = LenientSpec(container);
  const char* from = "";
  const Json* v = Lookup(c, names.gpushare.mem, /*limits_first=*/true, &from);
  if (v == nullptr) return 0;
  auto text = QuantityText(*v);
  if (!text.ok()) return 0;
  auto n = ParseCount(*text);
  return n.ok() ? *n : 0;
}

Result<std::string> PodKey(const nlohmann::json& pod) {
  const Json* meta = Member(pod, "metadata");
  const Json* name = meta ? Member(*meta, "name") : nullptr;
  if (name == nullptr || !name->is_string() || name->get<std::string>().empty())
    return InvalidArgument("pod object has no metadata.name");
  std::string ns = "default";
  if (const Json* n = Member(*meta, "namespace"); n != nullptr && !n->is_null()) {
    if (!n->is_string()) return InvalidArgument("pod metadata.namespace must be a string");
    if (!n->get<std::string>().empty()) ns = n->get<std::string>();
  }
  return ns + "/" + name->get<std::string>();
}

Result<HostResources> PodHostResources(const nlohmann::json& pod) {
  try {
    TESSERA_ASSIGN_OR_RETURN(std::string key, PodKey(pod));
    TESSERA_ASSIGN_OR_RETURN(auto containers, ReadContainers(pod, key, "containers", true));
    TESSERA_ASSIGN_OR_RETURN(auto inits, ReadContainers(pod, key, "initContainers", false));
    return HostOf(containers, inits, key);
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("malformed pod object: ") + e.what());
  }
}

Result<PodRequest> PodRequestFromJson(const nlohmann::json& pod, const ResourceNames& names) {
  // The readers only use accessors that check types first; nothing nlohmann
  // throws may leave this file all the same.
  try {
    return ReadPodRequest(pod, names);
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("malformed pod object: ") + e.what());
  }
}

bool WantsGpu(const nlohmann::json& pod, const ResourceNames& names) {
  // Deliberately lenient: a malformed pod that names a GPU resource still
  // "wants" a GPU, so its mistakes are reported rather than ignored.
  const Json* spec = Member(pod, "spec");
  if (spec == nullptr) return false;
  const std::vector<std::string> all = names.All();
  for (const char* field : {"containers", "initContainers"}) {
    const Json* list = Member(*spec, field);
    if (list == nullptr || !list->is_array()) continue;
    for (const Json& c : *list) {
      const Json* res = Member(c, "resources");
      if (res == nullptr) continue;
      for (const char* part : {"requests", "limits"}) {
        const Json* m = Member(*res, part);
        if (m == nullptr) continue;
        for (const std::string& n : all)
          if (Member(*m, n) != nullptr) return true;
      }
    }
  }
  return false;
}

Result<NodeInfo> NodeInfoFromJson(const nlohmann::json& node) {
  try {
    return ReadNode(node);
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("malformed node object: ") + e.what());
  }
}

Result<PodRequest> HeldRequest(const nlohmann::json& pod, const std::string& key, const Assignment& assignment) {
  PodRequest req;
  req.key = key;
  if (auto host = PodHostResources(pod); host.ok()) {
    req.cpu_milli = host->cpu_milli;
    req.memory_mib = host->memory_mib;
  }
  for (const auto& ca : assignment.containers) {
    ContainerRequest c;
    c.name = ca.name;
    c.gpu_count = static_cast<int>(ca.gpus.size());
    if (!ca.gpus.empty()) {
      c.mem_mib_per_gpu = ca.gpus[0].mem_mib;
      c.core_milli_per_gpu = ca.gpus[0].core_milli;
      for (const auto& g : ca.gpus) {
        if (g.core_milli != c.core_milli_per_gpu)
          return InvalidArgument("container \"" + ca.name + "\" has unequal shares on its GPUs");
        if (g.mem_mib == c.mem_mib_per_gpu) continue;
        // Whole GPUs hold all of their memory (ShareMemMiB), which differs
        // between GPUs of different sizes.
        if (c.core_milli_per_gpu != kCoreMilliPerGpu)
          return InvalidArgument("container \"" + ca.name + "\" has unequal shares on its GPUs");
        c.mem_mib_per_gpu = 0;
      }
    }
    req.containers.push_back(std::move(c));
  }
  return req;
}

}  // namespace tessera::core
