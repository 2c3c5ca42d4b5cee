// Converting a packet's samples as a reorder places them, on the CPU: signed integers of 4, 8,
// 16 or 32 bits into fp16, bf16, fp32, fp64 or int32, the way DAQIRI's GPU reorder does (each
// sample to float first, then rounded to nearest even into fp16 or bf16; int4 is two samples a
// byte, the high nibble first; `network` byte order swaps samples wider than a byte). int4 and
// int8 inputs, and int16 into a half, go through tables made once at start from that code;
// int32 into a half four samples at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace daqiri::reorder {

enum class SampleType : uint8_t { kInt4, kInt8, kInt16, kInt32, kFp16, kBf16, kFp32, kFp64 };
enum class ByteOrder : uint8_t { kHost, kNetwork };

// "int4", "fp16", ...; nullopt for a name DAQIRI does not have.
std::optional<SampleType> sample_type_from(std::string_view name);
std::string_view name_of(SampleType t);
[[nodiscard]] uint32_t bits_of(SampleType t);
// What a reorder reads (int4 to int32) and writes (fp16, bf16, fp32, fp64, int32).
[[nodiscard]] bool is_input(SampleType t);
[[nodiscard]] bool is_output(SampleType t);

struct SampleFormat {
  SampleType input = SampleType::kInt8;
  SampleType output = SampleType::kInt32;
  ByteOrder order = ByteOrder::kHost;

  // Whether the bytes change on the way (otherwise they are copied as they are).
  [[nodiscard]] bool converts() const;
  // Output bytes for `input_bytes` of samples; nullopt when they are not whole samples.
  [[nodiscard]] std::optional<uint64_t> output_bytes(uint64_t input_bytes) const;
};

// Converts the whole samples of `in` (`bytes` of them, a multiple of a sample) into `out`
// (output_bytes(bytes) long). An input and output type from is_input/is_output.
using ConvertFn = void (*)(const std::byte* in, uint32_t bytes, std::byte* out);
[[nodiscard]] ConvertFn converter(const SampleFormat& f);

}  // namespace daqiri::reorder
