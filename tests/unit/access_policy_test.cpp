#include <gtest/gtest.h>

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
  EXPECT_EQ(reg.lookup("ipv4:10.0.0.1:5")->transport, PeerIdentity::Transport::kTcp);
  reg.record(7, peer(2000, 2000));  // fd reused by a new connection
  EXPECT_EQ(reg.lookup("fd:7")->uid, 2000u);
}

}  // namespace
}  // namespace daqiri::control
