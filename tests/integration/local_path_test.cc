// Integration: the local data path as the daemon's configuration sets it —
// shared_memory on (the default) or off, and a reload that changes it.
#include <gtest/gtest.h>
#include <signal.h>

#include "harness.h"
#include "rdmamsg/client.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

// A message from one client of `socket` to another comes through.
void expectRoundTrip(const std::string& node, const std::string& socket) {
  auto listener = Client::connect(socket);
  auto sender = Client::connect(socket);
  ASSERT_TRUE(listener.ok() && sender.ok());
  ASSERT_TRUE(listener->registerService("sink").ok());
  Result<uint64_t> id = sender->send(node, "sink", "hi");
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(sender->flush(5s).ok());
  Message m;
  ASSERT_TRUE(listener->receive(m, 5s).ok());
  EXPECT_EQ(m.text(), "hi");
  Completion done;
  ASSERT_TRUE(sender->waitCompletion(done, 5s).ok());
  EXPECT_EQ(done.msgId, *id);
  EXPECT_TRUE(done.status.ok()) << done.status.toString();
}

TEST(LocalPath, SharedMemoryIsUsedByDefault) {
  Cluster c({"alpha"});
  ASSERT_TRUE(c.start());
  auto client = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(client.ok()) << client.status().toString();
  EXPECT_TRUE(client->usesSharedMemory());
}

TEST(LocalPath, SharedMemoryFalseKeepsClientsOnTheSocket) {
  MeshOptions o;
  o.extra = "shared_memory: false\n";
  Cluster c({"alpha"}, o);
  ASSERT_TRUE(c.start());
  auto client = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(client.ok()) << client.status().toString();
  EXPECT_FALSE(client->usesSharedMemory());
  expectRoundTrip("alpha", c.socket("alpha"));
}

TEST(LocalPath, AReloadAppliesSharedMemoryToNewClients) {
  Cluster c({"alpha"});
  ASSERT_TRUE(c.start());
  auto before = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(before.ok() && before->usesSharedMemory());
  writeFile(c.configPath("alpha"), readFile(c.configPath("alpha")) + "shared_memory: false\n");
  c["alpha"].signal(SIGHUP);
  ASSERT_TRUE(c["alpha"].waitLog("reload: shared_memory: true -> false"));
  ASSERT_TRUE(c["alpha"].waitLog("configuration generation 2 applied"));
  auto after = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(after.ok()) << after.status().toString();
  EXPECT_FALSE(after->usesSharedMemory());
  // The client already on shared memory keeps it and still works.
  EXPECT_TRUE(before->usesSharedMemory());
  ASSERT_TRUE(before->registerService("still").ok());
  ASSERT_TRUE(after->send("alpha", "still", "x").ok());
  ASSERT_TRUE(after->flush(5s).ok());
  Message m;
  ASSERT_TRUE(before->receive(m, 5s).ok());
  EXPECT_EQ(m.text(), "x");
}

}  // namespace
}  // namespace rdmamsg::itest
