// Errors and warnings about a configuration file, each tied to a place in the file and to
// the key path a person would look for ("interfaces[0].rx.queues[1].batch_size").
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

namespace daqiri::config {

struct Origin {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based
  std::string key_path;
};

struct Diagnostic {
  enum class Severity { kError, kWarning };
  Severity severity = Severity::kError;
  Origin origin;
  std::string message;

  // "file:line:column: error: key.path: message"
  [[nodiscard]] std::string render() const;
};

class Diagnostics {
 public:
  void error(const Origin& origin, std::string message);
  void warning(const Origin& origin, std::string message);

  [[nodiscard]] bool has_errors() const { return errors_ > 0; }
  [[nodiscard]] size_t error_count() const { return errors_; }
  [[nodiscard]] const std::vector<Diagnostic>& items() const { return items_; }
  // Every diagnostic, one per line.
  [[nodiscard]] std::string render() const;

 private:
  std::vector<Diagnostic> items_;
  size_t errors_ = 0;
};

// Where an object of the configuration and each of its keys came from.
class Located {
 public:
  Origin self;
  // The key's own origin when it was written, else the object's.
  [[nodiscard]] const Origin& at(const std::string& key) const;
  void record(const std::string& key, Origin origin) { keys_[key] = std::move(origin); }

 private:
  std::unordered_map<std::string, Origin> keys_;
};

}  // namespace daqiri::config
