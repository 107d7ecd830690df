// Unit tests of a local client's credentials (daemon/local/peer_cred.h),
// read from real Unix sockets: a socket pair made by the test carries the
// test's own pid, uid, gid and supplementary groups; a client forked off
// and connected to a listener is seen with its own pid (and, when the test
// runs as root, with the uid, gid and groups it switched to, more than the
// first read holds included); a descriptor that is no socket is not
// known; identityOf hands the policy exactly what was read.
#include "daemon/local/peer_cred.h"

#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace rdmamsg::local {
namespace {

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

std::vector<gid_t> sorted(std::vector<gid_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<gid_t> ownGroups() {
  int n = ::getgroups(0, nullptr);
  std::vector<gid_t> groups(static_cast<size_t>(std::max(n, 0)));
  n = ::getgroups(static_cast<int>(groups.size()), groups.data());
  groups.resize(static_cast<size_t>(std::max(n, 0)));
  return sorted(groups);
}

TEST(PeerCredTest, ASocketPairCarriesTheTestsOwnCredentials) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Fd a(sv[0]), b(sv[1]);
  for (int fd : {a.fd, b.fd}) {
    const PeerCred c = readPeerCred(fd);
    EXPECT_TRUE(c.known);
    EXPECT_EQ(c.pid, ::getpid());
    EXPECT_EQ(c.uid, ::geteuid());
    EXPECT_EQ(c.gid, ::getegid());
    EXPECT_EQ(sorted(c.groups), ownGroups()) << "SO_PEERGROUPS: the supplementary groups";
  }
}

TEST(PeerCredTest, ADescriptorThatIsNoSocketIsNotKnown) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  Fd r(p[0]), w(p[1]);
  const PeerCred c = readPeerCred(r.fd);
  EXPECT_FALSE(c.known);
  EXPECT_EQ(c.pid, 0);
  EXPECT_EQ(c.uid, static_cast<uid_t>(-1));
  EXPECT_EQ(c.gid, static_cast<gid_t>(-1));
  EXPECT_TRUE(c.groups.empty());
  EXPECT_FALSE(readPeerCred(-1).known) << "a closed descriptor";
}

// A listener on an autobound abstract address (nothing on the file system).
struct Listener {
  Fd fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  sockaddr_un addr{};
  socklen_t len = sizeof(sa_family_t);
  bool ok = false;
  Listener() {
    addr.sun_family = AF_UNIX;
    ok = fd.fd >= 0 && ::bind(fd.fd, reinterpret_cast<sockaddr*>(&addr), len) == 0;
    len = sizeof(addr);
    ok = ok && ::getsockname(fd.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
         ::listen(fd.fd, 1) == 0;
  }
};

// What a forked client becomes before it connects (root only).
struct Become {
  bool change = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

// Forks a client that becomes `who`, connects to `l` and waits for the test
// to close its end. Returns the accepted connection's credentials and the
// child's pid; the child is reaped.
struct Accepted {
  PeerCred cred;
  pid_t child = -1;
  int status = -1;
  bool accepted = false;
};

Accepted acceptFromChild(Listener& l, const Become& who) {
  Accepted out;
  out.child = ::fork();
  if (out.child == 0) {
    ::alarm(20);  // a bound on the child whatever the parent does
    if (who.change && (::setgroups(who.groups.size(), who.groups.data()) != 0 ||
                       ::setgid(who.gid) != 0 || ::setuid(who.uid) != 0))
      ::_exit(2);
    int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&l.addr), l.len) != 0) ::_exit(3);
    char c;
    (void)!::read(s, &c, 1);  // until the parent closes its end
    ::_exit(0);
  }
  if (out.child < 0) return out;
  pollfd p{l.fd.fd, POLLIN, 0};
  if (::poll(&p, 1, 10000) == 1) {
    Fd conn(::accept4(l.fd.fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.fd >= 0) {
      out.cred = readPeerCred(conn.fd);
      out.accepted = true;
    }
  }  // conn closed: the child's read returns
  if (!out.accepted) ::kill(out.child, SIGKILL);
  ::waitpid(out.child, &out.status, 0);
  return out;
}

TEST(PeerCredTest, AConnectedClientIsSeenWithItsOwnPid) {
  Listener l;
  ASSERT_TRUE(l.ok);
  const Accepted a = acceptFromChild(l, {});
  ASSERT_TRUE(a.accepted) << "child status " << a.status;
  EXPECT_TRUE(a.cred.known);
  EXPECT_EQ(a.cred.pid, a.child) << "the client's pid, not the daemon's";
  EXPECT_NE(a.cred.pid, ::getpid());
  EXPECT_EQ(a.cred.uid, ::geteuid());
  EXPECT_EQ(a.cred.gid, ::getegid());
  EXPECT_EQ(sorted(a.cred.groups), ownGroups());
  EXPECT_TRUE(WIFEXITED(a.status) && WEXITSTATUS(a.status) == 0) << a.status;
}

TEST(PeerCredTest, AClientOfAnotherUserIsSeenAsThatUserWithItsGroups) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  Listener l;
  ASSERT_TRUE(l.ok);
  Become who{true, 54321, 54320, {54001, 54002, 54003}};
  const Accepted a = acceptFromChild(l, who);
  ASSERT_TRUE(a.accepted) << "child status " << a.status;
  EXPECT_TRUE(a.cred.known);
  EXPECT_EQ(a.cred.pid, a.child);
  EXPECT_EQ(a.cred.uid, 54321u);
  EXPECT_EQ(a.cred.gid, 54320u);
  EXPECT_EQ(sorted(a.cred.groups), who.groups);
}

TEST(PeerCredTest, MoreSupplementaryGroupsThanTheFirstReadHoldsAreAllRead) {
  if (::geteuid() != 0) GTEST_SKIP() << "setting groups needs root";
  Listener l;
  ASSERT_TRUE(l.ok);
  Become who{true, 54321, 54320, {}};
  for (gid_t g = 0; g < 100; g++)
    who.groups.push_back(55000 + g);  // more than the 32 of the first getsockopt
  const Accepted a = acceptFromChild(l, who);
  ASSERT_TRUE(a.accepted) << "child status " << a.status;
  EXPECT_EQ(sorted(a.cred.groups), who.groups);
}

TEST(PeerCredTest, IdentityOfHandsThePolicyWhatWasRead) {
  PeerCred c;
  c.pid = 42;
  c.uid = 1001;
  c.gid = 1002;
  c.groups = {7, 8, 9};
  c.known = true;
  const config::Identity id = identityOf(c);
  EXPECT_EQ(id.uid, 1001u);
  EXPECT_EQ(id.gid, 1002u);
  EXPECT_TRUE(id.known);
  ASSERT_EQ(id.groups.size(), 3u);
  EXPECT_EQ(id.groups.data(), c.groups.data()) << "a view of the credentials' groups";

  const PeerCred none;
  const config::Identity unknown = identityOf(none);
  EXPECT_FALSE(unknown.known) << "credentials not read are refused by any local_policy";
  EXPECT_EQ(unknown.uid, static_cast<uid_t>(-1));
  EXPECT_TRUE(unknown.groups.empty());
}

}  // namespace
}  // namespace rdmamsg::local
