#include "core/podspec.h"

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/codec.h"
#include "core/pod_view.h"
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

// "a, b, c".
std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
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

// The value of `resource` in the limits, else the requests (how every GPU
// resource is read); nullptr when neither names it.
const Json* Limit(const ContainerSpec& c, const std::string& resource) {
  const char* from = "";
  return Lookup(c, resource, /*limits_first=*/true, &from);
}

// "WHERE: RESOURCE: WHAT": how every mistake in one resource of a container reads.
Status ResourceError(const std::string& where, const std::string& resource, const std::string& what) {
  return InvalidArgument(where + ": " + resource + ": " + what);
}

// A host quantity, `resource` "cpu" (milli) or "memory" (MiB); the error
// message says only what is wrong with the value.
Result<int64_t> HostQuantity(const Json& value, std::string_view resource) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, QuantityText(value));
  return resource == "cpu" ? ParseCpuMilli(text) : ParseMemoryMiB(text);
}

// CPU and memory of one container (requests, else limits).
Result<HostResources> ContainerHost(const ContainerSpec& c, const std::string& where) {
  HostResources out;
  for (auto [resource, slot] : {std::pair{"cpu", &out.cpu_milli}, std::pair{"memory", &out.memory_mib}}) {
    const char* from = "";
    const Json* v = Lookup(c, resource, /*limits_first=*/false, &from);
    if (v == nullptr) continue;
    auto n = HostQuantity(*v, resource);
    if (!n.ok()) return ResourceError(where, std::string("resources.") + from + "." + resource, n.status().message());
    *slot = *n;
  }
  return out;
}

// A whole-number extended resource; `unit` completes "write a whole number of ...".
Result<int64_t> ParseWhole(const Json& value, const std::string& where, const std::string& resource,
                           std::string_view unit, std::string_view example) {
  auto text = QuantityText(value);
  if (!text.ok()) return ResourceError(where, resource, text.status().message());
  auto n = ParseCount(*text);
  if (n.ok()) return n;
  std::string what = "\"" + *text + "\" is not a whole number";
  if (!text->empty() && text->front() == '-') what = "\"" + *text + "\" is negative";
  if (n.status().message().find("too large") != std::string::npos) what = n.status().message();
  return ResourceError(where, resource, what + "; write a whole number of " + std::string(unit) + " such as \"" +
                                            std::string(example) + "\"");
}

// The text of `value` when it is a string with a binary unit suffix ("8Gi"):
// the resources counted in MiB or GiB take plain numbers, so callers say so.
std::optional<std::string> UnitSuffixed(const Json& value) {
  if (!value.is_string()) return std::nullopt;
  std::string text = value.get<std::string>();
  if (text.size() >= 2 && text.back() == 'i') return text;
  return std::nullopt;
}

// GPU memory is a count of MiB; "8Gi" would mean 8 * 2^30 MiB, so say so.
Result<int64_t> ParseGpuMem(const Json& value, const std::string& where, const std::string& resource) {
  if (const auto text = UnitSuffixed(value)) {
    auto q = ParseQuantity(*text);
    std::string hint;
    if (q.ok() && q->milli % (int64_t{1000} << 20) == 0)
      hint = ": write \"" + std::to_string(q->milli / (int64_t{1000} << 20)) + "\"";
    return ResourceError(where, resource,
                         "\"" + *text + "\" has a unit suffix; the value is a plain number of MiB" + hint);
  }
  return ParseWhole(value, where, resource, "MiB", "8192");
}

// The number of GPUs a container spans, `resource` naming the count.
Result<int> ParseGpuCount(const Json& value, const std::string& where, const std::string& resource) {
  TESSERA_ASSIGN_OR_RETURN(int64_t n, ParseWhole(value, where, resource, "GPUs", "1"));
  if (n > kMaxGpusPerContainer)
    return ResourceError(where, resource, std::to_string(n) + " GPUs is more than any node has (max 64)");
  return static_cast<int>(n);
}

