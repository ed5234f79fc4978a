#include "scheduler/claim_advisor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <regex>

#include "core/quantity.h"
#include "kube/events.h"

namespace tessera::scheduler {

namespace {

using nlohmann::json;

constexpr const char* kResourceApi = "/apis/resource.k8s.io/v1";

std::string Str(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}
const json& Obj(const json& j, const char* key) {
  static const json kEmpty = json::object();
  const auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}
const json& Arr(const json& j, const char* key) {
  static const json kEmpty = json::array();
  const auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : kEmpty;
}

// The expression's terms joined by `&&` at the top level (outside quotes,
// parentheses and brackets); none when a top-level `||` or `?` makes the
// terms not each required, and none for text this simple scan could split
// wrongly: escapes, triple-quoted or raw strings, comments.
std::vector<std::string> TopLevelConjuncts(const std::string& e) {
  if (e.find('\\') != std::string::npos || e.find("\"\"\"") != std::string::npos ||
      e.find("'''") != std::string::npos) {
    return {};
  }
  std::vector<std::string> out;
  int depth = 0;
  char quote = 0;
  size_t start = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    const char c = e[i];
    if (quote != 0) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    else if (c == '/' && i + 1 < e.size() && e[i + 1] == '/') return {};  // a comment
    else if (c == '(' || c == '[' || c == '{') ++depth;
    else if (c == ')' || c == ']' || c == '}') --depth;
    else if (depth == 0 && c == '?') return {};
    else if (depth == 0 && i + 1 < e.size() && c == '|' && e[i + 1] == '|') return {};
    else if (depth == 0 && i + 1 < e.size() && c == '&' && e[i + 1] == '&') {
      out.push_back(e.substr(start, i - start));
      start = i + 2;
      ++i;
    }
  }
  if (quote != 0 || depth != 0) return {};  // not an expression we can read
  out.push_back(e.substr(start));
  return out;
}

// `term` without surrounding blanks and parentheses that enclose all of it.
std::string Unwrap(std::string term) {
  while (true) {
    const size_t first = term.find_first_not_of(" \t\n\r");
    const size_t last = term.find_last_not_of(" \t\n\r");
    if (first == std::string::npos) return "";
    term = term.substr(first, last - first + 1);
    if (term.size() < 2 || term.front() != '(' || term.back() != ')') return term;
    int depth = 0;
    for (size_t i = 0; i + 1 < term.size(); ++i) {  // does the first '(' close before the end?
      if (term[i] == '(') ++depth;
      if (term[i] == ')' && --depth == 0) return term;
    }
    term = term.substr(1, term.size() - 2);
  }
}

// "models published: A100, H100", at most 10 values named.
std::string Published(const std::string& attribute, const std::set<std::string>& values) {
  constexpr size_t kMost = 10;
  std::string out = attribute + "s published: ";
  size_t n = 0;
  for (const std::string& v : values) {
    if (n == kMost) {
      out += ", ... (" + std::to_string(values.size()) + " in all)";
      break;
    }
    out += (n++ == 0 ? "" : ", ") + v;
  }
  return out;
}

// Why no GPU of the driver matches the claim's own selectors of `request`,
// "" when one may (or they say nothing RequiredEqualities can read).
std::string SelectorReason(const json& request, const DraGpus& gpus, const std::string& driver) {
  std::vector<AttributeEquals> wanted;
  for (const json& selector : Arr(request, "selectors")) {
    for (AttributeEquals& e : RequiredEqualities(Str(Obj(selector, "cel"), "expression"), driver)) {
      wanted.push_back(std::move(e));
    }
  }
  // Only attributes some GPU publishes as a string are judged.
  std::map<std::string, std::set<std::string>> published;
  for (const auto& attributes : gpus.string_attributes) {
    for (const auto& [name, value] : attributes) published[name].insert(value);
  }
  std::erase_if(wanted, [&](const AttributeEquals& e) { return !published.contains(e.name); });
  if (wanted.empty()) return "";
  for (const auto& attributes : gpus.string_attributes) {
    if (std::all_of(wanted.begin(), wanted.end(), [&](const AttributeEquals& e) {
          const auto it = attributes.find(e.name);
          return it != attributes.end() && it->second == e.value;
        })) {
      return "";
    }
  }
  std::string has, values;
  std::set<std::string> named;
  for (const AttributeEquals& e : wanted) {
    has += (has.empty() ? "" : " and ") + e.name + " " + e.value;
    if (named.insert(e.name).second) values += (values.empty() ? "" : "; ") + Published(e.name, published[e.name]);
  }
  return "selects a GPU with " + has + ", but no GPU of driver " + driver + " has " + has + " (" + values + ")";
}

// Why one request (an `exactly` or one subrequest of `firstAvailable`) can
// never be met, "" when it might or is not the driver's.
std::string RequestReason(const json& request, const std::set<std::string>& classes, const DraGpus& gpus,
                          const std::string& driver) {
  if (!classes.count(Str(request, "deviceClassName"))) return "";
  if (gpus.devices == 0) {
    return "asks a GPU of driver " + driver +
           ", but no node publishes one now (tessera-node runs the driver with --dra; chart value dra.enabled)";
  }
  if (std::string why = SelectorReason(request, gpus, driver); !why.empty()) return why;
  const json& capacity = Obj(Obj(request, "capacity"), "requests");
  if (const std::string memory = Str(capacity, "memory"); !memory.empty()) {
    auto mib = core::ParseMemoryMiB(memory);
    if (mib.ok() && *mib > gpus.largest_memory_mib) {
      return "asks " + std::to_string(*mib) + " MiB of GPU memory (" + memory + "); the largest GPU of driver " +
             driver + " has " + std::to_string(gpus.largest_memory_mib) + " MiB (" + gpus.largest + ")";
    }
  }
  if (const std::string compute = Str(capacity, "compute"); !compute.empty()) {
    auto q = core::ParseQuantity(compute);
    if (q.ok() && q->milli > gpus.compute_percent * 1000) {
      return "asks compute " + compute + " (percent of a GPU); a GPU of driver " + driver + " offers at most " +
             std::to_string(gpus.compute_percent);
    }
  }
  const std::string mode = Str(request, "allocationMode");
  if (mode.empty() || mode == "ExactCount") {
    const int64_t count = request.value("count", int64_t{1});
    if (count > gpus.most_on_one_node) {
      return "asks " + std::to_string(count) + " GPUs; no node has more than " + std::to_string(gpus.most_on_one_node) +
             " GPU(s) of driver " + driver + " (a claim's GPUs are on one node)";
    }
  }
  return "";
}

}  // namespace

