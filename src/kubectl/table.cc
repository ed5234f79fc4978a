#include "kubectl/table.h"

#include <algorithm>
#include <numeric>

namespace tessera::kubectl {
namespace {

constexpr int kGap = 2;  // spaces between columns
constexpr std::string_view kEllipsis = "\xe2\x80\xa6";

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

const char* Ansi(Style style) {
  switch (style) {
    case Style::kPlain: return "";
    case Style::kHeader: return "\x1b[1m";
    case Style::kBold: return "\x1b[1m";
    case Style::kDim: return "\x1b[2m";
    case Style::kGood: return "\x1b[32m";
    case Style::kWarn: return "\x1b[33m";
    case Style::kBad: return "\x1b[31m";
  }
  return "";
}

}  // namespace

int DisplayWidth(std::string_view text) {
  return static_cast<int>(std::count_if(text.begin(), text.end(), [](char c) { return !IsContinuation(c); }));
}

std::string Ellipsize(std::string_view text, int width) {
  if (DisplayWidth(text) <= width) return std::string(text);
  if (width <= 0) return "";
  size_t end = 0;
  for (int kept = 0; kept < width - 1 && end < text.size(); ++kept) {
    ++end;
    while (end < text.size() && IsContinuation(text[end])) ++end;
  }
  return std::string(text.substr(0, end)) + std::string(kEllipsis);
}

std::string Paint(std::string_view text, Style style, bool color) {
  if (!color || style == Style::kPlain || text.empty()) return std::string(text);
  return std::string(Ansi(style)) + std::string(text) + "\x1b[0m";
}

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::AddRow(std::vector<Cell> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render(const TableOptions& options) const {
  const size_t n = columns_.size();
  std::vector<int> width(n, 0);
  for (size_t c = 0; c < n; ++c) {
    if (options.headers) width[c] = DisplayWidth(columns_[c].header);
    for (const auto& row : rows_) width[c] = std::max(width[c], DisplayWidth(row[c].text));
  }
  // Too wide for the terminal: cut the columns that may shrink, highest
  // shrink first, each down to its minimum, until the table fits.
  if (options.width > 0 && n > 0) {
    int total = std::accumulate(width.begin(), width.end(), 0) + kGap * static_cast<int>(n - 1);
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return columns_[a].shrink > columns_[b].shrink; });
    for (size_t c : order) {
      if (total <= options.width || columns_[c].shrink == 0) break;
      const int floor = std::min(width[c], columns_[c].min_width);
      const int cut = std::min(width[c] - floor, total - options.width);
      width[c] -= cut;
      total -= cut;
    }
  }
  std::string out;
  auto line = [&](const std::vector<Cell>& cells, bool header) {
    std::string text;
    size_t pending_spaces = 0;  // padding is written only before more text, so lines never end in spaces
    for (size_t c = 0; c < n; ++c) {
      const std::string shown = Ellipsize(cells[c].text, width[c]);
      const int pad = width[c] - DisplayWidth(shown);
      const Style style = header ? Style::kHeader : cells[c].style;
      if (c > 0) pending_spaces += kGap;
      if (columns_[c].align == Align::kRight) pending_spaces += pad;
      if (!shown.empty()) {
        text.append(pending_spaces, ' ');
        pending_spaces = 0;
        text += Paint(shown, style, options.color);
      }
      if (columns_[c].align == Align::kLeft) pending_spaces += pad;
    }
    out += text;
    out += '\n';
  };
  if (options.headers) {
    std::vector<Cell> header;
    for (const auto& col : columns_) header.push_back({col.header, Style::kHeader});
    line(header, true);
  }
  for (const auto& row : rows_) line(row, false);
  return out;
}

}  // namespace tessera::kubectl
