#include "config/reorder_schema.hpp"

#include <string>

namespace daqiri::config {
namespace {

// The first of `names` the map holds (each one marked known).
std::optional<YamlNode> first_of(YamlMap& map, const std::vector<std::string_view>& names) {
  std::optional<YamlNode> found;
  for (std::string_view n : names) {
    auto v = map.get(n);
    if (v && !found) found = v;
  }
  return found;
}

std::optional<reorder::SampleType> read_type(const YamlNode& node, bool input) {
  auto text = node.to_string();
  if (!text) return std::nullopt;
  auto t = reorder::sample_type_from(*text);
  if (!t || (input ? !reorder::is_input(*t) : !reorder::is_output(*t))) {
    node.error(std::string(input ? "input" : "output") + " type \"" + *text + "\": expected " +
               (input ? "int4, int8, int16 or int32" : "fp16, bf16, fp32, fp64 or int32"));
    return std::nullopt;
  }
  return t;
}

}  // namespace

reorder::BitField read_bit_field(const YamlNode& node) {
  reorder::BitField f;
  YamlMap map(node);
  Located where;
  map.read_uint("bit_offset", f.bit_offset, 0, UINT32_MAX - 32, where, true);
  map.read_uint("bit_width", f.bit_width, 1, 32, where, true);
  map.finish();
  return f;
}

void number_batches(reorder::ReorderPlan& plan, const YamlNode& batch) {
  plan.method = reorder::ReorderPlan::Method::kSeqBatchNumber;
  plan.batch = read_bit_field(batch);
  uint32_t seq = plan.sequence.bit_width;
  uint32_t bits = plan.batch.bit_width;
  plan.packets_per_batch = seq < bits || seq - bits > 24 ? 0 : uint32_t{1} << (seq - bits);
}

std::optional<reorder::SampleFormat> read_sample_format(const YamlNode& node,
                                                        const SampleFormatKeys& keys) {
  YamlMap map(node);
  auto input = first_of(map, keys.input);
  auto output = first_of(map, keys.output);
  auto order = first_of(map, keys.order);
  map.finish();
  if (!map.valid()) return std::nullopt;
  if (!input || !output) {
    node.error("a conversion names both " + std::string(keys.input.front()) + " and " +
               std::string(keys.output.front()));
    return std::nullopt;
  }
  reorder::SampleFormat f;
  auto in = read_type(*input, true);
  auto out = read_type(*output, false);
  if (!in || !out) return std::nullopt;
  f.input = *in;
  f.output = *out;
  if (order) {
    auto which = order->to_choice({"host", "network"});
    if (!which) return std::nullopt;
    f.order = *which == 0 ? reorder::ByteOrder::kHost : reorder::ByteOrder::kNetwork;
  }
  return f;
}

}  // namespace daqiri::config
