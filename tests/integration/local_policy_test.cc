// Integration: the local access policy (local_policy). Real daemons; clients
// are the rdmamsg CLI run as other users (setpriv, so the tests need root),
// refused with permission_denied naming the rule, counted in the status and
// the metrics, while every other client goes on. Also: socket_mode and
// socket_group apply to a socket that systemd passes in.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "harness.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

constexpr const char* kSetpriv = "/usr/bin/setpriv";
constexpr int kPermissionDenied = 9;  // rdmamsg's exit code

// uids and gids the tests run clients as (no passwd entries needed: the
// policy names them by id).
constexpr int kBilling = 4201;  // owns the billing services
constexpr int kApp = 4202;      // an application, in group kApps
constexpr int kStranger = 4299;
constexpr int kApps = 4300;

const char* const kPolicy =
    "socket_mode: \"0666\"\n"
    "local_policy:\n"
    "  connect:\n"
    "    users: [4201]\n"
    "    groups: [4300]\n"
    "  register:\n"
    "    - services: [billing, \"billing.*\"]\n"
    "      users: [4201]\n"
    "    - services: [\"*\"]\n"
    "      groups: [4300]\n"
    "  send:\n"
    "    - destinations: [\"beta/audit*\"]\n"
    "      users: [4201]\n"
    "    - destinations: [\"*/*\"]\n"
    "      users: [4201]\n"
    "      groups: [4300]\n";

struct As {
  int uid;
  int gid;
  std::vector<int> groups;
};

std::vector<std::string> wrapperFor(const As& as) {
  std::vector<std::string> argv = {kSetpriv, "--reuid=" + std::to_string(as.uid),
                                   "--regid=" + std::to_string(as.gid)};
  if (as.groups.empty()) {
    argv.push_back("--clear-groups");
  } else {
    std::string list;
    for (int g : as.groups)
      list += (list.empty() ? "" : ",") + std::to_string(g);
    argv.push_back("--groups=" + list);
  }
  return argv;
}

Process::Options cliOptions(const TempDir& dir, const As& as, const std::vector<std::string>& args,
                            const std::string& tag) {
  Process::Options o;
  o.argv = wrapperFor(as);
  o.argv.push_back(cliBinary());
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.stdoutPath = dir.file(tag + ".out");
  o.stderrPath = dir.file(tag + ".err");
  return o;
}

// runCli, as another user.
CliResult runCliAs(const TempDir& dir, const As& as, const std::vector<std::string>& args) {
  static int counter = 0;
  const std::string tag = "as" + std::to_string(++counter);
  const Process::Options o = cliOptions(dir, as, args, tag);
  CliResult r;
  Process p;
  if (!p.start(o)) return r;
  auto code = p.wait(20s);
  if (!code) {
    p.kill9();
    r.err = "(timed out) ";
  }
  r.code = code.value_or(-SIGKILL);
  r.out = readFile(o.stdoutPath);
  r.err += readFile(o.stderrPath);
  return r;
}

uint64_t denied(const Json& status, const std::string& action) {
  return status["local_policy"]["permission_denied"].value(action, uint64_t{0});
}

