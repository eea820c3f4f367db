// TablePrinter: aligned plain-text tables for the CLI. Numbers are right
// aligned, text left aligned; the header is underlined. Not thread-safe.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace scantune {

class TablePrinter {
 public:
  explicit TablePrinter(std::vector<std::string> header) : header_(std::move(header)) {}

  void AddRow(std::vector<std::string> row);
  bool empty() const { return rows_.empty(); }
  void Print(std::ostream& out) const;

  // Number formatting shared by every table: `digits` after the point, "-"
  // for a value that was never measured (zero or negative).
  static std::string Fixed(double value, int digits);

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace scantune
