// Aligned text tables for people; scripts use --json.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace daqiri::ctl {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace daqiri::ctl
