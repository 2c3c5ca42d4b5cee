#include "config/yaml_reader.hpp"

#include <algorithm>
#include <charconv>

namespace daqiri::config {
namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string_view>& words) {
  std::string out;
  for (auto w : words) {
    if (!out.empty()) out += ", ";
    out += w;
  }
  return out;
}

}  // namespace

std::optional<std::string> nearest(std::string_view word,
                                   const std::set<std::string, std::less<>>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

Origin YamlNode::origin() const {
  Origin o{file_, 0, 0, path_};
  YAML::Mark m = node_.Mark();
  if (m.line >= 0) {
    o.line = m.line + 1;
    o.column = m.column + 1;
  }
  return o;
}

std::string YamlNode::describe() const {
  switch (node_.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
    case YAML::NodeType::Scalar:
      return "\"" + node_.Scalar() + "\"";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
  }
  return "?";
}

std::optional<std::string> YamlNode::to_string() const {
  if (!node_.IsScalar()) {
    error("expected a string, got " + describe());
    return std::nullopt;
  }
  return node_.Scalar();
}

std::optional<uint64_t> YamlNode::to_uint(uint64_t min, uint64_t max) const {
  auto expected = [&] {
    return "expected an integer from " + std::to_string(min) + " to " + std::to_string(max) +
           ", got " + describe();
  };
  if (!node_.IsScalar()) {
    error(expected());
    return std::nullopt;
  }
  const std::string& s = node_.Scalar();
  uint64_t value = 0;
  int base = 10;
  std::string_view digits(s);
  if (digits.starts_with("0x") || digits.starts_with("0X")) {
    base = 16;
    digits.remove_prefix(2);
  }
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
  if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() || value < min ||
      value > max) {
    error(expected());
    return std::nullopt;
  }
  return value;
}

std::optional<int64_t> YamlNode::to_int(int64_t min, int64_t max) const {
  auto expected = [&] {
    return "expected an integer from " + std::to_string(min) + " to " + std::to_string(max) +
           ", got " + describe();
  };
  if (!node_.IsScalar()) {
    error(expected());
    return std::nullopt;
  }
  const std::string& s = node_.Scalar();
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || value < min || value > max) {
    error(expected());
    return std::nullopt;
  }
  return value;
}

std::optional<bool> YamlNode::to_bool() const {
  if (node_.IsScalar()) {
    const std::string& s = node_.Scalar();
    if (s == "true" || s == "True" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "False" || s == "no" || s == "off") return false;
  }
  error("expected true or false, got " + describe());
  return std::nullopt;
}

std::optional<size_t> YamlNode::to_choice(const std::vector<std::string_view>& choices) const {
  if (node_.IsScalar()) {
    const std::string& s = node_.Scalar();
    for (size_t i = 0; i < choices.size(); ++i) {
      if (s == choices[i]) return i;
    }
  }
  error("expected one of " + join(choices) + ", got " + describe());
  return std::nullopt;
}

std::vector<YamlNode> YamlNode::items(bool allow_scalar) const {
  std::vector<YamlNode> out;
  if (allow_scalar && node_.IsScalar()) {
    out.emplace_back(node_, file_, path_, diags_);
    return out;
  }
  if (!node_.IsSequence()) {
    error("expected a list, got " + describe());
    return out;
  }
  for (size_t i = 0; i < node_.size(); ++i) {
    out.emplace_back(node_[i], file_, path_ + "[" + std::to_string(i) + "]", diags_);
  }
  return out;
}

YamlMap::YamlMap(const YamlNode& node) : node_(node) {
  if (node.raw().IsMap()) {
    valid_ = true;
    // yaml-cpp keeps the last of duplicate keys silently: say so instead.
    std::set<std::string, std::less<>> seen;
    for (const auto& kv : node.raw()) {
      if (!kv.first.IsScalar()) continue;
      const std::string& key = kv.first.Scalar();
      if (!seen.insert(key).second) {
        YamlNode k(kv.first, node.origin().file,
                   node.path().empty() ? key : node.path() + "." + key, &node.diags());
        k.error("duplicate key");
      }
    }
  } else if (!node.raw().IsNull()) {
    node.error("expected a map of keys, got " + node.describe());
  }
}

