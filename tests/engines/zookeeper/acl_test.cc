// zk:// with digest credentials: every node the engine creates gives all permissions to
// those credentials and read to everyone. In ZooKeeper, deleting a node (or creating
// one) takes the parent's permission, so a client with other credentials — or none —
// can read a lock's queue but can neither delete a holder's request node nor queue one
// of its own; Clients with the same credentials share the locks as usual.
#include <gtest/gtest.h>

#include <zookeeper/zookeeper.h>

#include <cstdint>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "test_util.h"
#include "warden/client.h"
#include "warden/error.h"
#include "warden/fence_gate.h"
#include "warden/lease.h"
#include "warden/lock.h"

namespace warden::testing {
namespace {

std::string zk_code(int rc) { return std::string(zerror(rc)) + " (" + std::to_string(rc) + ")"; }

TEST(ZkAcl, OtherCredentialsCannotDeleteOrJoinAHeldLockAndTheSameCredentialsShareIt) {
  ZooKeeperEnsemble zk;
  const ClientOptions options = with_ttl(4s, 2000ms);
  Client alice = Client::open(uri_as(zk, "alice:s3cret"), options);
  Client alice_too = Client::open(uri_as(zk, "alice:s3cret"), options);
  Client mallory = Client::open(uri_as(zk, "mallory:s3cret"), options);
  Client anonymous = Client::open(zk.uri(), options);
  FenceGate gate;

  Lease held = alice.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  ASSERT_TRUE(gate.admit(held.sequencer()));
  const std::string lock = zk_lock_path("g", "x");
  const auto children = zk.children(lock);  // world-readable
  ASSERT_EQ(children.size(), 1u) << describe(children);
  const std::string node = lock + '/' + children.front();

  // Behind the engine's back, through the C client: other credentials, or none, or the
  // right user with a wrong password.
  for (const std::string auth : {"mallory:s3cret", "", "alice:wrong"}) {
    const int rc = zk.delete_node(node, auth);
    EXPECT_EQ(rc, ZNOAUTH) << "deleting the held node as '" << auth << "': " << zk_code(rc);
    const int lock_rc = zk.delete_node(lock, auth);
    EXPECT_NE(lock_rc, ZOK) << "deleted the held lock's node as '" << auth << "'";
    const int group_rc = zk.delete_node("/warden/g", auth);
    EXPECT_NE(group_rc, ZOK) << "deleted the group's node as '" << auth << "'";
  }
  EXPECT_EQ(zk.children(lock), children) << "the queue changed";

  // Through warden: other credentials can read the queue (check) but not join it.
  EXPECT_TRUE(mallory.check(held.sequencer()));
  EXPECT_TRUE(anonymous.check(held.sequencer()));
  for (Client* other : {&mallory, &anonymous}) {
    for (const Mode mode : {Mode::exclusive, Mode::shared}) {
      fails_with(Errc::permission_denied,
                 [&] { (void)other->lock("g", "x").acquire(mode, Wait::none()); });
    }
    // Nor create a new lock in the group, which belongs to alice too.
    fails_with(Errc::permission_denied,
               [&] { (void)other->lock("g", "fresh").acquire(Mode::exclusive, Wait::none()); });
  }
  EXPECT_EQ(zk.children(lock), children) << "a refused request left a node";
  EXPECT_FALSE(zk.exists(zk_lock_path("g", "fresh")));

  std::this_thread::sleep_for(1000ms);  // renewals went on
  EXPECT_FALSE(held.lost());
  EXPECT_TRUE(alice.check(held.sequencer()));

  // The same credentials on another Client: the usual exclusion, then the lock.
  EXPECT_FALSE(alice_too.lock("g", "x").acquire(Mode::exclusive, Wait::none()));
  EXPECT_FALSE(alice_too.lock("g", "x").acquire(Mode::shared, Wait::none()));
  auto waiting = acquire_queued(alice_too, zk, "x", Mode::exclusive, Wait::up_to(10s));
  ASSERT_EQ(requests(zk, "g", "x"), 2u) << "the second Client did not queue";
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(waiting.wait_for(0s), std::future_status::timeout) << "granted a held lock";
  const std::uint64_t token = held.token();
  held.release();
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  Lease next = waiting.get();
  ASSERT_TRUE(next);
  EXPECT_GT(next.token(), token);
  EXPECT_TRUE(gate.admit(next.sequencer()));

  // Its node, created by alice_too's session, is just as safe from the others.
  const auto now_children = zk.children(lock);
  ASSERT_EQ(now_children.size(), 1u) << describe(now_children);
  EXPECT_EQ(zk.delete_node(lock + '/' + now_children.front(), "mallory:s3cret"), ZNOAUTH);
  // ...and alice's credentials may delete it (as an operator with them could).
  EXPECT_EQ(zk.delete_node(lock + '/' + now_children.front(), "alice:s3cret"), ZOK);
  EXPECT_TRUE(eventually([&] { return next.lost(); }, 5s))
      << "a grant whose node was deleted was not reported lost";
  EXPECT_NO_THROW(next.release());

  // Shared grants of both alice Clients coexist.
  Lease r1 = alice.lock("g", "x").acquire(Mode::shared, Wait::none());
  Lease r2 = alice_too.lock("g", "x").acquire(Mode::shared, Wait::none());
  EXPECT_TRUE(r1);
  EXPECT_TRUE(r2);
  r1 = Lease();
  r2 = Lease();
  EXPECT_TRUE(no_requests(zk, "g", "x")) << describe(lock_children(zk, "g", "x"));
  // Containers are removed by the server whatever their ACL.
  EXPECT_TRUE(eventually([&] { return !zk.exists("/warden/g"); }, 5s))
      << describe(warden_tree(zk));
}

TEST(ZkAcl, WrongPasswordCannotTouchTheLocks) {
  // ZooKeeper's digest auth accepts any user:password pair (it only records the
  // identity), so it is the ACL that keeps a wrong password out, if the open does not.
  ZooKeeperEnsemble zk;
  Client alice = Client::open(uri_as(zk, "alice:s3cret"), with_ttl(4s));
  Lease held = alice.lock("g", "x").acquire(Mode::exclusive, Wait::none());
  ASSERT_TRUE(held);
  std::optional<Client> wrong;
  try {
    wrong.emplace(Client::open(uri_as(zk, "alice:wrong"), with_ttl(4s, 2000ms)));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::permission_denied) << e.what();
    return;  // refused at open: stricter still
  }
  fails_with(Errc::permission_denied,
             [&] { (void)wrong->lock("g", "x").acquire(Mode::exclusive, Wait::none()); });
  EXPECT_TRUE(wrong->check(held.sequencer()));
  held.release();
  // A free lock in alice's group is still alice's.
  fails_with(Errc::permission_denied,
             [&] { (void)wrong->lock("g", "x").acquire(Mode::exclusive, Wait::none()); });
  EXPECT_TRUE(no_requests(zk, "g", "x")) << describe(lock_children(zk, "g", "x"));
}

}  // namespace
}  // namespace warden::testing
