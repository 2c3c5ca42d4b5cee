// decode_session_message: what a client's bytes on the session socket become. A message is
// taken only when it is exactly its type's size and says this ABI; anything else ends the
// session with a reason a person can act on.
#include "session/session_message.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <variant>
#include <vector>

#include "daqiri/session_header.hpp"

namespace daqiri::session {
namespace {

template <typename T>
std::vector<std::byte> bytes_of(const T& msg) {
  std::vector<std::byte> out(sizeof msg);
  std::memcpy(out.data(), &msg, sizeof msg);
  return out;
}

daqiri_msg_hello hello(const char* name) {
  daqiri_msg_hello h{};
  h.h = abi::message_header(DAQIRI_MSG_HELLO, sizeof h);
  std::strncpy(h.name, name, sizeof h.name - 1);
  return h;
}

std::string refusal(const SessionMessage& m) {
  const auto* r = std::get_if<Refusal>(&m);
  return r ? r->why : "";
}

TEST(SessionMessage, AHelloIsTakenOnceWithItsNamePrintable) {
  auto m = decode_session_message(bytes_of(hello("gpu-rx\x01\"x")), 0, false);
  ASSERT_TRUE(std::holds_alternative<Hello>(m)) << refusal(m);
  EXPECT_EQ(std::get<Hello>(m).name, "gpu-rx??x");
  EXPECT_EQ(refusal(decode_session_message(bytes_of(hello("again")), 0, true)),
            "it sent a malformed HELLO");
}

TEST(SessionMessage, AClaimOrDetachOfExactlyItsSizeIsTaken) {
  daqiri_msg_claim c{};
  c.h = abi::message_header(DAQIRI_MSG_CLAIM, sizeof c);
  c.attachment_id = 9;
  auto m = decode_session_message(bytes_of(c), 0, true);
  ASSERT_TRUE(std::holds_alternative<Claim>(m)) << refusal(m);
  EXPECT_EQ(std::get<Claim>(m).msg.attachment_id, 9u);

  daqiri_msg_detach d{abi::message_header(DAQIRI_MSG_DETACH, sizeof d), 4};
  auto n = decode_session_message(bytes_of(d), 0, true);
  ASSERT_TRUE(std::holds_alternative<Detach>(n)) << refusal(n);
  EXPECT_EQ(std::get<Detach>(n).msg.attachment_id, 4u);

  // One byte more, said in the header and sent: still not a CLAIM.
  auto longer = bytes_of(c);
  longer.push_back(std::byte{0});
  daqiri_msg_header h = abi::message_header(DAQIRI_MSG_CLAIM, longer.size());
  std::memcpy(longer.data(), &h, sizeof h);
  EXPECT_FALSE(refusal(decode_session_message(longer, 0, true)).empty());
}

TEST(SessionMessage, AnythingElseEndsTheSessionSayingWhy) {
  auto good = bytes_of(hello("x"));
  EXPECT_EQ(refusal(decode_session_message(good, 1, false)), "it sent file descriptors");
  EXPECT_EQ(refusal(decode_session_message({good.data(), 4}, 0, false)), "it sent a short message");
  daqiri_msg_hello old = hello("x");
  old.h.version = DAQIRI_ABI_VERSION - 1;
  EXPECT_NE(refusal(decode_session_message(bytes_of(old), 0, false)).find("ABI"),
            std::string::npos);
  daqiri_msg_hello lying = hello("x");
  lying.h.length = sizeof lying + 8;  // says more than came
  EXPECT_FALSE(refusal(decode_session_message(bytes_of(lying), 0, false)).empty());
}

TEST(SessionMessage, NamesArePrintableBoundedAndEndAtTheFirstNul) {
  EXPECT_EQ(printable_name(std::string_view("ab\0cd", 5)), "ab");
  EXPECT_EQ(printable_name("caf\xc3\xa9\\"), "caf???");
  EXPECT_EQ(printable_name(std::string(100, 'n')).size(), 63u);
}

}  // namespace
}  // namespace daqiri::session
