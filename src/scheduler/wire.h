// The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1):
// parsing requests and writing replies. The Go types have no json tags, so
// their keys are the PascalCase field names; the embedded Pod and Node
// objects use ordinary Kubernetes JSON. The Pod of a call is decoded here,
// once (core::PodView), and nothing past this layer reads its JSON; with a
// PodViewCache a pod already decoded at the same uid and resourceVersion is
// not decoded again. Pure functions apart from the cache; thread-safe.
//
//   TESSERA_ASSIGN_OR_RETURN(ExtenderArgs args, ParseExtenderArgs(body, names, &cache));
//   std::string reply = WriteFilterResult(args, outcome);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/pod_view.h"
#include "core/podspec.h"
#include "core/status.h"
#include "scheduler/node_names_cache.h"
#include "scheduler/pod_view_cache.h"

namespace tessera::scheduler {

// ExtenderArgs {Pod, Nodes, NodeNames}: the filter and prioritize request.
struct ExtenderArgs {
  std::shared_ptr<const core::PodView> pod;  // the Pod, decoded (never null)
  // The candidate nodes, in request order, and whether every name is
  // printable ASCII without quotes or backslashes (so replies can copy them
  // without escaping). Shared and read-only: a NodeNames text that a recent
  // call sent too is the same list (NodeNamesCache). Never null.
  std::shared_ptr<const NodeNamesCache::List> nodes = std::make_shared<const NodeNamesCache::List>();
  const std::vector<std::string>& node_names() const { return nodes->names; }
  bool plain_names() const { return nodes->plain; }
  // True when the request listed NodeNames (nodeCacheCapable); false when it
  // sent full Node objects, kept in `node_items` parallel to `node_names()`.
  bool names_form = true;
  nlohmann::json node_items = nlohmann::json::array();
};

// INVALID_ARGUMENT saying what is wrong when `body` is not JSON, has no Pod
// object or one without identity (core::DecodePod), has neither NodeNames
// nor Nodes, or has a field of the wrong type. The pod's request is read with
// `names`; a mistake in it is not an error here but kept in the view.
// `cache` (may be nullptr): a Pod found there at its metadata.uid and
// metadata.resourceVersion is taken from it without being parsed (its text
// is only scanned for balance); a Pod decoded is remembered there.
// `names_cache` (may be nullptr): a NodeNames text found there is not parsed
// again; one parsed is remembered there.
Result<ExtenderArgs> ParseExtenderArgs(std::string_view body, const core::ResourceNames& names = {},
                                       PodViewCache* cache = nullptr, NodeNamesCache* names_cache = nullptr);

// ExtenderBindingArgs {PodName, PodNamespace, PodUID, Node}.
struct BindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;  // may be empty
  std::string node;
};
// INVALID_ARGUMENT when `body` is not JSON or a field is missing or not a
// string (PodUID may be absent).
Result<BindingArgs> ParseBindingArgs(std::string_view body);

// ExtenderPreemptionArgs {Pod, NodeNameToVictims, NodeNameToMetaVictims}:
// kube-scheduler's candidate nodes for preempting Pod, each with the victims
// its own dry run chose (full Pods, or MetaPods {UID} when nodeCacheCapable).
struct NodeVictims {
  std::string node;
  std::vector<std::string> uids;  // the victims' metadata.uid
  int64_t num_pdb_violations = 0;
};
struct PreemptionArgs {
  std::shared_ptr<const core::PodView> pod;  // the preemptor, decoded (never null)
  std::vector<NodeVictims> nodes;  // sorted by node name
};
// INVALID_ARGUMENT saying what is wrong when `body` is not JSON, has no Pod
// object, a Pod without identity, or a victims map of the wrong shape. Both
// maps absent: no nodes. `names` and `cache` as for ParseExtenderArgs.
Result<PreemptionArgs> ParsePreemptionArgs(std::string_view body, const core::ResourceNames& names = {},
                                           PodViewCache* cache = nullptr);
// ExtenderPreemptionResult {NodeNameToMetaVictims}: per node its victims as
// MetaPods {UID}, in the order given.
std::string WritePreemptionResult(const std::vector<NodeVictims>& nodes);

// What Filter decided, by index into ExtenderArgs::node_names(). The reasons
// are views: what they point to must outlive WriteFilterResult.
struct FilterOutcome {
  std::vector<size_t> passed;
  std::vector<std::pair<size_t, std::string_view>> failed;        // preemption could help
  std::vector<std::pair<size_t, std::string_view>> unresolvable;  // it could not
  std::string error;                                              // non-empty fails the call
};
// ExtenderFilterResult {Nodes, NodeNames, FailedNodes,
// FailedAndUnresolvableNodes, Error}, in the request's form: NodeNames for a
// NodeNames request, Nodes.items (the request's objects) otherwise.
std::string WriteFilterResult(const ExtenderArgs& args, const FilterOutcome& outcome);

// The extender's score scale (kube-scheduler's MaxExtenderPriority).
inline constexpr int64_t kMaxExtenderScore = 10;

// A feasible node's policy score, by index `i` into ExtenderArgs::node_names().
struct PolicyScore {
  size_t i = 0;
  int64_t score = 0;
  double fine = 0;  // refines ties of `score` (core::Candidate::fine)
};
// Whether `a` ranks before `b` as the placer chooses: higher (score, fine),
// ties to the first name in `names`.
bool RanksBefore(const PolicyScore& a, const PolicyScore& b, const std::vector<std::string>& names);

// Turns policy scores into the extender's 0..10 in `*scores` (at each
// feasible node's index; others are left as they are) and returns the best:
// the highest (score, fine), ties to the first name in `names`, which is the
// placer's choice. It gets 10; the others are scaled into 0..9 between the
// lowest and highest score (9 when those are equal). With `all_equal` (a
// policy that scores every node alike) every feasible node gets 10.
// `feasible` must not be empty.
const PolicyScore& ScaleToExtenderScores(const std::vector<PolicyScore>& feasible,
                                         const std::vector<std::string>& names, bool all_equal,
                                         std::vector<int64_t>* scores);

// HostPriorityList: [{"Host":..., "Score":...}, ...], one entry per node of
// the request, `scores` parallel to args.node_names().
std::string WriteHostPriorityList(const ExtenderArgs& args, const std::vector<int64_t>& scores);

// ExtenderBindingResult {Error}; empty error = success.
std::string WriteBindingResult(std::string_view error);

// Appends `s` to `out` as a JSON string literal (quoted, escaped).
void AppendJsonString(std::string& out, std::string_view s);

}  // namespace tessera::scheduler
