#include "kubectl/top_view.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/codec.h"
#include "kubectl/claims.h"
#include "kubectl/object_fields.h"
#include "kubectl/pod_view.h"

namespace tessera::kubectl {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

const core::GpuShare* ShareOf(const core::Assignment& a, const std::string& container, int index) {
  for (const auto& c : a.containers) {
    if (c.name != container) continue;
    for (const auto& g : c.gpus)
      if (g.index == index) return &g;
  }
  return nullptr;
}

int64_t Percent(double utilization) { return std::llround(utilization * 100); }

}  // namespace

TopView BuildTop(const Json& pods) { return BuildTop(pods, Json::array()); }

TopView BuildTop(const Json& pods, const Json& claims) {
  TopView top;
  if (!pods.is_array()) return top;
  const ClaimShares dra = ClaimSharesFrom(claims);
  constexpr std::string_view kClaimEntry = "claim/";  // tessera-node's usage entry of a claim
  for (const Json& pod : pods) {
    const std::string phase = StringAt(pod, {"status", "phase"});
    if (phase == "Succeeded" || phase == "Failed") continue;
    const Json* text = Annotation(pod, core::kUsageAnnotation);
    if (text == nullptr) continue;
    const std::string ns = StringAt(pod, {"metadata", "namespace"});
    const std::string name = StringAt(pod, {"metadata", "name"});
    Result<core::PodUsage> usage = text->is_string() ? core::DecodeUsage(text->get<std::string>())
                                                     : Result<core::PodUsage>(InvalidArgument("not a string"));
    if (!usage.ok()) {
      top.problems.push_back({"pod " + ns + "/" + name, usage.status().message()});
      continue;
    }
    std::optional<core::Assignment> assignment;
    if (const Json* a = Annotation(pod, core::kAssignmentAnnotation); a != nullptr && a->is_string()) {
      if (auto decoded = core::DecodeAssignment(a->get<std::string>()); decoded.ok()) assignment = *decoded;
    }
    ++top.pods_with_usage;
    for (const auto& c : usage->containers) {
      for (const auto& g : c.gpus) {
        TopRow row{ns, name, c.name, StringAt(pod, {"spec", "nodeName"}), "", g.index, g.uuid, g.mem_used_mib,
                   -1, -1, g.utilization, usage->at};
        if (c.name.starts_with(kClaimEntry)) {
          row.claim = c.name.substr(kClaimEntry.size());
          row.container = ClaimLabel(row.claim);
          for (const ClaimShare& share : dra.shares) {
            if (share.ns != ns || share.claim != row.claim || share.index != g.index) continue;
            if (!row.node.empty() && share.node != row.node) continue;
            if (share.mem_mib > 0) row.mem_limit_mib = share.mem_mib;
            row.core_limit_milli = share.core_milli;
          }
        } else if (assignment) {
          if (const core::GpuShare* share = ShareOf(*assignment, c.name, g.index)) {
            row.mem_limit_mib = share->mem_mib;
            row.core_limit_milli = share->core_milli;
          }
        }
        top.rows.push_back(std::move(row));
      }
    }
  }
  std::sort(top.rows.begin(), top.rows.end(), [](const TopRow& a, const TopRow& b) {
    return std::tie(a.ns, a.pod, a.container, a.gpu) < std::tie(b.ns, b.pod, b.container, b.gpu);
  });
  return top;
}

std::string RenderTop(const TopView& top, const ViewOptions& options, core::WallTime now, const std::string& scope) {
  if (top.rows.empty()) {
    return "No pod in " + scope + " reports GPU usage yet (" + std::string(core::kUsageAnnotation) + ").\n";
  }
  std::vector<Column> columns = {{"NAMESPACE", Align::kLeft, 2, 8},
                                 {"POD", Align::kLeft, 3, 12},
                                 {"CONTAINER", Align::kLeft, 1, 8},
                                 {"NODE", Align::kLeft, 2, 8},
                                 {"GPU", Align::kRight},
                                 {std::string("MEMORY ") + UnitName(options.unit), Align::kRight},
                                 {"UTIL", Align::kRight},
                                 {"CORE LIMIT", Align::kRight},
                                 {"AGE", Align::kRight}};
  if (options.wide) columns.push_back({"UUID", Align::kLeft, 4, 10});
  Table table(columns);
  for (const auto& r : top.rows) {
    const std::string mem = FormatMem(r.mem_used_mib, options.unit) + " / " +
                            (r.mem_limit_mib >= 0 ? FormatMem(r.mem_limit_mib, options.unit) : "?");
    const int64_t util = Percent(r.utilization);
    // Over its share: compute above the core limit, memory above the limit.
    const bool over_core = r.core_limit_milli >= 0 && util * 10 > r.core_limit_milli;
    const Style mem_style = r.mem_limit_mib < 0 ? Style::kPlain : LoadStyle(r.mem_used_mib, r.mem_limit_mib);
    std::vector<Cell> row = {{r.ns},
                             {r.pod},
                             {r.container},
                             {r.node.empty() ? "-" : r.node},
                             {std::to_string(r.gpu)},
                             {mem, mem_style},
                             {std::to_string(util) + "%", over_core ? Style::kWarn : Style::kPlain},
                             {r.core_limit_milli >= 0 ? FormatCore(r.core_limit_milli) : "?"},
                             {FormatAge(r.at, now)}};
    if (options.wide) row.push_back({r.uuid.empty() ? "-" : r.uuid});
    table.AddRow(std::move(row));
  }
  return table.Render(options.table);
}

OrderedJson TopToJson(const TopView& top) {
  OrderedJson rows = OrderedJson::array();
  for (const auto& r : top.rows) {
    rows.push_back({{"namespace", r.ns},
                    {"pod", r.pod},
                    {"container", r.container},
                    {"claim", r.claim},
                    {"node", r.node},
                    {"gpu", r.gpu},
                    {"uuid", r.uuid},
                    {"memUsedMiB", r.mem_used_mib},
                    {"memMiB", r.mem_limit_mib},
                    {"utilization", r.utilization},
                    {"coreMilli", r.core_limit_milli},
                    {"at", core::FormatRfc3339(r.at)}});
  }
  OrderedJson problems = OrderedJson::array();
  for (const auto& p : top.problems) problems.push_back({{"object", p.object}, {"message", p.message}});
  return {{"v", 1}, {"kind", "GpuUsage"}, {"usage", std::move(rows)}, {"problems", std::move(problems)}};
}

}  // namespace tessera::kubectl
