#include "kubectl/inspect_view.h"

#include <algorithm>

namespace tessera::kubectl {
namespace {

using OrderedJson = nlohmann::ordered_json;

// "used / total" with both parts padded, so the slashes line up in a column.
class MemColumn {
 public:
  MemColumn(MemUnit unit) : unit_(unit) {}
  void Measure(int64_t used, int64_t total) {
    used_w_ = std::max(used_w_, DisplayWidth(FormatMem(used, unit_)));
    total_w_ = std::max(total_w_, DisplayWidth(FormatMem(total, unit_)));
  }
  std::string Pair(int64_t used, int64_t total) const {
    return Pad(FormatMem(used, unit_), used_w_) + " / " + Pad(FormatMem(total, unit_), total_w_);
  }
  // A lone amount under the "used" part of the pairs above it.
  std::string Alone(int64_t used) const {
    return Pad(FormatMem(used, unit_), used_w_) + std::string(3 + total_w_, ' ');
  }

 private:
  static std::string Pad(const std::string& s, int w) {
    return std::string(std::max(0, w - DisplayWidth(s)), ' ') + s;
  }
  MemUnit unit_;
  int used_w_ = 0, total_w_ = 0;
};

std::string ModelText(const GpuView& gpu, const NodeView& node) {
  std::string model = gpu.info.model.empty() ? node.model_label : gpu.info.model;
  if (model.empty()) model = "-";
  return gpu.info.healthy ? model : model + " (unhealthy)";
}

std::string Numa(const GpuView& gpu) { return gpu.info.numa_node < 0 ? "-" : std::to_string(gpu.info.numa_node); }

std::string Sharers(const GpuView& gpu) {
  return std::to_string(gpu.used.sharers) + "/" + (gpu.info.max_sharers > 0 ? std::to_string(gpu.info.max_sharers) : "-");
}

std::string HeldBy(const GpuView& gpu, MemUnit unit) {
  std::string out;
  for (const auto& s : gpu.shares) {
    out += (out.empty() ? "" : ", ") + s.HolderAndIsolation() + " " + FormatMem(s.mem_mib, unit) + "/" +
           FormatCore(s.core_milli);
  }
  return out.empty() ? "-" : out;
}

std::string Plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Lines after a table, cut to the terminal width.
std::string Footer(const Inventory& inv, const ViewOptions& options) {
  std::string out;
  auto line = [&](const std::string& text) {
    out += Paint(options.table.width > 0 ? Ellipsize(text, options.table.width) : text, Style::kDim,
                 options.table.color) +
           "\n";
  };
  if (!inv.pending.empty()) {
    std::string names;
    for (const auto& p : inv.pending) names += (names.empty() ? "" : ", ") + p;
    line(Plural(static_cast<int>(inv.pending.size()), "GPU pod", "GPU pods") + " not placed yet: " + names);
  }
  if (inv.other_nodes > 0) {
    line(Plural(inv.other_nodes, "node", "nodes") + " without a tessera.io/gpu-inventory annotation not shown");
  }
  return out;
}

OrderedJson TotalsJson(const Totals& t) {
  return {{"gpus", t.gpus},
          {"memMiB", t.mem_total_mib},
          {"memUsedMiB", t.mem_used_mib},
          {"coreMilli", t.core_total_milli},
          {"coreUsedMilli", t.core_used_milli},
          {"pods", t.pods}};
}

OrderedJson NodeJson(const NodeView& n) {
  OrderedJson gpus = OrderedJson::array();
  for (const GpuView& g : n.gpus) {
    OrderedJson shares = OrderedJson::array();
    for (const ShareView& s : g.shares) {
      if (!s.claim.empty()) {
        shares.push_back({{"namespace", s.ns},
                          {"pod", s.pod},
                          {"claim", s.claim},
                          {"memMiB", s.mem_mib},
                          {"coreMilli", s.core_milli}});
        continue;
      }
      shares.push_back({{"namespace", s.ns},
                        {"pod", s.pod},
                        {"container", s.container},
                        {"memMiB", s.mem_mib},
                        {"coreMilli", s.core_milli},
                        {"isolation", s.isolation.empty() ? "hook" : s.isolation}});
    }
    gpus.push_back({{"index", g.info.index},
                    {"uuid", g.info.uuid},
                    {"model", g.info.model},
                    {"memMiB", g.info.memory_mib},
                    {"sms", g.info.sm_count},
                    {"numa", g.info.numa_node},
                    {"healthy", g.info.healthy},
                    {"slots", g.info.max_sharers},
                    {"memUsedMiB", g.used.mem_used_mib},
                    {"coreUsedMilli", g.used.core_used_milli},
                    {"sharers", g.used.sharers},
                    {"pods", g.pods},
                    {"claims", g.claims},
                    {"shares", std::move(shares)}});
  }
  return {{"name", n.name},
          {"model", n.Model()},
          {"cpuMilli", n.cpu_milli},
          {"cpuUsedMilli", n.cpu_used_milli},
          {"memoryMiB", n.memory_mib},
          {"memoryUsedMiB", n.memory_used_mib},
          {"totals", TotalsJson(n.totals)},
          {"gpus", std::move(gpus)}};
}

}  // namespace

std::string RenderInventoryTable(const Inventory& inv, const ViewOptions& options) {
  std::vector<Column> columns = {{"NODE", Align::kLeft, 2, 8},
                                 {"GPU"},
                                 {"MODEL", Align::kLeft, 1, 6},
                                 {std::string("MEMORY ") + UnitName(options.unit), Align::kRight},
                                 {"MEM", Align::kRight},
                                 {"CORE", Align::kRight},
                                 {"PODS", Align::kRight}};
  if (options.wide) {
    columns.push_back({"UUID", Align::kLeft, 3, 8});
    columns.push_back({"NUMA", Align::kRight});
    columns.push_back({"SLOTS", Align::kRight});
    columns.push_back({"HELD BY", Align::kLeft, 4, 10});
  }
  MemColumn mem(options.unit);
  mem.Measure(inv.totals.mem_used_mib, inv.totals.mem_total_mib);
  for (const auto& n : inv.nodes) {
    mem.Measure(n.totals.mem_used_mib, n.totals.mem_total_mib);
    for (const auto& g : n.gpus) mem.Measure(g.used.mem_used_mib, g.info.memory_mib);
  }
  auto total_row = [&](const std::string& name, const Totals& t) {
    std::vector<Cell> row = {{name, Style::kBold},
                             {"all", Style::kBold},
                             {Plural(t.gpus, "GPU", "GPUs"), Style::kBold},
                             {mem.Pair(t.mem_used_mib, t.mem_total_mib), Style::kBold},
                             {FormatRatio(t.mem_used_mib, t.mem_total_mib), LoadStyle(t.mem_used_mib, t.mem_total_mib)},
                             {FormatRatio(t.core_used_milli, t.core_total_milli),
                              LoadStyle(t.core_used_milli, t.core_total_milli)},
                             {std::to_string(t.pods), Style::kBold}};
    return row;
  };
  Table table(columns);
  for (const auto& n : inv.nodes) {
    for (const auto& g : n.gpus) {
      std::vector<Cell> row = {
          {n.name},
          {std::to_string(g.info.index)},
          {ModelText(g, n), g.info.healthy ? Style::kPlain : Style::kBad},
          {mem.Pair(g.used.mem_used_mib, g.info.memory_mib)},
          {FormatRatio(g.used.mem_used_mib, g.info.memory_mib), LoadStyle(g.used.mem_used_mib, g.info.memory_mib)},
          {FormatCore(g.used.core_used_milli), LoadStyle(g.used.core_used_milli, core::kCoreMilliPerGpu)},
          {std::to_string(g.pods)}};
      if (options.wide) {
        row.push_back({g.info.uuid.empty() ? "-" : g.info.uuid});
        row.push_back({Numa(g)});
        row.push_back({Sharers(g)});
        row.push_back({HeldBy(g, options.unit), Style::kDim});
      }
      table.AddRow(std::move(row));
    }
    if (n.gpus.size() > 1) table.AddRow(total_row(n.name, n.totals));
  }
  table.AddRow(total_row("TOTAL", inv.totals));
  return table.Render(options.table) + Footer(inv, options);
}

std::string RenderNodeDetail(const NodeView& node, const ViewOptions& options) {
  const MemUnit unit = options.unit;
  const Totals& t = node.totals;
  std::string out;
  std::string summary = "Node " + node.name + " (" + (node.Model().empty() ? "GPU" : node.Model()) + ", " +
                        Plural(t.gpus, "GPU", "GPUs") + "): memory " + FormatMem(t.mem_used_mib, unit) + " / " +
                        FormatMem(t.mem_total_mib, unit) + " " + UnitName(unit) + " (" +
                        FormatRatio(t.mem_used_mib, t.mem_total_mib) + "), core " +
                        FormatRatio(t.core_used_milli, t.core_total_milli) + ", " + Plural(t.pods, "pod", "pods");
  char cpu[64];
  std::snprintf(cpu, sizeof cpu, "%.1f / %.1f cores", static_cast<double>(node.cpu_used_milli) / 1000.0,
                static_cast<double>(node.cpu_milli) / 1000.0);
  std::string host = "Host: CPU " + std::string(cpu) + ", memory " + FormatMem(node.memory_used_mib, MemUnit::kGiB) +
                     " / " + FormatMem(node.memory_mib, MemUnit::kGiB) + " GiB";
  if (options.table.width > 0) {
    summary = Ellipsize(summary, options.table.width);
    host = Ellipsize(host, options.table.width);
  }
  out += Paint(summary, Style::kBold, options.table.color) + "\n" + host + "\n\n";

  std::vector<Column> columns = {{"GPU"},
                                 {"MODEL", Align::kLeft, 1, 6},
                                 {"HELD BY", Align::kLeft, 3, 16},
                                 {std::string("MEMORY ") + UnitName(unit), Align::kRight},
                                 {"CORE", Align::kRight}};
  if (options.wide) {
    columns.push_back({"UUID", Align::kLeft, 2, 8});
    columns.push_back({"NUMA", Align::kRight});
    columns.push_back({"SLOTS", Align::kRight});
  }
  MemColumn mem(unit);
  for (const auto& g : node.gpus) mem.Measure(g.used.mem_used_mib, g.info.memory_mib);
  Table table(columns);
  for (const auto& g : node.gpus) {
    std::string held = g.shares.empty() ? "free" : Plural(g.pods, "pod", "pods") + ", " +
                                                       Plural(static_cast<int>(g.shares.size()), "share", "shares");
    if (g.claims > 0) held += " (" + Plural(g.claims, "claim", "claims") + ")";
    std::vector<Cell> row = {{std::to_string(g.info.index), Style::kBold},
                             {ModelText(g, node), g.info.healthy ? Style::kBold : Style::kBad},
                             {held, Style::kBold},
                             {mem.Pair(g.used.mem_used_mib, g.info.memory_mib),
                              LoadStyle(g.used.mem_used_mib, g.info.memory_mib)},
                             {FormatCore(g.used.core_used_milli),
                              LoadStyle(g.used.core_used_milli, core::kCoreMilliPerGpu)}};
    if (options.wide) {
      row.push_back({g.info.uuid.empty() ? "-" : g.info.uuid});
      row.push_back({Numa(g)});
      row.push_back({Sharers(g)});
    }
    table.AddRow(std::move(row));
    for (const auto& s : g.shares) {
      table.AddRow({{""},
                    {""},
                    {"  " + s.HolderAndIsolation(), s.isolation == "none" ? Style::kWarn : Style::kPlain},
                    {mem.Alone(s.mem_mib)},
                    {FormatCore(s.core_milli)}});
    }
  }
  return out + table.Render(options.table);
}

OrderedJson InventoryToJson(const Inventory& inv, const NodeView* only_node) {
  OrderedJson nodes = OrderedJson::array();
  if (only_node != nullptr) {
    nodes.push_back(NodeJson(*only_node));
  } else {
    for (const auto& n : inv.nodes) nodes.push_back(NodeJson(n));
  }
  OrderedJson problems = OrderedJson::array();
  for (const auto& p : inv.problems) problems.push_back({{"object", p.object}, {"message", p.message}});
  return {{"v", 1},
          {"kind", "GpuInventory"},
          {"nodes", std::move(nodes)},
          {"totals", TotalsJson(only_node ? only_node->totals : inv.totals)},
          {"pending", inv.pending},
          {"otherNodes", inv.other_nodes},
          {"problems", std::move(problems)}};
}

}  // namespace tessera::kubectl