std::vector<AttributeEquals> RequiredEqualities(const std::string& expression, const std::string& driver) {
  // device.attributes["<domain>"].name or ["name"], == a string literal; either order.
  static const std::regex kAttribute(
      R"re(device\.attributes\[\s*(["'])([^"'\\]+)\1\s*\](?:\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*(["'])([A-Za-z_][A-Za-z0-9_]*)\4\s*\]))re");
  static const std::regex kLiteral(R"re((["'])([^"'\\]*)\1)re");
  std::vector<AttributeEquals> out;
  for (const std::string& conjunct : TopLevelConjuncts(expression)) {
    const std::string term = Unwrap(conjunct);
    const size_t eq = term.find("==");
    if (eq == std::string::npos || term.find("==", eq + 2) != std::string::npos) continue;
    std::string left = Unwrap(term.substr(0, eq)), right = Unwrap(term.substr(eq + 2));
    std::smatch attribute, literal;
    if (!std::regex_match(left, attribute, kAttribute)) std::swap(left, right);
    if (!std::regex_match(left, attribute, kAttribute) || !std::regex_match(right, literal, kLiteral)) continue;
    if (attribute[2].str() != driver) continue;
    out.push_back({attribute[3].matched ? attribute[3].str() : attribute[5].str(), literal[2].str()});
  }
  return out;
}