class LocalPolicy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (runs clients as other users)";
    if (::access(kSetpriv, X_OK) != 0) GTEST_SKIP() << "needs " << kSetpriv;
    MeshOptions o;
    o.nodeExtra["alpha"] = kPolicy;
    cluster_ = std::make_unique<Cluster>(std::vector<std::string>{"alpha", "beta"}, o);
    // Other users must reach the socket in the test's directory.
    std::filesystem::permissions(
        cluster_->dir().path(),
        std::filesystem::perms::others_exec | std::filesystem::perms::group_exec,
        std::filesystem::perm_options::add);
    ASSERT_TRUE(cluster_->start());
    ASSERT_TRUE(cluster_->waitFullMesh());
  }
  std::string alpha() const { return cluster_->socket("alpha"); }
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(LocalPolicy, AUserTheConnectRuleDoesNotNameIsRefusedAndCounted) {
  const CliResult r =
      runCliAs(cluster_->dir(), {kStranger, kStranger, {}}, {"--socket", alpha(), "status"});
  EXPECT_EQ(r.code, kPermissionDenied) << r.out << r.err;
  EXPECT_NE(r.err.find("permission_denied"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("local_policy.connect"), std::string::npos) << r.err;

  // Allowed: by uid, and by a supplementary group.
  const CliResult byUid =
      runCliAs(cluster_->dir(), {kBilling, kBilling, {}}, {"--socket", alpha(), "status"});
  EXPECT_EQ(byUid.code, 0) << byUid.err;
  const CliResult byGroup =
      runCliAs(cluster_->dir(), {kApp, kApp, {kApps}}, {"--socket", alpha(), "status"});
  EXPECT_EQ(byGroup.code, 0) << byGroup.err;

  const auto s = statusOf(alpha());
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE((*s)["local_policy"]["enabled"].get<bool>());
  EXPECT_EQ(denied(*s, "connect"), 1u) << s->dump();
  EXPECT_EQ(denied(*s, "register"), 0u);
  EXPECT_EQ(denied(*s, "send"), 0u);
  const CliResult m = runCli(cluster_->dir(), {"--socket", alpha(), "metrics"});
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("rdmamsg_permission_denied_total{action=\"connect\"} 1\n"),
            std::string::npos)
      << m.out;
  EXPECT_TRUE(cluster_->waitFullMesh(2s));  // nothing else disturbed
  EXPECT_TRUE(cluster_->operator[]("alpha").waitLog("permission denied (connect"));
}

TEST_F(LocalPolicy, TheFirstRuleMatchingAServiceDecidesWhoRegistersIt) {
  // billing is kBilling's, even though kApp's group may register "*".
  const CliResult r = runCliAs(cluster_->dir(), {kApp, kApp, {kApps}},
                               {"--socket", alpha(), "listen", "billing", "--count", "1"});
  EXPECT_EQ(r.code, kPermissionDenied) << r.out << r.err;
  EXPECT_NE(r.err.find("local_policy.register[0]"), std::string::npos) << r.err;
  // A name no rule gives a user outside the group.
  const CliResult none = runCliAs(cluster_->dir(), {kBilling, kBilling, {}},
                                  {"--socket", alpha(), "listen", "orders", "--count", "1"});
  EXPECT_EQ(none.code, kPermissionDenied) << none.err;
  EXPECT_NE(none.err.find("local_policy.register[1]"), std::string::npos) << none.err;

  // The owner registers it, and the group registers other names.
  Process billing, orders;
  ASSERT_TRUE(billing.start(cliOptions(cluster_->dir(), {kBilling, kBilling, {}},
                                       {"--socket", alpha(), "listen", "billing", "--count", "1"},
                                       "billing")));
  ASSERT_TRUE(orders.start(cliOptions(cluster_->dir(), {kApp, kApp, {kApps}},
                                      {"--socket", alpha(), "listen", "orders", "--count", "1"},
                                      "orders")));
  ASSERT_TRUE(waitForStatus(
      alpha(), [](const Json& s) { return hasService(s, "billing") && hasService(s, "orders"); }));
  const auto s = statusOf(alpha());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(denied(*s, "register"), 2u) << s->dump();
  // Both get their messages (root sends: root is always allowed).
  EXPECT_EQ(runCli(cluster_->dir(), {"--socket", alpha(), "send", "alpha/billing", "b1"}).code, 0);
  EXPECT_EQ(runCli(cluster_->dir(), {"--socket", alpha(), "send", "alpha/orders", "o1"}).code, 0);
  EXPECT_EQ(billing.wait(10s), 0);
  EXPECT_EQ(orders.wait(10s), 0);
  EXPECT_NE(readFile(cluster_->dir().file("billing.out")).find("b1"), std::string::npos);
}

