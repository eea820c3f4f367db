#include "client/table_printer.h"

#include <algorithm>
#include <cstdio>

namespace scantune {
namespace {

bool LooksNumeric(const std::string& cell) {
  if (cell.empty()) return false;
  return std::all_of(cell.begin(), cell.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == '%';
  }) && cell.find_first_of("0123456789") != std::string::npos;
}

}  // namespace

void TablePrinter::AddRow(std::vector<std::string> row) {
  row.resize(header_.size());
  rows_.push_back(std::move(row));
}

std::string TablePrinter::Fixed(double value, int digits) {
  if (!(value > 0)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

void TablePrinter::Print(std::ostream& out) const {
  std::vector<size_t> width(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) {
    width[c] = header_[c].size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      std::string pad(width[c] - cells[c].size(), ' ');
      bool right = !header && LooksNumeric(cells[c]);
      if (c > 0) text += "  ";
      text += right ? pad + cells[c] : cells[c] + (c + 1 < cells.size() ? pad : "");
    }
    out << text << "\n";
  };
  line(header_, true);
  std::vector<std::string> rule;
  for (size_t w : width) rule.push_back(std::string(w, '-'));
  line(rule, true);
  for (const auto& row : rows_) line(row, false);
}

}  // namespace scantune
