#include "reorder/sample_convert.hpp"

#include <array>
#include <bit>
#include <cstring>

namespace daqiri::reorder {
namespace {

constexpr std::array<std::string_view, 8> kNames{"int4", "int8", "int16", "int32",
                                                 "fp16", "bf16", "fp32",  "fp64"};
constexpr std::array<uint32_t, 8> kBits{4, 8, 16, 32, 16, 16, 32, 64};

// Sample `i` of `in`, sign-extended.
template <SampleType In, ByteOrder Order>
int32_t read_sample(const std::byte* in, uint32_t i) {
  if constexpr (In == SampleType::kInt4) {
    auto packed = static_cast<uint8_t>(in[i / 2]);
    uint8_t nibble = (i & 1) == 0 ? packed >> 4 : packed & 0x0f;
    return static_cast<int32_t>(static_cast<int8_t>(static_cast<uint8_t>(nibble << 4)) >> 4);
  } else if constexpr (In == SampleType::kInt8) {
    return static_cast<int8_t>(in[i]);
  } else if constexpr (In == SampleType::kInt16) {
    uint16_t v = 0;
    std::memcpy(&v, in + size_t{i} * 2, 2);
    if constexpr (Order == ByteOrder::kNetwork) v = std::byteswap(v);
    return static_cast<int16_t>(v);
  } else {
    uint32_t v = 0;
    std::memcpy(&v, in + size_t{i} * 4, 4);
    if constexpr (Order == ByteOrder::kNetwork) v = std::byteswap(v);
    return static_cast<int32_t>(v);
  }
}

// Four int32 samples (as read, in `Order`) into fp16 or bf16: each to float, then rounded to
// nearest even, without a branch, in SSE2-wide vectors (GCC's vector extensions: the baseline
// x86-64 build has nothing wider). fp16: add half an fp16 unit less one (plus the kept bit, for
// ties to even) to the magnitude, cut 13 bits, rebias the exponent (127 to 15); a magnitude
// that reaches 2^16 once rounded is infinity, and zero (the only integer whose float has a zero
// exponent) stays zero. bf16: a float's top half, rounded the same way. The one rounding of
// both: the tables below and the per-sample path take it a sample at a time.
using U32x4 = uint32_t __attribute__((vector_size(16)));
using I32x4 = int32_t __attribute__((vector_size(16)));
using F32x4 = float __attribute__((vector_size(16)));
using U16x4 = uint16_t __attribute__((vector_size(8)));

template <SampleType Out, ByteOrder Order>
U16x4 halves_of(U32x4 raw) {
  if constexpr (Order == ByteOrder::kNetwork) {
    raw = (raw >> 24) | ((raw >> 8) & 0xff00u) | ((raw << 8) & 0xff0000u) | (raw << 24);
  }
  auto bits = reinterpret_cast<U32x4>(__builtin_convertvector(reinterpret_cast<I32x4>(raw), F32x4));
  if constexpr (Out == SampleType::kBf16) {
    return __builtin_convertvector((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16, U16x4);
  } else {
    const U32x4 zero{};
    U32x4 magnitude = bits & 0x7fffffffu;
    U32x4 rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    U32x4 half = (rounded >> 13) - (112u << 10);
    half = rounded >= 0x47800000u ? zero + 0x7c00u : half;
    half = magnitude == 0u ? zero : half;
    return __builtin_convertvector(((bits >> 16) & 0x8000u) | half, U16x4);
  }
}

// One sample through the same rounding.
template <SampleType Out>
uint16_t half_of(int32_t v) {
  return halves_of<Out, ByteOrder::kHost>(U32x4{static_cast<uint32_t>(v)})[0];
}

template <SampleType Out>
void write_sample(std::byte* out, uint32_t i, int32_t v) {
  if constexpr (Out == SampleType::kFp16 || Out == SampleType::kBf16) {
    uint16_t h = half_of<Out>(v);
    std::memcpy(out + size_t{i} * 2, &h, 2);
  } else if constexpr (Out == SampleType::kFp32) {
    auto f = static_cast<float>(v);
    std::memcpy(out + size_t{i} * 4, &f, 4);
  } else if constexpr (Out == SampleType::kFp64) {
    auto d = static_cast<double>(v);
    std::memcpy(out + size_t{i} * 8, &d, 8);
  } else {
    std::memcpy(out + size_t{i} * 4, &v, 4);
  }
}

template <SampleType In, SampleType Out, ByteOrder Order>
void convert(const std::byte* in, uint32_t bytes, std::byte* out) {
  uint32_t samples = bytes * 8 / kBits[static_cast<size_t>(In)];
  for (uint32_t i = 0; i < samples; ++i)
    write_sample<Out>(out, i, read_sample<In, Order>(in, i));
}

// A byte of int4 (two samples) or int8 (one sample) has 256 values, and so has its output: a
// table of them, made once before main by the per-sample code above, turns a conversion into a
// lookup and a small copy a byte (int4 to fp16 a sample at a time ran at 1 % of memcpy's rate).
template <SampleType In, SampleType Out>
struct ByteTable {
  static constexpr uint32_t kOutBytes =
      (In == SampleType::kInt4 ? 2 : 1) * kBits[static_cast<size_t>(Out)] / 8;
  std::array<std::array<std::byte, kOutBytes>, 256> runs{};

  ByteTable() {
    for (uint32_t b = 0; b < 256; ++b) {
      const auto in = static_cast<std::byte>(b);
      for (uint32_t i = 0; i < (In == SampleType::kInt4 ? 2u : 1u); ++i)
        write_sample<Out>(runs[b].data(), i, read_sample<In, ByteOrder::kHost>(&in, i));
    }
  }
};
template <SampleType In, SampleType Out>
const ByteTable<In, Out> kByteTable;

template <SampleType In, SampleType Out>
void convert_bytes(const std::byte* in, uint32_t bytes, std::byte* out) {
  constexpr uint32_t n = ByteTable<In, Out>::kOutBytes;
  const auto& runs = kByteTable<In, Out>.runs;
  for (uint32_t i = 0; i < bytes; ++i)
    std::memcpy(out + size_t{i} * n, runs[static_cast<uint8_t>(in[i])].data(), n);
}

// int16 into a half: 2^16 values, a table of 128 KiB each (fits a core's L2).
template <SampleType Out>
struct HalfTable {
  std::array<uint16_t, 65536> halves{};
  HalfTable() {
    for (uint32_t v = 0; v < 65536; ++v)
      halves[v] = half_of<Out>(static_cast<int16_t>(v));
  }
};
template <SampleType Out>
const HalfTable<Out> kHalfTable;

template <SampleType Out, ByteOrder Order>
void convert_int16_to_half(const std::byte* in, uint32_t bytes, std::byte* out) {
  const auto& halves = kHalfTable<Out>.halves;
  for (uint32_t i = 0; i < bytes / 2; ++i) {
    uint16_t v = 0;
    std::memcpy(&v, in + size_t{i} * 2, 2);
    if constexpr (Order == ByteOrder::kNetwork) v = std::byteswap(v);
    std::memcpy(out + size_t{i} * 2, &halves[v], 2);
  }
}

// int32 into a half: 2^32 values, no table; four at a time (a sample at a time ran at 0.5-0.7
// GB/s written into fp16, VM).
template <SampleType Out, ByteOrder Order>
void convert_int32_to_half(const std::byte* in, uint32_t bytes, std::byte* out) {
  const uint32_t samples = bytes / 4;
  uint32_t i = 0;
  for (; i + 4 <= samples; i += 4) {
    U32x4 raw;
    std::memcpy(&raw, in + size_t{i} * 4, sizeof raw);
    U16x4 halves = halves_of<Out, Order>(raw);
    std::memcpy(out + size_t{i} * 2, &halves, sizeof halves);
  }
  if (i < samples) {  // the last one to three, through a zeroed block
    U32x4 raw{};
    std::memcpy(&raw, in + size_t{i} * 4, size_t{samples - i} * 4);
    U16x4 halves = halves_of<Out, Order>(raw);
    std::memcpy(out + size_t{i} * 2, &halves, size_t{samples - i} * 2);
  }
}

template <SampleType In, SampleType Out, ByteOrder Order>
ConvertFn converter_to() {
  if constexpr (In == SampleType::kInt4 || In == SampleType::kInt8) {
    return &convert_bytes<In, Out>;
  } else if constexpr (In == SampleType::kInt16 &&
                       (Out == SampleType::kFp16 || Out == SampleType::kBf16)) {
    return &convert_int16_to_half<Out, Order>;
  } else if constexpr (In == SampleType::kInt32 &&
                       (Out == SampleType::kFp16 || Out == SampleType::kBf16)) {
    return &convert_int32_to_half<Out, Order>;
  } else {
    return &convert<In, Out, Order>;
  }
}

template <SampleType In, ByteOrder Order>
ConvertFn converter_from(SampleType out) {
  switch (out) {
    case SampleType::kFp16:
      return converter_to<In, SampleType::kFp16, Order>();
    case SampleType::kBf16:
      return converter_to<In, SampleType::kBf16, Order>();
    case SampleType::kFp32:
      return converter_to<In, SampleType::kFp32, Order>();
    case SampleType::kFp64:
      return converter_to<In, SampleType::kFp64, Order>();
    case SampleType::kInt32:
      return converter_to<In, SampleType::kInt32, Order>();
    default:
      return nullptr;
  }
}

template <ByteOrder Order>
ConvertFn converter_in(const SampleFormat& f) {
  switch (f.input) {
    case SampleType::kInt4:
      return converter_from<SampleType::kInt4, Order>(f.output);
    case SampleType::kInt8:
      return converter_from<SampleType::kInt8, Order>(f.output);
    case SampleType::kInt16:
      return converter_from<SampleType::kInt16, Order>(f.output);
    case SampleType::kInt32:
      return converter_from<SampleType::kInt32, Order>(f.output);
    default:
      return nullptr;
  }
}

}  // namespace

std::optional<SampleType> sample_type_from(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<SampleType>(i);
  }
  return std::nullopt;
}

std::string_view name_of(SampleType t) {
  return kNames[static_cast<size_t>(t)];
}

uint32_t bits_of(SampleType t) {
  return kBits[static_cast<size_t>(t)];
}

bool is_input(SampleType t) {
  return t <= SampleType::kInt32;
}

bool is_output(SampleType t) {
  return t >= SampleType::kFp16 || t == SampleType::kInt32;
}

bool SampleFormat::converts() const {
  return input != output || (order == ByteOrder::kNetwork && bits_of(input) > 8);
}

std::optional<uint64_t> SampleFormat::output_bytes(uint64_t input_bytes) const {
  uint64_t in_bits = bits_of(input);
  if (input_bytes * 8 % in_bits != 0) return std::nullopt;
  return input_bytes * 8 / in_bits * bits_of(output) / 8;
}

ConvertFn converter(const SampleFormat& f) {
  return f.order == ByteOrder::kNetwork ? converter_in<ByteOrder::kNetwork>(f)
                                        : converter_in<ByteOrder::kHost>(f);
}

}  // namespace daqiri::reorder
