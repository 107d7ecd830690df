// The delivery contract, end to end: a message confirmed to its sender was
// taken by the receiving application — whichever process dies — and a live
// flow keeps going beside any number of stuck flows with messages of the
// largest legal size.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"
#include "raw_session.h"
#include "rdmamsg/client.h"
#include "tests/support/wait.h"

namespace rdmamsg::itest {
namespace {

constexpr int kLines = 300000;

std::string lineText(long i) {
  char line[64];
  std::snprintf(line, sizeof line, "line-%07ld-%030d\n", i, 0);
  return line;
}

// The listening application's output is a pipe that the test reads only at
// the end: the listener takes what fits in the pipe and then blocks in its
// write, like a reader that does not keep up.
class SlowReader {
 public:
  explicit SlowReader(const std::string& path) : path_(path) {
    ::mkfifo(path.c_str(), 0600);
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  }
  ~SlowReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  // Bytes the listener has written and the test not yet read.
  int buffered() const {
    int n = 0;
    return ::ioctl(fd_, FIONREAD, &n) == 0 ? n : 0;
  }
  // Everything the listener wrote, read until every writer has gone.
  std::string drain(std::chrono::milliseconds timeout) {
    std::string all;
    char buf[65536];
    test::waitFor(
        [&] {
          for (;;) {
            ssize_t n = ::read(fd_, buf, sizeof buf);
            if (n > 0) {
              all.append(buf, static_cast<size_t>(n));
              continue;
            }
            return n == 0;  // EOF: the listener is gone; -1 EAGAIN: not yet
          }
        },
        timeout);
    return all;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// The send CLI's report: how many of the first messages were all confirmed.
long confirmedPrefix(const std::string& err) {
  std::smatch m;
  if (std::regex_search(err, m, std::regex("messages 1-([0-9]+) all were"))) return std::stol(m[1]);
  if (std::regex_search(err, m, std::regex("0 of [0-9]+ messages sent were confirmed"))) return 0;
  return -1;
}

// What the listener wrote: lines 1, 2, 3, … in order, none missing or
// repeated (a listener killed in a write may leave the last one cut short:
// a message it never finished writing); returns how many whole lines.
long checkTaken(const std::string& got) {
  size_t pos = 0;
  long n = 0;
  while (pos < got.size()) {
    const std::string want = lineText(n + 1);
    const bool cutShort = got.size() - pos < want.size() &&
                          got.compare(pos, std::string::npos, want, 0, got.size() - pos) == 0;
    if (cutShort) return n;
    if (got.compare(pos, want.size(), want) != 0) {
      ADD_FAILURE() << "after line " << n << " the listener wrote: "
                    << got.substr(pos, std::min<size_t>(80, got.size() - pos));
      return n;
    }
    pos += want.size();
    n++;
  }
  return n;
}

class Delivery : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(c_.start());
    ASSERT_TRUE(c_.waitFullMesh(10s));
    {
      std::ofstream in(c_.dir().file("lines.txt"));
      for (long i = 1; i <= kLines; i++)
        in << lineText(i);
    }
    reader_ = std::make_unique<SlowReader>(c_.dir().file("listen.fifo"));
    ASSERT_TRUE(reader_->ok());
    ASSERT_TRUE(
        startListener(listener_, c_, "beta", "inbox", kLines, c_.dir().file("listen.fifo")));
    Process::Options o;
    o.argv = {cliBinary(), "--socket", c_.socket("alpha"), "send", "beta/inbox"};
    o.stdinPath = c_.dir().file("lines.txt");
    o.stdoutPath = c_.dir().file("send.out");
    o.stderrPath = c_.dir().file("send.err");
    ASSERT_TRUE(sender_.start(o));
    // The listener's pipe is full and the stream stalls on its window:
    // beta holds deliveries its application has not taken.
    ASSERT_TRUE(waitForStatus(
        c_.socket("beta"),
        [](const Json& s) {
          return s.value("unconsumed", Json::object()).value("bytes", 0) >= 128 * 1024;
        },
        20s))
        << statusOf(c_.socket("beta"))->dump(1) << readFile(c_.dir().file("send.err"))
        << readFile(c_.dir().file("listen.fifo.err"));
    // ...and the listener has taken (written out) a good part of the pipe's worth.
    ASSERT_TRUE(test::waitFor([&] { return reader_->buffered() >= 32 * 1024; }, 20s))
        << reader_->buffered() << " bytes written by the listener";
    ASSERT_TRUE(sender_.running()) << "the stream finished before anything died";
  }

