// softrdma-ctl PATH COMMAND [ARGS...]
//
// Sends one command to the control channel of a program running on softrdma
// (the socket its SOFTRDMA_CONTROL names) and waits for the answer:
//
//   softrdma-ctl /tmp/daemon.ctl remove-device 2000
//   softrdma-ctl /tmp/daemon.ctl port-down
//   softrdma-ctl /tmp/daemon.ctl counters    (prints "name value" lines)
//
// Exits 0 once the program has carried the command out; 1 with a message
// when the socket does not exist, nobody reads it, the command is refused or
// no answer comes within 5 s; 2 on a usage error; 3 when the program exits
// before answering (it may have carried the command out: a program may exit
// on DEVICE_REMOVAL).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

constexpr int kReplyTimeoutMs = 5000;
constexpr int kSliceMs = 50;

int usage() {
  std::fprintf(stderr,
               "usage: softrdma-ctl PATH COMMAND [ARGS...]\n"
               "commands: remove-device [MS], add-device, port-down [keep], port-up, counters, "
               "tamper KIND [ADDR]\n"
               "tamper's KIND (for tests): flip, truncate, replay, reorder, inject:HEX, status, "
               "off\n");
  return 2;
}

bool fill(sockaddr_un& a, const std::string& path) {
  a = sockaddr_un{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path) return false;
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return true;
}

// Whether a program still reads the socket at `a` (a datagram socket whose
// program is gone refuses connections; a removed one does not exist).
bool alive(const sockaddr_un& a) {
  const int probe = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (probe < 0) return true;
  const bool ok = connect(probe, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  close(probe);
  return ok;
}

// The answer comes back to this socket: bound next to the target (a path
// reaches across network namespaces), else to an autobound abstract name.
class ReplySocket {
 public:
  explicit ReplySocket(const std::string& target) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    sockaddr_un a{};
    std::string path = target + ".reply-" + std::to_string(getpid());
    if (fill(a, path) && bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      path_ = path;
      return;
    }
    sockaddr_un autobind{};
    autobind.sun_family = AF_UNIX;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&autobind), sizeof(sa_family_t)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~ReplySocket() {
    if (!path_.empty()) unlink(path_.c_str());
    if (fd_ >= 0) close(fd_);
  }
  ReplySocket(const ReplySocket&) = delete;
  ReplySocket& operator=(const ReplySocket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string path = argv[1];
  std::string command = argv[2];
  for (int i = 3; i < argc; i++)
    command += std::string(" ") + argv[i];
  sockaddr_un target{};
  if (!fill(target, path)) {
    std::fprintf(stderr, "softrdma-ctl: %s: invalid socket path\n", path.c_str());
    return 1;
  }
  ReplySocket sock(path);
  if (sock.fd() < 0) {
    std::fprintf(stderr, "softrdma-ctl: socket: %s\n", std::strerror(errno));
    return 1;
  }
  if (sendto(sock.fd(), command.data(), command.size(), 0, reinterpret_cast<sockaddr*>(&target),
             sizeof target) < 0) {
    const int e = errno;
    if (e == ECONNREFUSED)
      std::fprintf(stderr, "softrdma-ctl: %s: no program listens on this socket (stale)\n",
                   path.c_str());
    else
      std::fprintf(stderr, "softrdma-ctl: %s: %s\n", path.c_str(), std::strerror(e));
    return 1;
  }
  // Wait for the answer; a program that exits meanwhile (perhaps in reaction
  // to the command) never answers.
  for (int waited = 0;; waited += kSliceMs) {
    pollfd pfd{sock.fd(), POLLIN, 0};
    const int n = poll(&pfd, 1, kSliceMs);
    if (n > 0) break;
    if (n < 0 && errno != EINTR) {
      std::fprintf(stderr, "softrdma-ctl: poll: %s\n", std::strerror(errno));
      return 1;
    }
    if (!alive(target)) {
      std::fprintf(stderr,
                   "softrdma-ctl: %s: the program went away before answering (the command may "
                   "have been carried out)\n",
                   path.c_str());
      return 3;
    }
    if (waited >= kReplyTimeoutMs) {
      std::fprintf(stderr, "softrdma-ctl: %s: no answer within %d ms\n", path.c_str(),
                   kReplyTimeoutMs);
      return 1;
    }
  }
  char reply[4096];
  const ssize_t got = recv(sock.fd(), reply, sizeof reply - 1, 0);
  if (got < 0) {
    std::fprintf(stderr, "softrdma-ctl: %s: %s\n", path.c_str(), std::strerror(errno));
    return 1;
  }
  reply[got] = '\0';
  if (std::strcmp(reply, "ok") == 0) return 0;
  if (std::strncmp(reply, "ok\n", 3) == 0) {  // an answer with output (counters)
    std::fputs(reply + 3, stdout);
    return 0;
  }
  std::fprintf(stderr, "softrdma-ctl: %s\n", reply);
  return 1;
}
