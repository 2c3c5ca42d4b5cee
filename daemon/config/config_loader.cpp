#include "config/config_loader.hpp"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "config/config_validator.hpp"
#include "config/schemas.hpp"

namespace daqiri::config {

extern const char* const kEmbeddedDefaultConfig;  // generated from config/default.yaml

std::string_view embedded_default_config() {
  return kEmbeddedDefaultConfig;
}

std::optional<Config> parse_config(std::string_view text, const std::string& source,
                                   const SystemFacts& facts, Diagnostics& diags) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    diags.error({source, e.mark.line + 1, e.mark.column + 1, ""}, "invalid YAML: " + e.msg);
    return std::nullopt;
  }

  Config config;
  config.source = source;
  YamlNode top(root, source, "", &diags);
  if (root.IsNull()) {
    diags.error({source, 1, 1, ""}, "the file is empty");
    return std::nullopt;
  }
  if (!root.IsMap()) {
    top.error("expected a map at the top level, got " + top.describe());
    return std::nullopt;
  }

  // A DAQIRI file: `daqiri:` (or its older name `advanced_network:`) holds `cfg:`; the other
  // top-level keys belong to the application and are not ours to judge.
  std::optional<YamlNode> daqiri;
  for (const char* key : {"daqiri", "advanced_network"}) {
    if (root[key]) {
      daqiri = YamlNode(root[key], source, key, &diags);
      break;
    }
  }
  if (daqiri) {
    YamlMap wrapper(*daqiri);
    if (auto cfg = wrapper.require("cfg")) read_daqiri_schema(*cfg, config);
    wrapper.finish();
  } else {
    YamlMap map(top);
    read_daqirid_schema(map, config);
  }
  if (diags.has_errors()) return std::nullopt;

  validate_config(config, facts, diags);
  if (diags.has_errors()) return std::nullopt;
  return config;
}

std::optional<Config> load_config_file(const std::string& path, const SystemFacts& facts,
                                       Diagnostics& diags) {
  std::ifstream in(path);
  if (!in) {
    diags.error({path, 0, 0, ""}, std::string("cannot read: ") + std::strerror(errno));
    return std::nullopt;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_config(buf.str(), path, facts, diags);
}

}  // namespace daqiri::config