// A percent of one GPU's compute as core milli per GPU. Over 100 points the
// user at `gpu` (the count's name), "to the number of " + `gpus`.
Result<int64_t> ParseCoreMilli(const Json& value, const std::string& where, const std::string& resource,
                               const std::string& gpu, std::string_view gpus) {
  TESSERA_ASSIGN_OR_RETURN(int64_t percent, ParseWhole(value, where, resource, "percent", "30"));
  if (percent > kMaxCorePercent)
    return ResourceError(where, resource, std::to_string(percent) + " is over 100 (percent of one GPU); for more "
                                          "than one GPU set " + gpu + " to the number of " + std::string(gpus));
  return percent * (kCoreMilliPerGpu / kMaxCorePercent);
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

// The text of annotation `name` (a non-string as its JSON); nullopt when absent.
std::optional<std::string> AnnotationText(const Json& annotations, std::string_view name) {
  const Json* v = Member(annotations, name);
  if (v == nullptr) return std::nullopt;
  return v->is_string() ? v->get<std::string>() : v->dump();
}

// Annotation `name` as one of `choices` (text, value), or `absent` when the
// pod does not set it; INVALID_ARGUMENT listing the choices otherwise.
template <typename T>
Result<T> ParseChoice(const Json& annotations, std::string_view name, std::string_view key, T absent,
                      std::initializer_list<std::pair<std::string_view, T>> choices) {
  const std::optional<std::string> text = AnnotationText(annotations, name);
  if (!text) return absent;
  std::vector<std::string> listed;
  for (const auto& [choice, value] : choices) {
    if (*text == choice) return value;
    listed.emplace_back(choice);
  }
  return InvalidArgument(std::string(key) + ": annotation " + std::string(name) + ": \"" + *text +
                         "\" is not one of " + JoinNames(listed));
}

Result<Priority> ParsePriority(const Json& annotations, std::string_view key) {
  return ParseChoice(annotations, kPriorityAnnotation, key, Priority::kNormal,
                     {{"high", Priority::kHigh}, {"normal", Priority::kNormal}, {"low", Priority::kLow}});
}

Result<Isolation> ParseIsolation(const Json& annotations, std::string_view key) {
  return ParseChoice(annotations, kIsolationAnnotation, key, Isolation::kHook,
                     {{IsolationName(Isolation::kHook), Isolation::kHook},
                      {IsolationName(Isolation::kMps), Isolation::kMps},
                      {IsolationName(Isolation::kNone), Isolation::kNone}});
}

Result<bool> ParseCoreHard(const Json& annotations, std::string_view key) {
  return ParseChoice(annotations, kCorePolicyAnnotation, key, false, {{"share", false}, {"hard", true}});
}

// tessera.io/gpu-core-limit as core milli per GPU (0 when absent), checked
// against the pod's GPU containers and policy.
Result<int64_t> ParseCoreLimit(const Json& annotations, const PodRequest& req) {
  const std::optional<std::string> annotation = AnnotationText(annotations, kCoreLimitAnnotation);
  if (!annotation) return 0;
  const std::string& text = *annotation;
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
                             " percent; the ceiling must be at least the request");
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

// One front end's resource names; none when it is disabled.
struct Vocabulary {
  FrontEnd front_end;
  std::vector<const std::string*> names;
};

// Every vocabulary a container may ask in, in the order FrontEndOf tries them
// and errors list their names: Tessera, gpushare, HAMi.
std::vector<Vocabulary> Vocabularies(const ResourceNames& names) {
  const GpushareNames& gs = names.gpushare;
  const HamiNames& hami = names.hami;
  std::vector<Vocabulary> out = {{FrontEnd::kTessera, {&names.gpu, &names.mem, &names.core}},
                                 {FrontEnd::kGpushare, {}},
                                 {FrontEnd::kHami, {}}};
  if (gs.enabled) out[1].names = {&gs.mem};
  if (hami.enabled) out[2].names = {&hami.gpu, &hami.mem, &hami.mem_percent, &hami.core};
  return out;
}

// The vocabulary `c` asks in (the first one whose names it uses), kNone when
// it names no GPU resource.
FrontEnd VocabularyOf(const ContainerSpec& c, const ResourceNames& names) {
  for (const Vocabulary& v : Vocabularies(names))
    if (!NamesUsed(c, v.names).empty()) return v.front_end;
  return FrontEnd::kNone;
}

// gpushare: GiB of one GPU's memory; the container gets exactly one GPU.
Result<ContainerRequest> GpushareGpus(const ContainerSpec& c, const std::string& where,
                                      const GpushareNames& names) {
  ContainerRequest out;
  out.name = c.name;
  const Json* mem = Limit(c, names.mem);
  if (mem == nullptr) return out;
  if (const auto text = UnitSuffixed(*mem))
    return ResourceError(where, names.mem,
                         "\"" + *text + "\" has a unit suffix; gpushare counts GiB as a plain number, such as \"3\"");
  TESSERA_ASSIGN_OR_RETURN(int64_t gib, ParseWhole(*mem, where, names.mem, "GiB", "3"));
  if (gib == 0) return out;  // gpushare: 0 asks for no GPU
  if (gib > (int64_t{1} << 20))
    return ResourceError(where, names.mem, std::to_string(gib) + " GiB is more than any GPU has");
  out.gpu_count = 1;
  out.mem_mib_per_gpu = gib * 1024;
  return out;
}

// HAMi's gpumem-percentage: only 100 (the whole memory) has a meaning here.
Status CheckHamiMemPercent(const Json& value, const std::string& where, const HamiNames& names) {
  TESSERA_ASSIGN_OR_RETURN(int64_t p, ParseWhole(value, where, names.mem_percent, "percent", "50"));
  if (p > 100)
    return ResourceError(where, names.mem_percent, std::to_string(p) + " is over 100 (percent of one GPU's memory)");
  if (p == 0)
    return ResourceError(where, names.mem_percent,
                         "0 asks for no memory; write 100 for the whole memory, or " + names.mem + " in MiB");
  if (p != 100)
    return ResourceError(where, names.mem_percent,
                         std::to_string(p) + " percent is not supported (Tessera sizes memory shares in MiB, so a percent "
                         "would depend on the GPU chosen); write " + names.mem + " in MiB instead, or 100 for the "
                         "whole memory");
  return Status::Ok();
}

// What a container sets among a GPU count, MiB per GPU and percent of
// compute per GPU (Tessera's names or HAMi's), each value parsed and checked
// in that order: memory, compute, count. nullptr and 0 for what it leaves out.
struct CountMemCore {
  const Json* count = nullptr;
  const Json* mem = nullptr;
  const Json* core = nullptr;
  int gpu_count = 0;
  int64_t mem_mib = 0;
  int64_t core_milli = 0;
};

// `gpus` ends the hint for a core share over 100: "set GPU to the number of ...".
Result<CountMemCore> ReadCountMemCore(const ContainerSpec& c, const std::string& where, const std::string& gpu,
                                      const std::string& mem, const std::string& core, std::string_view gpus) {
  CountMemCore out;
  out.count = Limit(c, gpu);
  out.mem = Limit(c, mem);
  out.core = Limit(c, core);
  if (out.mem != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(out.mem_mib, ParseGpuMem(*out.mem, where, mem));
  }
  if (out.core != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(out.core_milli, ParseCoreMilli(*out.core, where, core, gpu, gpus));
  }
  if (out.count != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(out.gpu_count, ParseGpuCount(*out.count, where, gpu));
  }
  return out;
}

// HAMi: count, then per GPU MiB or percent of memory, and percent of compute.
Result<ContainerRequest> HamiGpus(const ContainerSpec& c, const std::string& where, const HamiNames& names) {
  ContainerRequest out;
  out.name = c.name;
  const Json* percent = Limit(c, names.mem_percent);
  if (percent != nullptr && Limit(c, names.mem) != nullptr)
    return InvalidArgument(where + ": sets both " + names.mem + " and " + names.mem_percent +
                           "; keep one (MiB or percent of the GPU's memory)");
  // Before the other values, so a bad percent is the error reported first
  // (with no MiB value beside it, as just checked).
  if (percent != nullptr) TESSERA_RETURN_IF_ERROR(CheckHamiMemPercent(*percent, where, names));
  TESSERA_ASSIGN_OR_RETURN(CountMemCore set, ReadCountMemCore(c, where, names.gpu, names.mem, names.core, "GPUs"));
  out.mem_mib_per_gpu = set.mem_mib;
  out.core_milli_per_gpu = set.core_milli;
  const bool whole_memory = percent != nullptr && out.mem_mib_per_gpu == 0;
  if (set.count != nullptr) {
    out.gpu_count = set.gpu_count;
  } else if (out.mem_mib_per_gpu > 0 || out.core_milli_per_gpu > 0 || whole_memory) {
    out.gpu_count = 1;  // HAMi: a share without a count asks for one GPU
  }
  if (out.gpu_count == 0) {
    if (out.mem_mib_per_gpu > 0 || out.core_milli_per_gpu > 0)
      return ResourceError(where, names.gpu, "0 GPUs, yet " + names.mem + " or " + names.core +
                                             " is set; ask for at least one GPU");
    return out;
  }
  // No memory size, or all of it: the whole memory. Tessera holds a GPU's
  // whole memory only with the whole GPU, so that is what the share becomes.
  if (out.mem_mib_per_gpu == 0 && (out.core_milli_per_gpu == 0 || whole_memory)) {
    if (out.core_milli_per_gpu != 0 && out.core_milli_per_gpu != kCoreMilliPerGpu)
      return ResourceError(where, names.mem_percent, "100 with " + names.core +
                                                     " below 100 is not supported (a GPU's whole memory comes with "
                                                     "the whole GPU); write " + names.mem + " in MiB instead");
    out.core_milli_per_gpu = kCoreMilliPerGpu;
  }
  return out;
}

// The GPU part of one container's request, in Tessera's own names.
Result<ContainerRequest> TesseraGpus(const ContainerSpec& c, const std::string& where, const ResourceNames& names) {
  ContainerRequest out;
  out.name = c.name;
  TESSERA_ASSIGN_OR_RETURN(CountMemCore set,
                           ReadCountMemCore(c, where, names.gpu, names.mem, names.core, "whole GPUs"));
  out.mem_mib_per_gpu = set.mem_mib;
  out.core_milli_per_gpu = set.core_milli;
  // 0 % of a GPU's compute is no share of it: a pod asking it would run
  // unlimited on a GPU whose compute may be fully booked. A share of memory
  // alone leaves gpu-core out.
  if (set.core != nullptr && set.core_milli == 0)
    return ResourceError(where, names.core, "0 is not a share of compute: ask for 1 to 100 (percent of one GPU), "
                                            "or leave " + names.core + " out for a share of memory alone");
  if (set.count != nullptr) {
    out.gpu_count = set.gpu_count;
  } else if (set.mem != nullptr || set.core != nullptr) {
    out.gpu_count = 1;
  }
  // The count alone asks for whole GPUs.
  if (set.count != nullptr && set.mem == nullptr && set.core == nullptr) out.core_milli_per_gpu = kCoreMilliPerGpu;
  return out;
}

// The GPU part of one container's request, in whichever vocabulary it uses.
// Using names of two vocabularies is a mistake: say which.
Result<ContainerRequest> ContainerGpus(const ContainerSpec& c, const std::string& where,
                                       const ResourceNames& names) {
  std::vector<std::string> used;
  int vocabularies = 0;
  FrontEnd front_end = FrontEnd::kNone;
  for (const Vocabulary& v : Vocabularies(names)) {
    const std::vector<std::string> in_v = NamesUsed(c, v.names);
    if (in_v.empty()) continue;
    ++vocabularies;
    front_end = v.front_end;
    used.insert(used.end(), in_v.begin(), in_v.end());
  }
  if (vocabularies > 1)
    return InvalidArgument(where + ": mixes GPU resources of different front ends (" + JoinNames(used) +
                           "); ask in one of them: Tessera's (" + names.mem + "), gpushare's (" +
                           names.gpushare.mem + ") or HAMi's (" + names.hami.mem + ")");
  switch (front_end) {
    case FrontEnd::kGpushare: return GpushareGpus(c, where, names.gpushare);
    case FrontEnd::kHami: return HamiGpus(c, where, names.hami);
    case FrontEnd::kTessera:
    case FrontEnd::kNone: break;
  }
  return TesseraGpus(c, where, names);
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
    if (VocabularyOf(c, names) != FrontEnd::kNone)
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
  auto value = HostQuantity(*v, resource);
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
  std::vector<std::string> out;
  for (const Vocabulary& v : Vocabularies(*this))
    for (const std::string* n : v.names) out.push_back(*n);
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
  return VocabularyOf(LenientSpec(container), names);
}

int64_t GpushareGiB(const nlohmann::json& container, const ResourceNames& names) {
  const Json* v = Limit(LenientSpec(container), names.gpushare.mem);
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
  for (const char* field : {"containers", "initContainers"}) {
    const Json* list = Member(*spec, field);
    if (list == nullptr || !list->is_array()) continue;
    for (const Json& c : *list)
      if (VocabularyOf(LenientSpec(c), names) != FrontEnd::kNone) return true;
  }
  return false;
}

int64_t AllocatableCount(const nlohmann::json& node, std::string_view resource) {
  const Json* status = Member(node, "status");
  const Json* alloc = status != nullptr ? Member(*status, "allocatable") : nullptr;
  const Json* v = alloc != nullptr ? Member(*alloc, resource) : nullptr;
  if (v == nullptr || !v->is_string()) return 0;
  Result<int64_t> n = ParseCount(v->get_ref<const std::string&>());
  return n.ok() ? *n : 0;
}

std::vector<std::string> SlotResources(const ResourceNames& names) {
  std::vector<std::string> r{names.gpu};
  if (names.hami.enabled) r.push_back(names.hami.gpu);
  return r;
}

int64_t ListedSlots(const NodeInfo& node) {
  if (node.gpus.empty()) return -1;
  int64_t listed = 0;
  for (const GpuInfo& g : node.gpus) {
    if (g.max_sharers <= 0) return -1;
    listed += g.max_sharers;
  }
  return listed;
}

Result<NodeInfo> NodeInfoFromJson(const nlohmann::json& node) {
  try {
    return ReadNode(node);
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string("malformed node object: ") + e.what());
  }
}

Result<PodRequest> HeldRequest(const nlohmann::json& pod, const std::string& key, const Assignment& assignment) {
  PodView view;
  view.key = key;
  if (auto host = PodHostResources(pod); host.ok()) view.host = *host;
  return HeldRequest(view, assignment);
}

}  // namespace tessera::core
