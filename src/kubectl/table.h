// Aligned text tables for a terminal: column widths from the widest cell,
// columns cut with an ellipsis ("…") when the table is wider than the
// terminal, and ANSI colour only when asked for (widths ignore it). Value
// type; not thread-safe.
//
//   Table t({{"NODE"}, {"GPU", Align::kRight}, {"PODS", Align::kLeft, /*shrink=*/1}});
//   t.AddRow({{"a100-0"}, {"0"}, {"default/a, default/b", Style::kDim}});
//   std::cout << t.Render({.width = 80, .color = true});
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::kubectl {

enum class Align { kLeft, kRight };
// Styles map to ANSI attributes only when colour is on.
enum class Style { kPlain, kHeader, kBold, kDim, kGood, kWarn, kBad };

struct Column {
  std::string header;
  Align align = Align::kLeft;
  // 0: never cut. Otherwise columns are cut, highest first, when the table
  // is too wide; each keeps at least `min_width` characters.
  int shrink = 0;
  int min_width = 8;
};

struct Cell {
  std::string text;
  Style style = Style::kPlain;
};

struct TableOptions {
  int width = 0;       // terminal columns; 0: no limit (nothing is cut)
  bool color = false;
  bool headers = true;
};

class Table {
 public:
  explicit Table(std::vector<Column> columns);
  // Missing trailing cells are empty; extra cells are dropped.
  void AddRow(std::vector<Cell> cells);
  // Every line ends in '\n'; no line has trailing spaces.
  std::string Render(const TableOptions& options) const;
  bool empty() const { return rows_.empty(); }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
};

// Characters a terminal shows for UTF-8 `text` (code points; Kubernetes
// names are ASCII, and "…" counts one).
int DisplayWidth(std::string_view text);
// `text` cut to `width` display characters, ending in "…" when cut.
std::string Ellipsize(std::string_view text, int width);
// `text` wrapped in the ANSI sequence for `style` (unchanged for kPlain).
std::string Paint(std::string_view text, Style style, bool color);

}  // namespace tessera::kubectl
