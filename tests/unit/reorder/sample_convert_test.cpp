#include "reorder/sample_convert.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace daqiri::reorder {
namespace {

std::vector<std::byte> bytes(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values)
    out.push_back(static_cast<std::byte>(v));
  return out;
}

// Converts `in` and reads the output back as T.
template <typename T>
std::vector<T> run(SampleFormat f, const std::vector<std::byte>& in) {
  auto out_bytes = f.output_bytes(in.size());
  EXPECT_TRUE(out_bytes.has_value());
  std::vector<std::byte> out(*out_bytes);
  auto fn = converter(f);
  EXPECT_NE(fn, nullptr);
  fn(in.data(), static_cast<uint32_t>(in.size()), out.data());
  std::vector<T> values(out.size() / sizeof(T));
  std::memcpy(values.data(), out.data(), out.size());
  return values;
}

TEST(SampleConvert, IntegersAreReadSignedInTheirByteOrder) {
  using V = std::vector<int32_t>;
  SampleFormat f{SampleType::kInt4, SampleType::kInt32, ByteOrder::kHost};
  EXPECT_EQ(run<int32_t>(f, bytes({0x7f, 0x80, 0x9e})), (V{7, -1, -8, 0, -7, -2}));
  f.input = SampleType::kInt8;
  EXPECT_EQ(run<int32_t>(f, bytes({0x80, 0xff, 0x00, 0x7f})), (V{-128, -1, 0, 127}));
  f.input = SampleType::kInt16;
  EXPECT_EQ(run<int32_t>(f, bytes({0x01, 0x02, 0xfe, 0xff})), (V{0x0201, -2}));
  f.order = ByteOrder::kNetwork;
  EXPECT_EQ(run<int32_t>(f, bytes({0x01, 0x02, 0xff, 0xfe})), (V{0x0102, -2}));
  f.input = SampleType::kInt32;
  EXPECT_EQ(run<int32_t>(f, bytes({0x80, 0, 0, 1, 0, 0, 1, 0})), (V{-2147483647, 256}));
  f.order = ByteOrder::kHost;
  EXPECT_EQ(run<int32_t>(f, bytes({1, 0, 0, 0x80})), (V{-2147483647}));
}

TEST(SampleConvert, HalvesRoundToNearestEvenAndOverflowToInfinity) {
  auto fp16 = [](std::initializer_list<int16_t> v) {
    std::vector<std::byte> in(v.size() * 2);
    std::memcpy(in.data(), std::data(v), in.size());
    return run<uint16_t>({SampleType::kInt16, SampleType::kFp16, ByteOrder::kHost}, in);
  };
  using H = std::vector<uint16_t>;
  EXPECT_EQ(fp16({0, 1, -2, 2049, 2050, 2051, 32767, -32768}),
            (H{0x0000, 0x3c00, 0xc000, 0x6800, 0x6801, 0x6802, 0x7800, 0xf800}));
  auto fp16_of32 = [](std::initializer_list<int32_t> v) {
    std::vector<std::byte> in(v.size() * 4);
    std::memcpy(in.data(), std::data(v), in.size());
    return run<uint16_t>({SampleType::kInt32, SampleType::kFp16, ByteOrder::kHost}, in);
  };
  EXPECT_EQ(fp16_of32({65504, 65519, 65520, 70000, -70000}),
            (H{0x7bff, 0x7bff, 0x7c00, 0x7c00, 0xfc00}));
  auto bf16 = [](std::initializer_list<int16_t> v) {
    std::vector<std::byte> in(v.size() * 2);
    std::memcpy(in.data(), std::data(v), in.size());
    return run<uint16_t>({SampleType::kInt16, SampleType::kBf16, ByteOrder::kHost}, in);
  };
  EXPECT_EQ(bf16({0, 1, -1, 256, 257, 258, 259}),
            (H{0x0000, 0x3f80, 0xbf80, 0x4380, 0x4380, 0x4381, 0x4382}));
}

// Every int16, and random int32s, against the compiler's own float-to-half conversion and a
// nearest-of-two search for bfloat16: the same rounding by another route. Both byte orders,
// and a count that leaves the int32 path's last vector block short.
TEST(SampleConvert, HalvesMatchAnIndependentRoundingOfEverySample) {
  std::vector<int32_t> values;
  for (int32_t v = -32768; v <= 32767; ++v)
    values.push_back(v);
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i)
    values.push_back(static_cast<int32_t>(rng()));
  for (int32_t v : {65504, 65519, 65520, 65535, -65520, INT32_MAX, INT32_MIN})
    values.push_back(v);
  ASSERT_NE(values.size() % 4, 0u);
  std::vector<std::byte> in(values.size() * 4), swapped(values.size() * 4);
  std::memcpy(in.data(), values.data(), in.size());
  for (size_t i = 0; i < values.size(); ++i) {
    auto n = std::byteswap(static_cast<uint32_t>(values[i]));
    std::memcpy(&swapped[i * 4], &n, 4);
  }
  auto fp16 = run<uint16_t>({SampleType::kInt32, SampleType::kFp16, ByteOrder::kHost}, in);
  auto bf16 = run<uint16_t>({SampleType::kInt32, SampleType::kBf16, ByteOrder::kHost}, in);
  EXPECT_EQ(run<uint16_t>({SampleType::kInt32, SampleType::kFp16, ByteOrder::kNetwork}, swapped),
            fp16);
  EXPECT_EQ(run<uint16_t>({SampleType::kInt32, SampleType::kBf16, ByteOrder::kNetwork}, swapped),
            bf16);
  size_t wrong_fp16 = 0;
  size_t wrong_bf16 = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    auto f = static_cast<float>(values[i]);
    wrong_fp16 += fp16[i] != std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    auto bits = std::bit_cast<uint32_t>(f);
    uint32_t low = bits & 0xffff0000u;
    uint32_t high = low + 0x10000u;
    double below = std::fabs(static_cast<double>(f) - std::bit_cast<float>(low));
    double above = std::fabs(static_cast<double>(std::bit_cast<float>(high)) - f);
    uint32_t nearest = below < above ? low : above < below ? high : ((low >> 16) & 1) ? high : low;
    wrong_bf16 += bf16[i] != nearest >> 16;
  }
  EXPECT_EQ(wrong_fp16, 0u);
  EXPECT_EQ(wrong_bf16, 0u);
}

