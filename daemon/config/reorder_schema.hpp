// The parts of a reorder both schemas read alike: bit fields of a frame and the samples'
// conversion, whose keys each schema names its own way.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace daqiri::config {

// {bit_offset, bit_width}: bit_width 1 to 32.
reorder::BitField read_bit_field(const YamlNode& node);

// Numbered batches, the batch number's bits read from `batch` (the sequence number's already
// in `plan`): 2^sequence bits / 2^batch bits packets each, or 0 when the batch number is the
// wider (the validator says so) or the quotient would pass 2^24.
void number_batches(reorder::ReorderPlan& plan, const YamlNode& batch);

// The keys of a conversion's map, each with the names it may go by (the first is reported).
struct SampleFormatKeys {
  std::vector<std::string_view> input;
  std::vector<std::string_view> output;
  std::vector<std::string_view> order;
};
// {input, output, byte order}: an input of int4 to int32, an output of fp16, bf16, fp32, fp64
// or int32, the order host (the default) or network.
std::optional<reorder::SampleFormat> read_sample_format(const YamlNode& node,
                                                        const SampleFormatKeys& keys);

}  // namespace daqiri::config
