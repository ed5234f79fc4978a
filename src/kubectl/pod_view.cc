#include "kubectl/pod_view.h"

#include <algorithm>

#include "core/codec.h"
#include "kubectl/object_fields.h"

namespace tessera::kubectl {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::optional<core::WallTime> TimeOf(const Json& event) {
  for (const char* field : {"lastTimestamp", "eventTime", "firstTimestamp"}) {
    const std::string text = StringAt(event, {field});
    if (auto t = core::ParseRfc3339(text); t.ok()) return *t;
  }
  if (auto t = core::ParseRfc3339(StringAt(event, {"metadata", "creationTimestamp"})); t.ok()) return *t;
  return std::nullopt;
}

const core::GpuInfo* GpuOf(const PodDetail& pod, int index) {
  for (const auto& g : pod.node_gpus)
    if (g.index == index) return &g;
  return nullptr;
}

bool IsAllocated(const PodDetail& pod, const std::string& container) {
  return pod.allocated &&
         std::find(pod.allocated->begin(), pod.allocated->end(), container) != pod.allocated->end();
}

// One line of "Label:  value", the value cut to the terminal.
std::string Field(const std::string& label, const std::string& value, const ViewOptions& options,
                  Style style = Style::kPlain) {
  const std::string pad(label.size() < 12 ? 12 - label.size() : 1, ' ');
  std::string shown = value;
  if (options.table.width > 0) shown = Ellipsize(value, std::max(1, options.table.width - DisplayWidth(label + pad)));
  return label + pad + Paint(shown, style, options.table.color) + "\n";
}

}  // namespace

std::string FormatAge(core::WallTime then, core::WallTime now) {
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - then).count();
  if (secs < 0) return "-";
  if (secs < 120) return std::to_string(secs) + "s";
  if (secs < 2 * 3600) return std::to_string(secs / 60) + "m";
  if (secs < 2 * 86400) return std::to_string(secs / 3600) + "h";
  return std::to_string(secs / 86400) + "d";
}

PodDetail BuildPodDetail(const Json& pod, const Json* node, const Json& events, const core::ResourceNames& names) {
  PodDetail d;
  d.ns = StringAt(pod, {"metadata", "namespace"});
  d.name = StringAt(pod, {"metadata", "name"});
  d.node = StringAt(pod, {"spec", "nodeName"});
  d.phase = StringAt(pod, {"status", "phase"});
  d.terminating = FieldAt(pod, {"metadata", "deletionTimestamp"}) != nullptr;
  d.wants_gpu = core::WantsGpu(pod, names);
  d.assigned_at = StringAt(pod, {"metadata", "annotations", core::kAssignedAtAnnotation});
  if (std::string isolation = StringAt(pod, {"metadata", "annotations", std::string(core::kIsolationAnnotation)});
      !isolation.empty()) {
    d.isolation = std::move(isolation);
  }
  if (const Json* a = Annotation(pod, core::kAssignmentAnnotation); a != nullptr) {
    Result<core::Assignment> assignment =
        a->is_string() ? core::DecodeAssignment(a->get<std::string>())
                       : Result<core::Assignment>(InvalidArgument("tessera.io/assignment: not a string"));
    if (assignment.ok()) d.assignment = std::move(assignment).value();
    else d.assignment_error = assignment.status().message();
  }
  if (const Json* a = Annotation(pod, kAllocatedAnnotation); a != nullptr && a->is_string()) {
    d.allocated = SplitCommas(a->get<std::string>());
  }
  if (node != nullptr) {
    if (auto info = core::NodeInfoFromJson(*node); info.ok()) d.node_gpus = info->gpus;
  }
  if (events.is_array()) {
    for (const Json& e : events) {
      const std::string reason = StringAt(e, {"reason"});
      const bool wanted = reason == kAllocateFailedReason || reason == kAssignmentRefusedReason ||
                          reason == kMismatchReason ||
                          (reason == kFailedSchedulingReason && d.node.empty());
      if (!wanted) continue;
      EventView v{StringAt(e, {"type"}), reason, StringAt(e, {"message"}), 1, TimeOf(e)};
      if (const Json* c = FieldAt(e, {"count"}); c != nullptr && c->is_number_integer()) v.count = c->get<int>();
      d.events.push_back(std::move(v));
    }
  }
  std::stable_sort(d.events.begin(), d.events.end(), [](const EventView& a, const EventView& b) {
    return a.last.value_or(core::WallTime{}) < b.last.value_or(core::WallTime{});
  });
  return d;
}

