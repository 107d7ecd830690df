// The control channel: device events on demand, so that programs can be
// tested against a device that is removed (driver unload or reset) and a
// port that loses its link (docs/softrdma.md, "Device events").
//
// SOFTRDMA_CONTROL=PATH makes the process bind a Unix datagram socket at
// PATH ("%p" in PATH becomes the process id) when it first uses softrdma.
// The progress thread reads one command per datagram, runs it like any
// other NIC event, and answers "ok" or "error: ..." to a sender that bound
// an address (softrdma-ctl does, and waits for the answer):
//
//   remove-device [MS]  the device disappears and comes back after MS ms
//                       (default 1000)
//   add-device          it comes back now
//   port-down [keep]    the port loses its link; established connections
//                       break unless `keep`
//   port-up             the link is back
//   counters            the device's statistics (counters.h): the answer is
//                       "ok" followed by one "name value" line per counter
//   tamper KIND [ADDR]  alters the next SEND on the wire (tamper.h; tests)
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include "base.h"
#include "cm_id.h"
#include "conn.h"
#include "counters.h"
#include "device.h"
#include "fabric.h"
#include "netdev.h"
#include "qp.h"
#include "tamper.h"

namespace softrdma {

namespace {

constexpr long kDefaultAbsenceMs = 1000;
constexpr long kMaxAbsenceMs = 24L * 3600 * 1000;

char g_path[sizeof(sockaddr_un::sun_path)];
pid_t g_owner = 0;
uint64_t g_removal = 0;  // generation of the pending return (progress thread only)

void unlinkAtExit() {
  if (g_owner == getpid()) unlink(g_path);  // not a forked child's to remove
}

// Every TCP connection ends at once: the peer sees a dead peer, and this
// side reports the loss the same way (progress thread).
void severAll(const char* why) {
  for (auto& ep : Fabric::get().endpoints())
    if (auto c = std::dynamic_pointer_cast<Conn>(ep)) c->sever(why);
}

bool anyDevice() {
  for (int i = 0; i < deviceCount(); i++)
    if (currentDevice(i) != nullptr) return true;
  return false;
}

std::string addDevice() {
  if (anyDevice()) return "error: the device is present";
  g_removal++;  // cancels a pending return
  attachDevice();
  debugLog("control: device added");
  return "ok";
}

// What the kernel does on ib_unregister_device with a driver that supports
// disassociation (mlx5): DEVICE_FATAL on every uverbs file, the hardware
// objects destroyed, DEVICE_REMOVAL on every rdma_cm id bound to the device.
std::string removeDevice(long ms) {
  if (!anyDevice()) return "error: the device is already absent";
  debugLog("control: device removed for %ld ms", ms);
  detachDevice();
  for (auto& qp : allQps()) {
    std::lock_guard lk(qp->mu);
    if (!qp->destroyed) qp->flushAll(IBV_WC_WR_FLUSH_ERR);
  }
  removeCmDevice();
  severAll("the device was removed");
  uint64_t gen = ++g_removal;
  Fabric::get().schedule(Clock::now() + std::chrono::milliseconds(ms), [gen] {
    if (gen == g_removal) addDevice();
  });
  return "ok";
}

// The port of every device (a device whose port follows its interface
// takes the interface's state again at the next link change).
std::string setPort(bool up, bool keep) {
  bool present = false;
  for (int i = 0; i < deviceCount(); i++)
    present |= changePort(i, up, keep) >= 0;
  if (!present) return "error: the device is absent";
  debugLog("control: port %s", up ? "up" : "down");
  return "ok";
}

std::string execute(const std::string& line) {
  std::istringstream in(line);
  std::string cmd, arg, extra, more;
  in >> cmd >> arg >> extra >> more;
  if (!more.empty()) return "error: too many arguments";
  if (cmd == "tamper") return tamperCommand(arg, extra);
  if (!extra.empty()) return "error: too many arguments";
  if (cmd == "remove-device") {
    long ms = kDefaultAbsenceMs;
    if (!arg.empty()) {
      char* end = nullptr;
      errno = 0;
      ms = strtol(arg.c_str(), &end, 10);
      if (errno != 0 || *end != '\0' || ms < 0 || ms > kMaxAbsenceMs)
        return "error: remove-device: MS must be a number of milliseconds (0 to 86400000)";
    }
    return removeDevice(ms);
  }
  if (cmd == "add-device" && arg.empty()) return addDevice();
  if (cmd == "port-down" && (arg.empty() || arg == "keep")) return setPort(false, arg == "keep");
  if (cmd == "port-up" && arg.empty()) return setPort(true, false);
  if (cmd == "counters" && arg.empty()) return "ok\n" + formatCounters();
  if (cmd.empty()) return "error: empty command";
  return "error: unknown command '" + line +
         "' (remove-device [MS], add-device, port-down [keep], port-up, counters, tamper KIND "
         "[ADDR])";
}

struct ControlEndpoint : Endpoint {
  void onEvents(uint32_t) override {
    for (;;) {
      char buf[512];
      sockaddr_un from{};
      socklen_t fl = sizeof from;
      ssize_t n =
          recvfrom(fd, buf, sizeof buf - 1, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &fl);
      if (n < 0) {
        if (errno == EINTR) continue;
        return;  // EAGAIN: all read
      }
      buf[n] = '\0';
      std::string reply = execute(buf);
      debugLog("control: '%s': %s", buf, reply.c_str());
      if (fl > sizeof(sa_family_t))  // the sender bound an address: it wants the answer
        sendto(fd, reply.data(), reply.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from),
               fl);
    }
  }
};

}  // namespace

void startControl(Fabric& f) {
  const char* v = getenv("SOFTRDMA_CONTROL");
  if (v == nullptr || *v == '\0') return;
  std::string path;
  for (const char* p = v; *p != '\0'; p++) {
    if (p[0] == '%' && p[1] == 'p') {
      path += std::to_string(getpid());
      p++;
    } else {
      path += *p;
    }
  }
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) {
    warnLog("SOFTRDMA_CONTROL: path too long, no control channel: %s", path.c_str());
    return;
  }
  memcpy(a.sun_path, path.c_str(), path.size() + 1);
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      warnLog("SOFTRDMA_CONTROL: %s exists and is not a socket, no control channel", path.c_str());
      return;
    }
    int probe = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (probe >= 0) close(probe);
    if (live) {
      warnLog("SOFTRDMA_CONTROL: %s is in use by another process, no control channel",
              path.c_str());
      return;
    }
    unlink(path.c_str());  // stale: the process that bound it is gone
  }
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    warnLog("SOFTRDMA_CONTROL: cannot bind %s: %s", path.c_str(), strerror(errno));
    if (fd >= 0) close(fd);
    return;
  }
  memcpy(g_path, a.sun_path, sizeof g_path);
  g_owner = getpid();
  atexit(unlinkAtExit);
  auto ep = std::make_shared<ControlEndpoint>();
  ep->fd = fd;
  f.add(ep, EPOLLIN);
  debugLog("control channel at %s", path.c_str());
}

}  // namespace softrdma