  // Every message reported confirmed is in what the application took.
  void expectConfirmedWereTaken() {
    auto code = sender_.wait(30s);
    ASSERT_TRUE(code) << "send did not finish";
    EXPECT_NE(*code, 0) << "every message confirmed although the listener took few";
    const std::string err = readFile(c_.dir().file("send.err"));
    const long confirmed = confirmedPrefix(err);
    ASSERT_GE(confirmed, 0) << err;
    const long taken = checkTaken(reader_->drain(30s));
    EXPECT_LE(confirmed, taken) << confirmed << " messages confirmed, the application took "
                                << taken << "\n"
                                << err;
    EXPECT_GT(taken, 0);
  }

  Cluster c_{{"alpha", "beta"}};
  std::unique_ptr<SlowReader> reader_;
  Process listener_, sender_;
};

TEST_F(Delivery, TheReceivingDaemonKilledBesideASlowReaderLosesNothingConfirmed) {
  c_["beta"].kill9();
  expectConfirmedWereTaken();
}

TEST_F(Delivery, TheListeningApplicationKilledLosesNothingConfirmed) {
  listener_.kill9();
  expectConfirmedWereTaken();
  // What it had not taken failed back as unknown_service, and beta serves on.
  EXPECT_NE(readFile(c_.dir().file("send.err")).find("unknown_service"), std::string::npos);
  EXPECT_TRUE(c_["beta"].running());
}

// One client connection sends to N stuck services (messages of the largest
// legal size, until each destination is held) and to a live one: the live
// flow goes on, and both daemons stay within the documented memory bound.
class Isolation : public ::testing::TestWithParam<int> {};

constexpr size_t kMaxMessage = 1u << 20;

uint64_t rssOf(const std::string& socket) {
  auto s = statusOf(socket);
  return s ? s->value("rss_bytes", uint64_t{0}) : 0;
}

TEST_P(Isolation, ALiveFlowKeepsGoingBesideStuckServicesOfTheLargestSize) {
  const int stuckCount = GetParam();
  MeshOptions o;
  o.maxMessageSize = "1MiB";
  o.messageTimeout = "60s";
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  ASSERT_TRUE(c.waitFullMesh(10s));
  [[maybe_unused]] const uint64_t rssAlpha0 = rssOf(c.socket("alpha")),
                                  rssBeta0 = rssOf(c.socket("beta"));
  auto stuck = Client::connect(c.socket("beta"));  // registers them all, takes nothing
  ASSERT_TRUE(stuck);
  for (int i = 0; i < stuckCount; i++)
    ASSERT_TRUE(stuck->registerService("stuck" + std::to_string(i)).ok());
  auto live = Taker::start(c.socket("beta"), "live");
  ASSERT_TRUE(live);
  auto sender = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(sender);

  const std::vector<std::byte> big(kMaxMessage, std::byte{'b'});
  int held = 0, round = 0;
  ASSERT_TRUE(test::waitFor(
      [&] {
        ++round;
        (void)sender->processIo();
        for (int k = 0; k < stuckCount; k++) {
          const int i = (k + round) % stuckCount;  // no destination goes first every time
          Result<uint64_t> id = sender->trySend("beta", "stuck" + std::to_string(i), big);
          if (!id.ok() && id.status().code() != Errc::would_block) return true;
        }
        held = 0;
        auto s = statusOf(c.socket("alpha"));
        if (s && peerEntry(*s, "beta"))
          for (const auto& f : peerEntry(*s, "beta")->value("flows", Json::array()))
            held += f.value("paused", false) ? 1 : 0;
        return held == stuckCount;
      },
      60s))
      << held << " of " << stuckCount << " stuck destinations held\n"
      << statusOf(c.socket("alpha"))->dump(1) << "\n"
      << statusOf(c.socket("beta"))->dump(1);

  // The same connection now streams to the live service.
  constexpr int kLive = 2000;
  for (int i = 0; i < kLive; i++)
    ASSERT_TRUE(sender->send("beta", "live", "live " + std::to_string(i)));
  int ok = 0;
  ASSERT_TRUE(test::waitFor(
      [&] {
        Completion done;
        while (sender->pollCompletion(done)) {
          if (!done.status.ok()) ADD_FAILURE() << done.status.toString();
          ok += done.status.ok() ? 1 : 0;
        }
        return ok >= kLive;
      },
      30s))
      << ok << " of " << kLive << " live messages confirmed beside " << stuckCount
      << " stuck services";
  Message m;
  for (int i = 0; i < kLive; i++) {
    ASSERT_TRUE(live->receive(m, 5s).ok()) << i;
    ASSERT_EQ(m.text(), "live " + std::to_string(i));
  }

#if !defined(__SANITIZE_ADDRESS__)  // the sanitizer's own memory would blur the bound
  // docs/architecture.md: per stuck flow, the receiver holds at most its
  // window and one message, the sender its queue, one message past it and
  // what the client wrote before it read the HOLD.
  const uint64_t slack = 64u << 20;
  const uint64_t perFlowBeta = (4u << 20) + kMaxMessage;
  const uint64_t perFlowAlpha = (2u << 20) + 2 * kMaxMessage;
  const uint64_t beforeHold = (2u << 20) + (8u << 20) + 2 * kMaxMessage;
  EXPECT_LE(rssOf(c.socket("beta")), rssBeta0 + stuckCount * perFlowBeta + slack);
  EXPECT_LE(rssOf(c.socket("alpha")), rssAlpha0 + stuckCount * perFlowAlpha + beforeHold + slack);
#endif
  EXPECT_TRUE(c["alpha"].running() && c["beta"].running());
}

INSTANTIATE_TEST_SUITE_P(StuckServices, Isolation, ::testing::Values(8, 32));

// A client sending to its own service cannot be held (it would wait for
// itself): one that sends without reading is answered busy once
// receive_memory_limit is reached, every message is either delivered or
// answered, and the daemon serves everyone else meanwhile.
TEST(SelfSend, AClientSendingToItselfWithoutReadingIsAnsweredBusyPastTheLimit) {
  MeshOptions o;
  o.extra = "receive_memory_limit: 4MiB\n";
  Cluster c({"alpha", "beta"}, o);
  ASSERT_TRUE(c.start());
  RawSession raw(c.socket("alpha"));
  ASSERT_TRUE(raw.handshake()) << raw.error();
  raw.setSendTimeout(20s);
  ASSERT_TRUE(raw.registerService("me")) << raw.error();
  const std::vector<std::byte> payload(64 * 1024, std::byte{'m'});
  constexpr uint64_t kSent = 256;  // 16 MiB: four times the limit
  for (uint64_t i = 1; i <= kSent; i++)
    ASSERT_TRUE(raw.sendMessage(i, "alpha", "me", payload))
        << "message " << i << ": " << raw.error();
  ASSERT_TRUE(waitForStatus(c.socket("alpha"), [](const Json& s) {
    return s.contains("counters") && s["counters"].value("receive_memory_full", uint64_t{0}) > 0;
  })) << "no message was answered busy";

  // Everyone else is served meanwhile.
  auto other = Client::connect(c.socket("alpha"));
  ASSERT_TRUE(other) << other.status().toString();
  ASSERT_TRUE(other->registerService("other").ok());
  const std::string x = "x";
  EXPECT_EQ(other->sendAndWait("beta", "nobody", std::as_bytes(std::span(x)), 10s).code(),
            Errc::unknown_service);

  uint64_t delivered = 0, busy = 0;
  bool registered = false;
  while (delivered + busy < kSent) {
    auto f = raw.nextFrame(10s);
    ASSERT_TRUE(f) << raw.error() << " after " << delivered << " delivered, " << busy << " busy";
    if (f->kind == proto::FrameKind::registered) {
      registered = true;
    } else if (f->kind == proto::FrameKind::deliver) {
      delivered++;
    } else {
      ASSERT_EQ(f->kind, proto::FrameKind::error) << f->text;
      EXPECT_EQ(f->errc, Errc::busy) << f->text;
      EXPECT_NE(f->text.find("receive_memory_limit"), std::string::npos) << f->text;
      busy++;
    }
  }
  EXPECT_TRUE(registered);
  EXPECT_GT(busy, 0u);
  EXPECT_LE(delivered * payload.size(), (4u << 20) + (8u << 20))
      << "the daemon held far more than receive_memory_limit for a listener that does not read";
}

}  // namespace
}  // namespace rdmamsg::itest
