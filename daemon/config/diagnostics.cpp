#include "config/diagnostics.hpp"

namespace daqiri::config {

std::string Diagnostic::render() const {
  std::string out = origin.file.empty() ? "<config>" : origin.file;
  if (origin.line > 0) {
    out += ':' + std::to_string(origin.line) + ':' + std::to_string(origin.column);
  }
  out += severity == Severity::kError ? ": error: " : ": warning: ";
  if (!origin.key_path.empty()) out += origin.key_path + ": ";
  out += message;
  return out;
}

void Diagnostics::error(const Origin& origin, std::string message) {
  items_.push_back({Diagnostic::Severity::kError, origin, std::move(message)});
  ++errors_;
}

void Diagnostics::warning(const Origin& origin, std::string message) {
  items_.push_back({Diagnostic::Severity::kWarning, origin, std::move(message)});
}

std::string Diagnostics::render() const {
  std::string out;
  for (const auto& d : items_)
    out += d.render() + '\n';
  return out;
}

const Origin& Located::at(const std::string& key) const {
  auto it = keys_.find(key);
  return it == keys_.end() ? self : it->second;
}

}  // namespace daqiri::config
