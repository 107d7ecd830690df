// Tests of the mesh secret keys: what a secret file must be, and what the
// configuration shows of it.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include "config/loader.h"
#include "config/reload.h"
#include "config/secret.h"
#include "config_test_util.h"

namespace rdmamsg::config {
namespace {

using test::kMinimal;
using test::load;
using test::onlyProblem;

const std::string kKey = "0123456789abcdef0123456789abcdef-mesh";

std::string secretFile(const test::TempDir& dir, const std::string& name, const std::string& text,
                       mode_t mode) {
  const std::string path = dir.write(name, text);
  ::chmod(path.c_str(), mode);
  return path;
}

TEST(SecretTest, IsReadWithoutTrailingWhitespaceAndShownOnlyByFingerprint) {
  test::TempDir dir;
  const std::string path = secretFile(dir, "s", kKey + "\r\n", 0600);
  const LoadResult r = load("secret_file: " + path + "\n" + std::string(kMinimal));
  ASSERT_TRUE(r.ok()) << testing::PrintToString(test::problemStrings(r));
  ASSERT_TRUE(r.config().auth.secret);
  EXPECT_EQ(r.config().auth.secret->bytes, kKey);
  EXPECT_EQ(r.config().auth.secret->fingerprint, fingerprintOf(kKey));
  EXPECT_EQ(r.config().auth.secret->fingerprint.size(), 16u);
  EXPECT_NE(fingerprintOf(kKey), fingerprintOf(kKey + "x"));
  const std::string text = describe(r.config());
  EXPECT_NE(text.find("secret_file=" + path + " (fingerprint " + fingerprintOf(kKey) + ")"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find(kKey), std::string::npos) << "the secret is never shown";
  EXPECT_FALSE(r.config().auth.previousSecret);
}

TEST(SecretTest, GroupReadableIsAcceptedForTheDaemonsGroup) {
  test::TempDir dir;
  const std::string path = secretFile(dir, "s", kKey, 0640);
  EXPECT_TRUE(load("secret_file: " + path + "\n" + std::string(kMinimal)).ok());
}

TEST(SecretTest, AFileOthersCanReadIsRefused) {
  test::TempDir dir;
  const std::string path = secretFile(dir, "s", kKey, 0644);
  const ConfigProblem p = onlyProblem(load("secret_file: " + path + "\n" + std::string(kMinimal)));
  EXPECT_EQ(p.line, 1);
  EXPECT_NE(p.message.find("secret_file"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("accessible by other users (mode 0644)"), std::string::npos)
      << p.message;
  EXPECT_NE(p.message.find("chmod o= " + path), std::string::npos) << p.message;
}

TEST(SecretTest, AGroupWritableFileIsRefused) {
  test::TempDir dir;
  const std::string path = secretFile(dir, "s", kKey, 0660);
  const ConfigProblem p = onlyProblem(load("secret_file: " + path + "\n" + std::string(kMinimal)));
  EXPECT_NE(p.message.find("writable by its group"), std::string::npos) << p.message;
}

TEST(SecretTest, AShortOrMissingOrRelativeSecretIsRefused) {
  test::TempDir dir;
  const std::string shortOne = secretFile(dir, "short", "too short\n", 0600);
  ConfigProblem p = onlyProblem(load("secret_file: " + shortOne + "\n" + std::string(kMinimal)));
  EXPECT_NE(p.message.find("holds 9 bytes; a mesh secret has 32..4096"), std::string::npos)
      << p.message;
  EXPECT_NE(p.message.find("openssl rand"), std::string::npos) << p.message;
  p = onlyProblem(load("secret_file: " + dir.path().string() + "/none\n" + std::string(kMinimal)));
  EXPECT_NE(p.message.find("cannot read"), std::string::npos) << p.message;
  EXPECT_NE(p.message.find("No such file"), std::string::npos) << p.message;
  p = onlyProblem(load("secret_file: mesh.secret\n" + std::string(kMinimal)));
  EXPECT_NE(p.message.find("not an absolute path"), std::string::npos) << p.message;
  p = onlyProblem(load("secret_file: " + dir.path().string() + "\n" + std::string(kMinimal)));
  EXPECT_NE(p.message.find("not a regular file"), std::string::npos) << p.message;
}

TEST(SecretTest, AGroupOtherThanRootsOrTheDaemonsMayNotReadIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (chown)";
  test::TempDir dir;
  const std::string path = secretFile(dir, "s", kKey, 0640);
  ASSERT_EQ(::chown(path.c_str(), 0, 4242), 0);
  ConfigProblem p = onlyProblem(load("secret_file: " + path + "\n" + std::string(kMinimal)));
  EXPECT_NE(p.message.find("readable by group 4242"), std::string::npos) << p.message;
  // Without group permission the group does not matter.
  ::chmod(path.c_str(), 0600);
  EXPECT_TRUE(load("secret_file: " + path + "\n" + std::string(kMinimal)).ok());
}

TEST(SecretTest, ADirectoryOthersMayWriteIsRefused) {
  test::TempDir dir;
  const std::string path = secretFile(dir, "s", kKey, 0600);
  ::chmod(dir.path().c_str(), 0777);
  ConfigProblem p = onlyProblem(load("secret_file: " + path + "\n" + std::string(kMinimal)));
  EXPECT_NE(p.message.find("which another user than root or the daemon's may write"),
            std::string::npos)
      << p.message;
  // Also when the path is a symlink from a safe directory into that one.
  test::TempDir safe;
  const std::string link = (safe.path() / "link").string();
  ASSERT_EQ(::symlink(path.c_str(), link.c_str()), 0);
  p = onlyProblem(load("secret_file: " + link + "\n" + std::string(kMinimal)));
  EXPECT_NE(p.message.find("may write"), std::string::npos) << p.message;
  ::chmod(dir.path().c_str(), 0700);
  EXPECT_TRUE(load("secret_file: " + link + "\n" + std::string(kMinimal)).ok());
}

TEST(SecretTest, AnOversizedFileIsRefusedWithItsSize) {
  test::TempDir dir;
  const std::string path = secretFile(dir, "s", std::string(5000, 'k'), 0600);
  ConfigProblem p = onlyProblem(load("secret_file: " + path + "\n" + std::string(kMinimal)));
  EXPECT_NE(p.message.find("holds 5000 bytes"), std::string::npos) << p.message;
}

TEST(SecretTest, APreviousSecretNeedsACurrentOne) {
  test::TempDir dir;
  const std::string path = secretFile(dir, "s", kKey, 0600);
  const ConfigProblem p =
      onlyProblem(load("previous_secret_file: " + path + "\n" + std::string(kMinimal)));
  EXPECT_NE(p.message.find("only accepted next to a current one"), std::string::npos) << p.message;
  const ConfigProblem q = onlyProblem(
      load("secret_file: ~\nprevious_secret_file: " + path + "\n" + std::string(kMinimal)));
  EXPECT_NE(q.message.find("only accepted next to a current one"), std::string::npos) << q.message;
  const LoadResult both = load("secret_file: " + path + "\nprevious_secret_file: " + path + "\n" +
                               std::string(kMinimal));
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both.config().auth.previousSecret->bytes, kKey);
}

TEST(SecretTest, ANewSecretIsAppliedByAReload) {
  test::TempDir dir;
  const std::string a = secretFile(dir, "a", kKey, 0600);
  const std::string b = secretFile(dir, "b", kKey + "-new", 0600);
  const LoadResult running = load("secret_file: " + a + "\n" + std::string(kMinimal));
  const LoadResult file =
      load("secret_file: " + b + "\nprevious_secret_file: " + a + "\n" + std::string(kMinimal));
  ASSERT_TRUE(running.ok() && file.ok());
  auto plan = std::get<ReloadPlan>(planReload(running.config(), file.config()));
  EXPECT_TRUE(plan.restartPending.empty());
  ASSERT_EQ(plan.changed.size(), 2u) << testing::PrintToString(plan.changed);
  EXPECT_NE(plan.changed[0].find("secret_file: " + a), std::string::npos) << plan.changed[0];
  EXPECT_EQ(plan.next.auth.secret->bytes, kKey + "-new");
  EXPECT_EQ(plan.next.auth.previousSecret->bytes, kKey);
}

}  // namespace
}  // namespace rdmamsg::config
