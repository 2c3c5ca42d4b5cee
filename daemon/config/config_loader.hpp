// Reading a configuration: YAML syntax, schema detection, the strict schema readers, and the
// cross-checks of config_validator. Every problem lands in Diagnostics with file:line:column.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "config/system_facts.hpp"

namespace daqiri::config {

inline constexpr std::string_view kEmbeddedSource = "<embedded default>";

// The configuration compiled into daqirid, used when no --config is given.
std::string_view embedded_default_config();

// Parses and validates; nullopt when any error was reported.
std::optional<Config> parse_config(std::string_view text, const std::string& source,
                                   const SystemFacts& facts, Diagnostics& diags);
std::optional<Config> load_config_file(const std::string& path, const SystemFacts& facts,
                                       Diagnostics& diags);

}  // namespace daqiri::config