std::string RenderPodDetail(const PodDetail& pod, const ViewOptions& options, core::WallTime now) {
  std::string out;
  out += Field("Pod:", pod.ns + "/" + pod.name, options, Style::kBold);
  out += Field("Node:", pod.node.empty() ? "(not bound)" : pod.node, options);
  out += Field("Phase:", (pod.phase.empty() ? "Unknown" : pod.phase) + (pod.terminating ? " (terminating)" : ""),
               options);
  if (!pod.assignment) {
    std::string why;
    Style style = Style::kPlain;
    if (!pod.assignment_error.empty()) {
      why = "unusable: " + pod.assignment_error;
      style = Style::kBad;
    } else if (!pod.wants_gpu) {
      why = "none: the pod asks for no tessera.io resources";
    } else if (pod.node.empty()) {
      why = "none yet: waiting for tessera-scheduler to place it";
    } else {
      why = "none: bound without a tessera.io/assignment";
      style = Style::kBad;
    }
    out += Field("Assignment:", why, options, style);
  } else {
    if (!pod.assigned_at.empty()) out += Field("Assigned:", pod.assigned_at, options);
    // The default (the interception library) goes unsaid; the others are worth a line.
    if (pod.isolation == core::IsolationName(core::Isolation::kNone)) {
      out += Field("Isolation:", "none: not enforced (no interception library; tessera.io/isolation)", options,
                   Style::kWarn);
    } else if (pod.isolation == core::IsolationName(core::Isolation::kMps)) {
      out += Field("Isolation:", "mps: held by NVIDIA MPS (tessera.io/isolation)", options);
    } else if (pod.isolation != core::IsolationName(core::Isolation::kHook)) {
      out += Field("Isolation:", pod.isolation + " (tessera.io/isolation)", options);
    }
    std::string state;
    if (!pod.allocated) {
      state = "none yet (the node agent has answered no Allocate)";
    } else {
      std::vector<std::string> waiting;
      for (const auto& c : pod.assignment->containers) {
        if (!c.gpus.empty() && !IsAllocated(pod, c.name)) waiting.push_back(c.name);
      }
      for (const auto& c : *pod.allocated) state += (state.empty() ? "" : ", ") + c;
      if (!waiting.empty()) {
        state += "; waiting: ";
        for (size_t i = 0; i < waiting.size(); ++i) state += (i ? ", " : "") + waiting[i];
      }
    }
    out += Field("Allocated:", state, options);
    out += "\n";
    std::vector<Column> columns = {{"CONTAINER", Align::kLeft, 2, 10},
                                   {"GPU", Align::kRight},
                                   {"MODEL"},
                                   {std::string("MEMORY ") + UnitName(options.unit), Align::kRight},
                                   {"CORE", Align::kRight},
                                   {"ALLOCATED"},
                                   {"UUID", Align::kLeft, 1, 10}};
    Table table(columns);
    for (const auto& c : pod.assignment->containers) {
      if (c.gpus.empty()) {
        table.AddRow({{c.name}, {"-"}, {"-"}, {"-"}, {"-"}, {"-"}, {"-"}});
        continue;
      }
      const bool allocated = IsAllocated(pod, c.name);
      for (const auto& g : c.gpus) {
        const core::GpuInfo* info = GpuOf(pod, g.index);
        table.AddRow({{c.name},
                      {std::to_string(g.index)},
                      {info && !info->model.empty() ? info->model : "-"},
                      {FormatMem(g.mem_mib, options.unit)},
                      {FormatCore(g.core_milli)},
                      {allocated ? "yes" : "no", allocated ? Style::kGood : Style::kWarn},
                      {g.uuid.empty() ? "-" : g.uuid}});
      }
    }
    out += table.Render(options.table);
  }
  out += "\n";
  if (pod.events.empty()) {
    out += "Events:     none from tessera-node";
    out += pod.node.empty() ? " or the scheduler\n" : "\n";
    return out;
  }
  out += "Events:\n";
  Table events({{"TYPE"}, {"REASON"}, {"AGE", Align::kRight}, {"COUNT", Align::kRight}, {"MESSAGE", Align::kLeft, 1, 20}});
  for (const auto& e : pod.events) {
    events.AddRow({{e.type, e.type == "Warning" ? Style::kWarn : Style::kPlain},
                   {e.reason},
                   {e.last ? FormatAge(*e.last, now) : "-"},
                   {std::to_string(e.count)},
                   {e.message}});
  }
  TableOptions indented = options.table;
  if (indented.width > 0) indented.width = std::max(20, indented.width - 2);
  const std::string rendered = events.Render(indented);
  size_t start = 0;
  while (start < rendered.size()) {
    const size_t end = rendered.find('\n', start);
    out += "  " + rendered.substr(start, end - start + 1);
    start = end + 1;
  }
  return out;
}

OrderedJson PodDetailToJson(const PodDetail& pod) {
  OrderedJson containers = OrderedJson::array();
  if (pod.assignment) {
    for (const auto& c : pod.assignment->containers) {
      OrderedJson gpus = OrderedJson::array();
      for (const auto& g : c.gpus) {
        const core::GpuInfo* info = GpuOf(pod, g.index);
        gpus.push_back({{"index", g.index},
                        {"uuid", g.uuid},
                        {"model", info ? info->model : ""},
                        {"memMiB", g.mem_mib},
                        {"coreMilli", g.core_milli}});
      }
      containers.push_back({{"name", c.name}, {"allocated", IsAllocated(pod, c.name)}, {"gpus", std::move(gpus)}});
    }
  }
  OrderedJson events = OrderedJson::array();
  for (const auto& e : pod.events) {
    events.push_back({{"type", e.type},
                      {"reason", e.reason},
                      {"message", e.message},
                      {"count", e.count},
                      {"last", e.last ? core::FormatRfc3339(*e.last) : ""}});
  }
  OrderedJson doc = {{"v", 1},
                     {"kind", "GpuPod"},
                     {"namespace", pod.ns},
                     {"name", pod.name},
                     {"node", pod.node},
                     {"phase", pod.phase},
                     {"terminating", pod.terminating},
                     {"assigned", pod.assignment.has_value()},
                     {"assignedAt", pod.assigned_at},
                     {"isolation", pod.isolation},
                     {"assignmentError", pod.assignment_error},
                     {"allocatedAnnotation", pod.allocated.has_value()},
                     {"containers", std::move(containers)},
                     {"events", std::move(events)}};
  return doc;
}

}  // namespace tessera::kubectl