DraGpus DraGpusFrom(const std::vector<json>& slices, const std::string& driver) {
  DraGpus out;
  out.compute_percent = 0;
  std::map<std::string, int> per_node;
  for (const json& slice : slices) {
    const json& spec = Obj(slice, "spec");
    if (Str(spec, "driver") != driver) continue;
    const std::string node = Str(spec, "nodeName");
    for (const json& device : Arr(spec, "devices")) {
      ++out.devices;
      ++per_node[node];
      std::map<std::string, std::string> strings;
      for (const auto& [name, value] : Obj(device, "attributes").items()) {
        if (value.is_object() && value.contains("string") && value["string"].is_string()) {
          strings[name] = value["string"].get<std::string>();
        }
      }
      out.string_attributes.push_back(std::move(strings));
      const json& capacity = Obj(device, "capacity");
      auto mib = core::ParseMemoryMiB(Str(Obj(capacity, "memory"), "value"));
      if (mib.ok() && *mib > out.largest_memory_mib) {
        out.largest_memory_mib = *mib;
        out.largest = Str(device, "name") + " on node " + node;
      }
      if (auto q = core::ParseQuantity(Str(Obj(capacity, "compute"), "value")); q.ok()) {
        out.compute_percent = std::max(out.compute_percent, q->milli / 1000);
      }
    }
  }
  for (const auto& [node, n] : per_node) out.most_on_one_node = std::max(out.most_on_one_node, n);
  if (out.compute_percent == 0) out.compute_percent = 100;  // none published: Tessera's own scale
  return out;
}

std::set<std::string> DriverClasses(const std::vector<json>& classes, const std::string& driver) {
  std::set<std::string> out;
  const std::string quoted = "\"" + driver + "\"";
  for (const json& c : classes) {
    for (const json& selector : Arr(Obj(c, "spec"), "selectors")) {
      if (Str(Obj(selector, "cel"), "expression").find(quoted) != std::string::npos) {
        out.insert(Str(Obj(c, "metadata"), "name"));
        break;
      }
    }
  }
  return out;
}

std::string UnsatisfiableReason(const json& claim, const std::set<std::string>& classes, const DraGpus& gpus,
                                const std::string& driver) {
  const json& meta = Obj(claim, "metadata");
  const std::string who = "claim " + Str(meta, "namespace") + "/" + Str(meta, "name");
  for (const json& request : Arr(Obj(Obj(claim, "spec"), "devices"), "requests")) {
    const std::string name = "request \"" + Str(request, "name") + "\"";
    if (request.contains("exactly")) {
      if (std::string why = RequestReason(Obj(request, "exactly"), classes, gpus, driver); !why.empty()) {
        return who + " " + name + " " + why;
      }
      continue;
    }
    const json& alternatives = Arr(request, "firstAvailable");
    if (alternatives.empty()) continue;
    std::string whys;
    bool all = true;
    for (const json& sub : alternatives) {
      const std::string why = RequestReason(sub, classes, gpus, driver);
      if (why.empty()) {
        all = false;
        break;
      }
      whys += (whys.empty() ? "" : "; ") + ("\"" + Str(sub, "name") + "\" " + why);
    }
    if (all) return who + " " + name + ": none of its alternatives can be met: " + whys;
  }
  return "";
}

bool UnschedulableWithClaims(const json& pod) {
  const json& spec = Obj(pod, "spec");
  if (Arr(spec, "resourceClaims").empty() || !Str(spec, "nodeName").empty()) return false;
  for (const json& c : Arr(Obj(pod, "status"), "conditions")) {
    if (Str(c, "type") == "PodScheduled") return Str(c, "status") == "False" && Str(c, "reason") == "Unschedulable";
  }
  return false;
}

std::vector<std::string> PodClaimNames(const json& pod) {
  std::vector<std::string> out;
  for (const json& s : Arr(Obj(pod, "status"), "resourceClaimStatuses")) {
    if (const std::string n = Str(s, "resourceClaimName"); !n.empty()) out.push_back(n);
  }
  for (const json& c : Arr(Obj(pod, "spec"), "resourceClaims")) {
    if (const std::string n = Str(c, "resourceClaimName"); !n.empty()) out.push_back(n);
  }
  return out;
}

ClaimAdvisor::ClaimAdvisor(kube::Api& api, ClaimAdvisorOptions options) : api_(api), options_(std::move(options)) {}