TEST_F(LocalPolicy, ASendTheRulesDoNotAllowFailsWithItsRuleAndOthersKeepSending) {
  Process audit;
  ASSERT_TRUE(
      startListener(audit, *cluster_, "beta", "audit", 1, cluster_->dir().file("audit.out")));
  const CliResult r = runCliAs(cluster_->dir(), {kApp, kApp, {kApps}},
                               {"--socket", alpha(), "send", "beta/audit", "from-app"});
  EXPECT_EQ(r.code, kPermissionDenied) << r.out << r.err;
  EXPECT_NE(r.err.find("local_policy.send[0]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("permission_denied"), std::string::npos) << r.err;

  const CliResult ok = runCliAs(cluster_->dir(), {kBilling, kBilling, {}},
                                {"--socket", alpha(), "send", "beta/audit", "from-billing"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(audit.wait(10s), 0);
  const std::string got = readFile(cluster_->dir().file("audit.out"));
  EXPECT_NE(got.find("from-billing"), std::string::npos) << got;
  EXPECT_EQ(got.find("from-app"), std::string::npos) << got;
  const auto s = statusOf(alpha());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(denied(*s, "send"), 1u) << s->dump();
  EXPECT_EQ(denied(*s, "connect"), 0u);
}

TEST_F(LocalPolicy, AReloadThatTakesAServiceAwayClosesItsHolder) {
  Process billing;
  ASSERT_TRUE(billing.start(cliOptions(cluster_->dir(), {kBilling, kBilling, {}},
                                       {"--socket", alpha(), "listen", "billing"}, "billing")));
  ASSERT_TRUE(waitForStatus(alpha(), [](const Json& s) { return hasService(s, "billing"); }));

  std::string config = readFile(cluster_->configPath("alpha"));
  const std::string from = "    - services: [billing, \"billing.*\"]\n      users: [4201]\n";
  const size_t at = config.find(from);
  ASSERT_NE(at, std::string::npos) << config;
  config.replace(at, from.size(),
                 "    - services: [billing, \"billing.*\"]\n      users: [4202]\n");
  writeFile(cluster_->configPath("alpha"), config);
  cluster_->operator[]("alpha").signal(SIGHUP);

  ASSERT_TRUE(waitForStatus(alpha(), [](const Json& s) {
    return s["local_policy"].value("revoked_sessions", uint64_t{0}) == 1 &&
           !hasService(s, "billing");
  })) << statusOf(alpha()).value_or(Json()).dump();
  EXPECT_EQ(billing.wait(10s), kPermissionDenied);
  const std::string err = readFile(cluster_->dir().file("billing.err"));
  EXPECT_NE(err.find("local_policy changed"), std::string::npos) << err;
  EXPECT_NE(err.find("local_policy.register[0]"), std::string::npos) << err;
  // The new owner gets it.
  const CliResult r =
      runCliAs(cluster_->dir(), {kApp, kApp, {kApps}}, {"--socket", alpha(), "status"});
  EXPECT_EQ(r.code, 0) << r.err;
}

// --- socket activation ---------------------------------------------------------------

TEST(SocketActivation, SocketModeAndGroupApplyToTheSocketSystemdPasses) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (chown to another group)";
  const char* activate = "/usr/bin/systemd-socket-activate";
  if (::access(activate, X_OK) != 0) GTEST_SKIP() << "needs " << activate;
  MeshOptions o;
  o.nodeExtra["alpha"] = "socket_mode: \"0640\"\nsocket_group: \"4321\"\n";
  // systemd-socket-activate binds the socket (with its own umask's mode, and
  // root's group) and execs the daemon on the first connection. The daemon's
  // command line is "softrdma-run rdmamsgd -c DIR/alpha.yaml ...": the socket
  // is DIR/alpha.sock, the one the configuration names.
  o.nodeWrapper["alpha"] = {
      "/bin/sh", "-c", std::string("exec ") + activate + " -l \"${4%.yaml}.sock\" \"$@\"", "sh"};
  Cluster activated({"alpha", "beta"}, o);
  ASSERT_TRUE(activated.start());
  struct stat st {};
  ASSERT_EQ(::stat(activated.socket("alpha").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_gid, 4321u);
  EXPECT_TRUE(activated["alpha"].waitLog("listening on " + activated.socket("alpha")));
}

}  // namespace
}  // namespace rdmamsg::itest