// int4, int8 and int16 inputs take tables made from the per-sample code; the same values
// widened to int32 take the per-sample code itself. Every byte value and every int16, into
// every output, in both byte orders, must come out the same both ways.
TEST(SampleConvert, TableConversionsEqualThePerSampleOnes) {
  const SampleType outputs[] = {SampleType::kFp16, SampleType::kBf16, SampleType::kFp32,
                                SampleType::kFp64, SampleType::kInt32};
  auto convert = [](SampleFormat f, const std::vector<std::byte>& in) {
    std::vector<std::byte> out(*f.output_bytes(in.size()));
    converter(f)(in.data(), static_cast<uint32_t>(in.size()), out.data());
    return out;
  };
  auto widened = [&](const std::vector<int32_t>& values, SampleType out) {
    std::vector<std::byte> in(values.size() * 4);
    std::memcpy(in.data(), values.data(), in.size());
    return convert({SampleType::kInt32, out, ByteOrder::kHost}, in);
  };
  std::vector<std::byte> every_byte(256);
  std::vector<int32_t> int4s, int8s;
  for (int b = 0; b < 256; ++b) {
    every_byte[b] = static_cast<std::byte>(b);
    int4s.push_back(static_cast<int8_t>(b & 0xf0) >> 4);
    int4s.push_back(static_cast<int8_t>((b & 0x0f) << 4) >> 4);
    int8s.push_back(static_cast<int8_t>(b));
  }
  std::vector<std::byte> every_int16(65536 * 2), swapped(65536 * 2);
  std::vector<int32_t> int16s;
  for (uint32_t v = 0; v < 65536; ++v) {
    auto h = static_cast<uint16_t>(v);
    auto n = std::byteswap(h);
    std::memcpy(&every_int16[v * 2], &h, 2);
    std::memcpy(&swapped[v * 2], &n, 2);
    int16s.push_back(static_cast<int16_t>(h));
  }
  for (SampleType out : outputs) {
    for (ByteOrder order : {ByteOrder::kHost, ByteOrder::kNetwork}) {
      SCOPED_TRACE(std::string(name_of(out)) + (order == ByteOrder::kHost ? " host" : " network"));
      EXPECT_EQ(convert({SampleType::kInt4, out, order}, every_byte), widened(int4s, out));
      EXPECT_EQ(convert({SampleType::kInt8, out, order}, every_byte), widened(int8s, out));
      EXPECT_EQ(convert({SampleType::kInt16, out, order},
                        order == ByteOrder::kHost ? every_int16 : swapped),
                widened(int16s, out));
    }
  }
}

TEST(SampleConvert, WideOutputsHoldTheSampleExactly) {
  SampleFormat f{SampleType::kInt4, SampleType::kFp64, ByteOrder::kHost};
  EXPECT_EQ(run<double>(f, bytes({0x8f})), (std::vector<double>{-8.0, -1.0}));
  f = {SampleType::kInt8, SampleType::kFp32, ByteOrder::kHost};
  EXPECT_EQ(run<float>(f, bytes({0x81, 0x05})), (std::vector<float>{-127.0F, 5.0F}));
}

TEST(SampleConvert, SizesAndNamesFollowTheTypes) {
  SampleFormat f{SampleType::kInt4, SampleType::kFp16, ByteOrder::kHost};
  EXPECT_EQ(f.output_bytes(3), 12u);
  f.input = SampleType::kInt16;
  EXPECT_EQ(f.output_bytes(5), std::nullopt) << "half a sample";
  EXPECT_EQ(f.output_bytes(6), 6u);
  f = {SampleType::kInt32, SampleType::kInt32, ByteOrder::kHost};
  EXPECT_FALSE(f.converts());
  f.order = ByteOrder::kNetwork;
  EXPECT_TRUE(f.converts());
  f = {SampleType::kInt8, SampleType::kInt32, ByteOrder::kNetwork};
  EXPECT_TRUE(f.converts());
  EXPECT_EQ(sample_type_from("bf16"), SampleType::kBf16);
  EXPECT_EQ(sample_type_from("int64"), std::nullopt);
  EXPECT_EQ(name_of(SampleType::kInt4), "int4");
  EXPECT_TRUE(is_input(SampleType::kInt32));
  EXPECT_TRUE(is_output(SampleType::kInt32));
  EXPECT_FALSE(is_input(SampleType::kFp16));
  EXPECT_FALSE(is_output(SampleType::kInt16));
}

}  // namespace
}  // namespace daqiri::reorder
