// A strict reader over yaml-cpp nodes. Every value read is checked and located; a map reader
// remembers which keys were asked for, so finish() can report every other key as unknown
// and suggest the nearest valid one. Errors go to Diagnostics; reading continues so one run
// reports every problem in the file.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/diagnostics.hpp"

namespace daqiri::config {

class YamlNode {
 public:
  YamlNode(const YAML::Node& node, std::string file, std::string path, Diagnostics* diags)
      : node_(node), file_(std::move(file)), path_(std::move(path)), diags_(diags) {}

  [[nodiscard]] Origin origin() const;
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] const YAML::Node& raw() const { return node_; }
  [[nodiscard]] Diagnostics& diags() const { return *diags_; }
  [[nodiscard]] bool is_scalar() const { return node_.IsScalar(); }
  [[nodiscard]] bool is_sequence() const { return node_.IsSequence(); }

  void error(std::string message) const { diags_->error(origin(), std::move(message)); }
  void warning(std::string message) const { diags_->warning(origin(), std::move(message)); }

  // Each reports "expected ..., got ..." and returns nullopt on a bad value.
  [[nodiscard]] std::optional<std::string> to_string() const;
  [[nodiscard]] std::optional<uint64_t> to_uint(uint64_t min, uint64_t max) const;
  [[nodiscard]] std::optional<int64_t> to_int(int64_t min, int64_t max) const;
  [[nodiscard]] std::optional<bool> to_bool() const;
  // One of `choices`; returns the index into it.
  [[nodiscard]] std::optional<size_t> to_choice(const std::vector<std::string_view>& choices) const;
  // Elements of a sequence; a lone scalar is taken as a one-element list when allow_scalar.
  [[nodiscard]] std::vector<YamlNode> items(bool allow_scalar = false) const;

  [[nodiscard]] std::string describe() const;  // "the string \"abc\"", "a map", "null"

 private:
  YAML::Node node_;
  std::string file_;
  std::string path_;
  Diagnostics* diags_;
};

class YamlMap {
 public:
  // Reports an error (and reads nothing) when node is not a map.
  explicit YamlMap(const YamlNode& node);
  YamlMap(const YamlMap&) = delete;
  YamlMap& operator=(const YamlMap&) = delete;

  [[nodiscard]] Origin origin() const { return node_.origin(); }
  [[nodiscard]] const YamlNode& node() const { return node_; }
  [[nodiscard]] bool valid() const { return valid_; }

  // The value under key, if written. Marks the key as known either way.
  [[nodiscard]] std::optional<YamlNode> get(std::string_view key);
  // As get(), but reports a missing key.
  [[nodiscard]] std::optional<YamlNode> require(std::string_view key);
  // Marks a key as known but meaningless here; warns with `why` when it is written.
  void ignore(std::string_view key, std::string_view why);

  // Typed reads: leave `out` untouched when the key is absent or bad, record its origin.
  bool read_string(std::string_view key, std::string& out, Located& where, bool required = false);
  bool read_uint(std::string_view key, uint32_t& out, uint64_t min, uint64_t max, Located& where,
                 bool required = false);
  bool read_int(std::string_view key, int& out, int64_t min, int64_t max, Located& where,
                bool required = false);
  bool read_bool(std::string_view key, bool& out, Located& where);
  template <typename E>
  bool read_choice(std::string_view key, E& out,
                   const std::vector<std::pair<std::string_view, E>>& choices, Located& where,
                   bool required = false) {
    auto n = required ? require(key) : get(key);
    if (!n) return false;
    std::vector<std::string_view> names;
    names.reserve(choices.size());
    for (const auto& c : choices)
      names.push_back(c.first);
    auto index = n->to_choice(names);
    if (!index) return false;
    out = choices[*index].second;
    where.record(std::string(key), n->origin());
    return true;
  }
  bool read_string_list(std::string_view key, std::vector<std::string>& out, Located& where);

  // Reports every key not asked for, with the nearest known key as a suggestion.
  void finish();

 private:
  YamlNode node_;
  bool valid_ = false;
  std::set<std::string, std::less<>> known_;
  std::vector<std::pair<std::string, std::string>> ignored_;
};

// Nearest candidate to `word` by edit distance, if close enough to be a plausible typo.
std::optional<std::string> nearest(std::string_view word,
                                   const std::set<std::string, std::less<>>& candidates);

}  // namespace daqiri::config
