#include "table.hpp"

#include <algorithm>
#include <ostream>

namespace daqiri::ctl {

void Table::print(std::ostream& out) const {
  std::vector<size_t> width(headers_.size());
  for (size_t i = 0; i < headers_.size(); ++i)
    width[i] = headers_[i].size();
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t i = 0; i < cells.size() && i < width.size(); ++i) {
      text += cells[i];
      if (i + 1 < cells.size()) text += std::string(width[i] - cells[i].size() + 2, ' ');
    }
    out << text << '\n';
  };
  line(headers_);
  for (const auto& row : rows_)
    line(row);
  if (rows_.empty()) out << "(none)\n";
}

}  // namespace daqiri::ctl