std::optional<YamlNode> YamlMap::get(std::string_view key) {
  known_.emplace(key);
  if (!valid_) return std::nullopt;
  for (const auto& kv : node_.raw()) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) {
      std::string path =
          node_.path().empty() ? std::string(key) : node_.path() + "." + std::string(key);
      return YamlNode(kv.second, node_.origin().file, std::move(path), &node_.diags());
    }
  }
  return std::nullopt;
}

std::optional<YamlNode> YamlMap::require(std::string_view key) {
  auto n = get(key);
  if (!n && valid_) {
    Origin o = node_.origin();
    o.key_path = node_.path().empty() ? std::string(key) : node_.path() + "." + std::string(key);
    node_.diags().error(o, "missing required key");
  }
  return n;
}

void YamlMap::ignore(std::string_view key, std::string_view why) {
  if (auto n = get(key)) n->warning("ignored: " + std::string(why));
}

bool YamlMap::read_string(std::string_view key, std::string& out, Located& where, bool required) {
  auto n = required ? require(key) : get(key);
  if (!n) return false;
  auto v = n->to_string();
  if (!v) return false;
  if (required && v->empty()) {
    n->error("must not be empty");
    return false;
  }
  out = std::move(*v);
  where.record(std::string(key), n->origin());
  return true;
}

bool YamlMap::read_uint(std::string_view key, uint32_t& out, uint64_t min, uint64_t max,
                        Located& where, bool required) {
  auto n = required ? require(key) : get(key);
  if (!n) return false;
  auto v = n->to_uint(min, max);
  if (!v) return false;
  out = static_cast<uint32_t>(*v);
  where.record(std::string(key), n->origin());
  return true;
}

bool YamlMap::read_int(std::string_view key, int& out, int64_t min, int64_t max, Located& where,
                       bool required) {
  auto n = required ? require(key) : get(key);
  if (!n) return false;
  auto v = n->to_int(min, max);
  if (!v) return false;
  out = static_cast<int>(*v);
  where.record(std::string(key), n->origin());
  return true;
}

bool YamlMap::read_bool(std::string_view key, bool& out, Located& where) {
  auto n = get(key);
  if (!n) return false;
  auto v = n->to_bool();
  if (!v) return false;
  out = *v;
  where.record(std::string(key), n->origin());
  return true;
}

bool YamlMap::read_string_list(std::string_view key, std::vector<std::string>& out,
                               Located& where) {
  auto n = get(key);
  if (!n) return false;
  out.clear();
  for (const auto& item : n->items(/*allow_scalar=*/true)) {
    if (auto s = item.to_string()) out.push_back(std::move(*s));
  }
  where.record(std::string(key), n->origin());
  return true;
}

void YamlMap::finish() {
  if (!valid_) return;
  for (const auto& kv : node_.raw()) {
    if (!kv.first.IsScalar()) {
      YamlNode(kv.first, node_.origin().file, node_.path(), &node_.diags())
          .error("keys must be plain strings");
      continue;
    }
    const std::string& key = kv.first.Scalar();
    if (known_.contains(key)) continue;
    std::string path = node_.path().empty() ? key : node_.path() + "." + key;
    YamlNode k(kv.first, node_.origin().file, path, &node_.diags());
    if (auto hint = nearest(key, known_)) {
      k.error("unknown key; did you mean \"" + *hint + "\"?");
    } else {
      std::string valid;
      for (const auto& known : known_)
        valid += (valid.empty() ? "" : ", ") + known;
      k.error("unknown key; valid keys here: " + valid);
    }
  }
}

}  // namespace daqiri::config
