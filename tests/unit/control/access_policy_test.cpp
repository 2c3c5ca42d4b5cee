#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>

#include "control/access_policy.hpp"
#include "control/connection_registry.hpp"

namespace daqiri::control {
namespace {

PeerIdentity peer(uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
  PeerIdentity p;
  p.uid = uid;
  p.gid = gid;
  p.groups = std::move(groups);
  p.user = "u" + std::to_string(uid);
  return p;
}

TEST(AccessPolicy, RolesFromUidsAndGroups) {
  config::AccessPolicyConfig cfg;
  cfg.admins.uids = {1000};
  cfg.admins.gids = {50};
  cfg.clients.uids = {2000};
  cfg.default_clients = true;
  AccessPolicy policy(cfg, /*default_client_group=*/gid_t{60}, false);
  EXPECT_EQ(policy.role_of(peer(0, 0)), Role::kAdmin);  // root always
  EXPECT_EQ(policy.role_of(peer(1000, 1000)), Role::kAdmin);
  EXPECT_EQ(policy.role_of(peer(1001, 50)), Role::kAdmin);             // primary group
  EXPECT_EQ(policy.role_of(peer(1002, 1002, {7, 50})), Role::kAdmin);  // supplementary group
  EXPECT_EQ(policy.role_of(peer(2000, 2000)), Role::kClient);
  EXPECT_EQ(policy.role_of(peer(3000, 3000, {60})), Role::kClient);  // default client group
  EXPECT_EQ(policy.role_of(peer(4000, 4000)), Role::kNone);
}

TEST(AccessPolicy, ExplicitClientsReplaceTheDefaultGroup) {
  config::AccessPolicyConfig cfg;
  cfg.clients.uids = {2000};
  cfg.default_clients = false;
  AccessPolicy policy(cfg, gid_t{60}, false);
  EXPECT_EQ(policy.role_of(peer(3000, 3000, {60})), Role::kNone);
}

TEST(AccessPolicy, DenialNamesTheCallerAndTheMissingRole) {
  AccessPolicy policy({}, std::nullopt, false);
  auto r = policy.require(peer(4000, 4000), Role::kClient, "list flows");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(r.error().message,
            "uid 4000 (u4000) may not list flows: it needs the client role and is listed in "
            "neither daemon.access.admins nor daemon.access.clients");
  EXPECT_TRUE(policy.require(peer(0, 0), Role::kAdmin, "x"));
}

TEST(AccessPolicy, TcpCallersGetTheConfiguredRole) {
  PeerIdentity tcp;
  tcp.transport = PeerIdentity::Transport::kTcp;
  tcp.uid = 0;  // meaningless over TCP: must not make it an admin
  EXPECT_EQ(AccessPolicy({}, std::nullopt, false).role_of(tcp), Role::kClient);
  EXPECT_EQ(AccessPolicy({}, std::nullopt, true).role_of(tcp), Role::kAdmin);
}

TEST(ConnectionRegistry, ResolvesOnlyKnownFdPeers) {
  ConnectionRegistry reg;
  reg.record(7, peer(1000, 1000));
  ASSERT_TRUE(reg.lookup("fd:7"));
  EXPECT_EQ(reg.lookup("fd:7")->uid, 1000u);
  EXPECT_FALSE(reg.lookup("fd:8"));
  EXPECT_FALSE(reg.lookup("fd:7x"));
  EXPECT_FALSE(reg.lookup("unix:/x"));
  reg.record(7, peer(2000, 2000));  // fd reused by a new connection
  EXPECT_EQ(reg.lookup("fd:7")->uid, 2000u);
}

// TCP callers reach gRPC through the gate's relay on loopback: the relay's port names the
// real peer; a TCP peer string that the gate did not record (another route to the TLS
// listener, or an address gRPC reports directly) resolves to nobody.
TEST(ConnectionRegistry, ResolvesTcpPeersOnlyThroughTheGatesRelays) {
  ConnectionRegistry reg;
  EXPECT_FALSE(reg.lookup("ipv4:10.0.0.1:5"));
  EXPECT_FALSE(reg.lookup("ipv4:127.0.0.1:40000"));
  reg.record_tcp(40000, "ipv4:10.0.0.1:5");
  auto p = reg.lookup("ipv4:127.0.0.1:40000");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->transport, PeerIdentity::Transport::kTcp);
  EXPECT_EQ(p->address, "ipv4:10.0.0.1:5");
  EXPECT_FALSE(reg.lookup("ipv4:127.0.0.1:40000x"));
  reg.forget_tcp(40000);
  EXPECT_FALSE(reg.lookup("ipv4:127.0.0.1:40000"));
}

// gRPC closes the connections it was given without telling the registry, and their numbers
// go to whatever opens next: only an fd that still names the recorded socket counts.
TEST(ConnectionRegistry, CountsAConnectionWhileItsNumberNamesTheSocketItWasRecordedWith) {
  std::array<int, 2> first{}, second{}, third{}, pipe_fds{};
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, first.data()), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, second.data()), 0);
  ConnectionRegistry reg;
  reg.record(first[0], peer(1000, 1000));
  reg.record(second[0], peer(1000, 1000));
  reg.record(second[1], peer(2000, 2000));
  EXPECT_EQ(reg.open_for(1000), 2u);
  EXPECT_EQ(reg.open_for(2000), 1u);

  ::close(first[0]);  // gone: the entry with it
  EXPECT_EQ(reg.open_for(1000), 1u);
  EXPECT_FALSE(reg.lookup("fd:" + std::to_string(first[0])));

  // The number reused by another socket, and by something that is no socket at all.
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, third.data()), 0);
  ASSERT_EQ(::dup2(third[0], second[0]), second[0]);
  EXPECT_EQ(reg.open_for(1000), 0u);
  ASSERT_EQ(::pipe(pipe_fds.data()), 0);
  ASSERT_EQ(::dup2(pipe_fds[0], second[1]), second[1]);
  EXPECT_EQ(reg.open_for(2000), 0u);

  for (int fd : {first[1], second[0], second[1], third[0], third[1], pipe_fds[0], pipe_fds[1]})
    ::close(fd);
}

}  // namespace
}  // namespace daqiri::control
