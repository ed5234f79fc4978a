#include "scheduler/wire.h"

#include "scheduler/internal/json_scan.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <optional>

namespace tessera::scheduler {
namespace {

using Json = nlohmann::json;

const Json* Member(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

constexpr int kMaxDepth = internal::kMaxJsonDepth;

// The deepest nesting of arrays and objects in `text`, ignoring brackets in
// strings. Stops counting at kMaxDepth + 1.
int NestingDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
      if (deepest > kMaxDepth) break;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

Result<Json> ParseBody(std::string_view body, std::string_view what) {
  if (NestingDepth(body) > kMaxDepth)
    return InvalidArgument("request body is nested more than " + std::to_string(kMaxDepth) + " levels deep (" +
                           std::string(what) + ")");
  Json root = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return InvalidArgument("request body is not valid JSON (" + std::string(what) + ")");
  if (!root.is_object()) return InvalidArgument("request body must be a JSON object (" + std::string(what) + ")");
  return root;
}

Result<std::string> StringField(const Json& obj, const char* key, bool required) {
  const Json* v = Member(obj, key);
  if (v == nullptr) {
    if (required) return InvalidArgument(std::string("ExtenderBindingArgs.") + key + " is missing");
    return std::string();
  }
  if (!v->is_string()) return InvalidArgument(std::string("ExtenderBindingArgs.") + key + " must be a string");
  return v->get<std::string>();
}

// A node name: copied as is when the request said they are all plain.
void AppendName(std::string& out, const ExtenderArgs& args, size_t i) {
  if (!args.plain_names()) return AppendJsonString(out, args.node_names()[i]);
  out += '"';
  out += args.node_names()[i];
  out += '"';
}

void AppendReasons(std::string& out, const char* key, const ExtenderArgs& args,
                   const std::vector<std::pair<size_t, std::string_view>>& reasons) {
  out += ",\"";
  out += key;
  out += "\":{";
  bool first = true;
  for (const auto& [i, reason] : reasons) {
    if (!first) out += ',';
    first = false;
    AppendName(out, args, i);
    out += ':';
    AppendJsonString(out, reason);
  }
  out += '}';
}

Json ParseText(std::string_view text) { return Json::parse(text.begin(), text.end(), nullptr, false); }

// ExtenderArgs.NodeNames as a list.
Result<NodeNamesCache::List> ParseNodeNames(std::string_view names_text) {
  NodeNamesCache::List out;
  if (auto plain = internal::PlainStringArray(names_text)) {
    out.names = std::move(*plain);
    out.plain = true;
    return out;
  }
  const Json list = ParseText(names_text);
  if (list.is_discarded()) return InvalidArgument("ExtenderArgs.NodeNames is not valid JSON");
  if (!list.is_array()) return InvalidArgument("ExtenderArgs.NodeNames must be an array of node names");
  out.names.reserve(list.size());
  for (const Json& n : list) {
    if (!n.is_string()) return InvalidArgument("ExtenderArgs.NodeNames must be an array of node names");
    out.names.push_back(n.get<std::string>());
  }
  return out;
}

// ExtenderArgs.NodeNames (from `cache` when it has the text), else
// ExtenderArgs.Nodes, into `args`.
Status ReadNodeNames(std::string_view names_text, std::string_view nodes_text, NodeNamesCache* cache,
                     ExtenderArgs* args) {
  if (!names_text.empty() && names_text != "null") {
    if (cache != nullptr) {
      if (auto found = cache->Find(names_text)) {
        args->nodes = std::move(found);
        return Status();
      }
    }
    TESSERA_ASSIGN_OR_RETURN(NodeNamesCache::List list, ParseNodeNames(names_text));
    args->nodes = cache != nullptr ? cache->Remember(names_text, std::move(list))
                                   : std::make_shared<const NodeNamesCache::List>(std::move(list));
    return Status();
  }
  if (nodes_text.empty() || nodes_text == "null")
    return InvalidArgument("ExtenderArgs needs NodeNames (nodeCacheCapable: true) or Nodes");
  Json nodes = ParseText(nodes_text);
  if (nodes.is_discarded()) return InvalidArgument("ExtenderArgs.Nodes is not valid JSON");
  if (!nodes.is_object()) return InvalidArgument("ExtenderArgs.Nodes must be a NodeList object");
  args->names_form = false;
  auto items = nodes.find("items");
  if (items == nodes.end() || items->is_null()) return Status();  // an empty list
  if (!items->is_array()) return InvalidArgument("ExtenderArgs.Nodes.items must be an array");
  NodeNamesCache::List list;
  for (size_t i = 0; i < items->size(); ++i) {
    const Json& item = (*items)[i];
    const Json* meta = Member(item, "metadata");
    const Json* name = meta ? Member(*meta, "name") : nullptr;
    if (name == nullptr || !name->is_string())
      return InvalidArgument("ExtenderArgs.Nodes.items[" + std::to_string(i) + "] has no metadata.name");
    list.names.push_back(name->get<std::string>());
  }
  args->nodes = std::make_shared<const NodeNamesCache::List>(std::move(list));
  args->node_items = std::move(*items);
  return Status();
}

// metadata.uid and metadata.resourceVersion of a Pod's text, scanned without
// a DOM; nullopt unless both are there as non-empty plain strings.
std::optional<std::pair<std::string_view, std::string_view>> ScanPodVersion(std::string_view pod_text) {
  Result<std::vector<internal::JsonMember>> members = internal::SplitObject(pod_text);
  if (!members.ok()) return std::nullopt;
  for (const auto& m : *members) {
    if (m.key != "metadata") continue;
    Result<std::vector<internal::JsonMember>> meta = internal::SplitObject(m.value);
    if (!meta.ok()) return std::nullopt;
    std::optional<std::string_view> uid, rv;
    for (const auto& f : *meta) {
      if (f.key == "uid") uid = internal::PlainString(f.value);
      else if (f.key == "resourceVersion") rv = internal::PlainString(f.value);
    }
    if (!uid || !rv || uid->empty() || rv->empty()) return std::nullopt;
    return std::pair{*uid, *rv};
  }
  return std::nullopt;
}

// Decodes the Pod of a call (an object) and remembers it in `cache`.
Result<std::shared_ptr<const core::PodView>> DecodeCallPod(const Json& pod, const core::ResourceNames& names,
                                                           PodViewCache* cache) {
  TESSERA_ASSIGN_OR_RETURN(core::PodView view, core::DecodePod(pod, names));
  auto shared = std::make_shared<const core::PodView>(std::move(view));
  if (cache != nullptr) cache->Remember(shared);
  return shared;
}

}  // namespace

Result<ExtenderArgs> ParseExtenderArgs(std::string_view body, const core::ResourceNames& names,
                                       PodViewCache* cache, NodeNamesCache* names_cache) {
  // Split without a DOM: a 5,000-node NodeNames list is most of the body and
  // needs no more than a scan (internal/json_scan.h).
  Result<std::vector<internal::JsonMember>> members = internal::SplitObject(body);
  if (!members.ok()) return InvalidArgument(members.status().message() + " (ExtenderArgs)");
  std::string_view pod_text, nodes_text, names_text;
  for (const auto& m : *members) {
    if (m.key == "Pod") pod_text = m.value;
    else if (m.key == "Nodes") nodes_text = m.value;
    else if (m.key == "NodeNames") names_text = m.value;
    else if (!Json::accept(m.value)) return InvalidArgument("ExtenderArgs." + m.key + " is not valid JSON");
  }
  ExtenderArgs args;
  if (cache != nullptr) {
    if (auto version = ScanPodVersion(pod_text)) args.pod = cache->Find(version->first, version->second);
  }
  Json pod;  // parsed only when the cache did not have it
  if (args.pod == nullptr) {
    pod = ParseText(pod_text);
    if (pod.is_discarded() && !pod_text.empty()) return InvalidArgument("ExtenderArgs.Pod is not valid JSON");
    if (!pod.is_object()) return InvalidArgument("ExtenderArgs.Pod must be a Pod object");
  }
  TESSERA_RETURN_IF_ERROR(ReadNodeNames(names_text, nodes_text, names_cache, &args));
  if (args.pod == nullptr) {
    TESSERA_ASSIGN_OR_RETURN(args.pod, DecodeCallPod(pod, names, cache));
  }
  return args;
}

namespace {

// ExtenderBindingArgs as kube-scheduler sends it (its four members, each a
// plain string, PodUID optional) read by a scan; nullopt for anything else,
// which ParseBindingArgs leaves to nlohmann.
std::optional<BindingArgs> ScanPlainBindingArgs(std::string_view body) {
  Result<std::vector<internal::JsonMember>> members = internal::SplitObject(body);
  if (!members.ok()) return std::nullopt;
  BindingArgs args;
  bool name = false, ns = false, node = false;
  for (const auto& m : *members) {
    const std::optional<std::string_view> v = internal::PlainString(m.value);
    if (!v) return std::nullopt;
    if (m.key == "PodName") args.pod_name = *v, name = true;
    else if (m.key == "PodNamespace") args.pod_namespace = *v, ns = true;
    else if (m.key == "PodUID") args.pod_uid = *v;
    else if (m.key == "Node") args.node = *v, node = true;
    else return std::nullopt;
  }
  if (!name || !ns || !node) return std::nullopt;
  return args;
}

}  // namespace

Result<BindingArgs> ParseBindingArgs(std::string_view body) {
  BindingArgs args;
  if (std::optional<BindingArgs> plain = ScanPlainBindingArgs(body)) {
    args = std::move(*plain);
  } else {
    TESSERA_ASSIGN_OR_RETURN(Json root, ParseBody(body, "ExtenderBindingArgs"));
    TESSERA_ASSIGN_OR_RETURN(args.pod_name, StringField(root, "PodName", true));
    TESSERA_ASSIGN_OR_RETURN(args.pod_namespace, StringField(root, "PodNamespace", true));
    TESSERA_ASSIGN_OR_RETURN(args.pod_uid, StringField(root, "PodUID", false));
    TESSERA_ASSIGN_OR_RETURN(args.node, StringField(root, "Node", true));
  }
  if (args.pod_name.empty() || args.node.empty())
    return InvalidArgument("ExtenderBindingArgs.PodName and .Node must not be empty");
  if (args.pod_namespace.empty()) args.pod_namespace = "default";
  return args;
}

Result<PreemptionArgs> ParsePreemptionArgs(std::string_view body, const core::ResourceNames& names,
                                           PodViewCache* cache) {
  TESSERA_ASSIGN_OR_RETURN(Json root, ParseBody(body, "ExtenderPreemptionArgs"));
  PreemptionArgs args;
  const Json* pod = Member(root, "Pod");
  if (pod == nullptr || !pod->is_object()) return InvalidArgument("ExtenderPreemptionArgs.Pod must be a Pod object");
  std::map<std::string, NodeVictims> nodes;
  for (const char* field : {"NodeNameToVictims", "NodeNameToMetaVictims"}) {
    const Json* map = Member(root, field);
    if (map == nullptr) continue;
    const std::string where = std::string("ExtenderPreemptionArgs.") + field;
    if (!map->is_object()) return InvalidArgument(where + " must be an object of node name to victims");
    for (const auto& [node, victims] : map->items()) {
      NodeVictims& nv = nodes[node];
      nv.node = node;
      if (victims.is_null()) continue;
      if (!victims.is_object()) return InvalidArgument(where + "[" + node + "] must be an object with Pods");
      if (const Json* n = Member(victims, "NumPDBViolations"); n != nullptr) {
        if (!n->is_number_integer()) return InvalidArgument(where + "[" + node + "].NumPDBViolations must be an integer");
        nv.num_pdb_violations = n->get<int64_t>();
      }
      const Json* pods = Member(victims, "Pods");
      if (pods == nullptr) continue;
      if (!pods->is_array()) return InvalidArgument(where + "[" + node + "].Pods must be an array");
      for (const Json& p : *pods) {
        // A MetaPod {UID}, or a Pod with metadata.uid.
        const Json* uid = Member(p, "UID");
        if (uid == nullptr) {
          const Json* meta = Member(p, "metadata");
          uid = meta ? Member(*meta, "uid") : nullptr;
        }
        if (uid == nullptr || !uid->is_string() || uid->get<std::string>().empty())
          return InvalidArgument(where + "[" + node + "].Pods has a victim without a UID");
        nv.uids.push_back(uid->get<std::string>());
      }
    }
  }
  for (auto& [name, nv] : nodes) args.nodes.push_back(std::move(nv));
  if (cache != nullptr) {
    const Json* meta = Member(*pod, "metadata");
    const Json* uid = meta ? Member(*meta, "uid") : nullptr;
    const Json* rv = meta ? Member(*meta, "resourceVersion") : nullptr;
    if (uid != nullptr && uid->is_string() && rv != nullptr && rv->is_string())
      args.pod = cache->Find(uid->get_ref<const std::string&>(), rv->get_ref<const std::string&>());
  }
  if (args.pod == nullptr) {
    TESSERA_ASSIGN_OR_RETURN(args.pod, DecodeCallPod(*pod, names, cache));
  }
  return args;
}

std::string WritePreemptionResult(const std::vector<NodeVictims>& nodes) {
  std::string out = "{\"NodeNameToMetaVictims\":{";
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(out, nodes[i].node);
    out += ":{\"Pods\":[";
    for (size_t k = 0; k < nodes[i].uids.size(); ++k) {
      if (k) out += ',';
      out += "{\"UID\":";
      AppendJsonString(out, nodes[i].uids[k]);
      out += '}';
    }
    out += "],\"NumPDBViolations\":" + std::to_string(nodes[i].num_pdb_violations) + "}";
  }
  out += "}}";
  return out;
}

std::string WriteFilterResult(const ExtenderArgs& args, const FilterOutcome& outcome) {
  std::string out;
  out.reserve(64 + outcome.passed.size() * 24 + (outcome.failed.size() + outcome.unresolvable.size()) * 80);
  if (args.names_form) {
    out += "{\"Nodes\":null,\"NodeNames\":[";
    for (size_t k = 0; k < outcome.passed.size(); ++k) {
      if (k) out += ',';
      AppendName(out, args, outcome.passed[k]);
    }
    out += ']';
  } else {
    out += "{\"Nodes\":{\"items\":[";
    for (size_t k = 0; k < outcome.passed.size(); ++k) {
      if (k) out += ',';
      out += args.node_items[outcome.passed[k]].dump(-1, ' ', false, Json::error_handler_t::replace);
    }
    out += "]},\"NodeNames\":null";
  }
  AppendReasons(out, "FailedNodes", args, outcome.failed);
  AppendReasons(out, "FailedAndUnresolvableNodes", args, outcome.unresolvable);
  out += ",\"Error\":";
  AppendJsonString(out, outcome.error);
  out += '}';
  return out;
}

bool RanksBefore(const PolicyScore& a, const PolicyScore& b, const std::vector<std::string>& names) {
  if (a.score != b.score) return a.score > b.score;
  if (a.fine != b.fine) return a.fine > b.fine;
  return names[a.i] < names[b.i];
}

const PolicyScore& ScaleToExtenderScores(const std::vector<PolicyScore>& feasible,
                                         const std::vector<std::string>& names, bool all_equal,
                                         std::vector<int64_t>* scores) {
  const PolicyScore* best = &feasible[0];
  int64_t lo = best->score, hi = best->score;
  for (const PolicyScore& f : feasible) {
    lo = std::min(lo, f.score);
    hi = std::max(hi, f.score);
    if (RanksBefore(f, *best, names)) best = &f;
  }
  for (const PolicyScore& f : feasible) {
    int64_t& out = (*scores)[f.i];
    if (all_equal || &f == best) {
      out = kMaxExtenderScore;
    } else if (hi == lo) {
      out = kMaxExtenderScore - 1;
    } else {
      const double scaled = static_cast<double>(f.score - lo) / static_cast<double>(hi - lo);
      out = std::llround(scaled * static_cast<double>(kMaxExtenderScore - 1));
    }
  }
  return *best;
}

std::string WriteHostPriorityList(const ExtenderArgs& args, const std::vector<int64_t>& scores) {
  std::string out;
  out.reserve(2 + args.node_names().size() * 40);
  out += '[';
  for (size_t i = 0; i < args.node_names().size(); ++i) {
    if (i) out += ',';
    out += "{\"Host\":";
    AppendName(out, args, i);
    out += ",\"Score\":";
    out += std::to_string(scores[i]);
    out += '}';
  }
  out += ']';
  return out;
}

std::string WriteBindingResult(std::string_view error) {
  std::string out = "{\"Error\":";
  AppendJsonString(out, error);
  out += '}';
  return out;
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  // Fast path: names and most reasons need no escaping.
  const bool plain = std::none_of(s.begin(), s.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c < 0x20 || c == '"' || c == '\\';
  });
  if (plain) {
    out.append(s);
    out += '"';
    return;
  }
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          std::array<char, 8> buf{};
          std::snprintf(buf.data(), buf.size(), "\\u%04x", c);
          out += buf.data();
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

}  // namespace tessera::scheduler
