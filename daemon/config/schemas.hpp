// The two accepted configuration schemas, each filling the same Config.
#pragma once

#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace daqiri::config {

// Ours: top-level daemon / memory_regions / interfaces / flows.
void read_daqirid_schema(YamlMap& root, Config& config);
// NVIDIA DAQIRI's: `daqiri: cfg: {...}`; `cfg_node` is the value of cfg.
void read_daqiri_schema(const YamlNode& cfg_node, Config& config);

}  // namespace daqiri::config