ClaimAdvisor::~ClaimAdvisor() { Stop(); }

void ClaimAdvisor::Observe(const json& pod) {
  if (Arr(Obj(pod, "spec"), "resourceClaims").empty()) return;  // most pods: no lock taken
  const std::string uid = Str(Obj(pod, "metadata"), "uid");
  MutexLock lock(mu_);
  if (UnschedulableWithClaims(pod)) {
    waiting_[uid] = pod;
  } else {
    waiting_.erase(uid);
    advised_.erase(uid);
  }
}

void ClaimAdvisor::Forget(const json& pod) {
  const std::string uid = Str(Obj(pod, "metadata"), "uid");
  MutexLock lock(mu_);
  waiting_.erase(uid);
  advised_.erase(uid);
}

Result<int> ClaimAdvisor::RunOnce() {
  if (options_.may_act && !options_.may_act().ok()) return 0;
  std::vector<json> candidates;
  {
    MutexLock lock(mu_);
    for (const auto& [uid, pod] : waiting_) {
      if (!advised_.count(uid)) candidates.push_back(pod);
    }
  }
  if (candidates.empty()) return 0;

  TESSERA_ASSIGN_OR_RETURN(json slices, api_.List(std::string(kResourceApi) + "/resourceslices", "",
                                                  "spec.driver=" + options_.driver));
  TESSERA_ASSIGN_OR_RETURN(json classes, api_.List(std::string(kResourceApi) + "/deviceclasses"));
  const DraGpus gpus = DraGpusFrom(slices.value("items", std::vector<json>{}), options_.driver);
  const std::set<std::string> ours = DriverClasses(classes.value("items", std::vector<json>{}), options_.driver);
  int posted = 0;
  for (const json& pod : candidates) {
    const json& meta = Obj(pod, "metadata");
    const std::string ns = Str(meta, "namespace"), name = Str(meta, "name"), uid = Str(meta, "uid");
    const std::vector<std::string> claims = PodClaimNames(pod);
    if (claims.size() < Arr(Obj(pod, "spec"), "resourceClaims").size()) continue;  // a claim not made yet: next pass
    std::string why;
    bool read_all = true;
    for (const std::string& claim : claims) {
      auto object = api_.Get(std::string(kResourceApi) + "/namespaces/" + ns + "/resourceclaims/" + claim);
      if (!object.ok()) {
        if (object.status().code() != StatusCode::kNotFound) return object.status();
        read_all = false;  // made a moment later: next pass
        continue;
      }
      why = UnsatisfiableReason(*object, ours, gpus, options_.driver);
      if (!why.empty()) break;
    }
    if (!why.empty()) {
      kube::EventSpec event;
      event.object = {.kind = "Pod", .api_version = "v1", .ns = ns, .name = name, .uid = uid};
      event.reason = kClaimUnsatisfiableReason;
      event.message = why;
      event.component = "tessera-scheduler";
      const json body = kube::BuildEvent(event, std::chrono::system_clock::now());
      TESSERA_RETURN_IF_ERROR(api_.Create(kube::EventsPath(ns), body).status());
      spdlog::info("pod {}/{}: {}", ns, name, why);
      ++posted;
    }
    // A pod is looked at once: its claims' requests never change, and a
    // claim that fits some GPU now waits for room, which is
    // kube-scheduler's to say.
    if (!why.empty() || read_all) {
      MutexLock lock(mu_);
      advised_.insert(uid);
    }
  }
  return posted;
}

void ClaimAdvisor::Start() {
  thread_ = std::thread([this] {
    std::string last_error;
    while (true) {
      {
        MutexLock lock(mu_);
        if (wake_.WaitFor(mu_, options_.period, [this] {
              mu_.AssertHeld();
              return stopping_;
            })) {
          return;
        }
      }
      auto done = RunOnce();
      const std::string error = done.ok() ? "" : std::string(done.status().message());
      if (error != last_error && !error.empty()) spdlog::warn("claim advice: {} (retried every pass)", error);
      last_error = error;
    }
  });
}

void ClaimAdvisor::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    wake_.NotifyAll();
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace tessera::scheduler
