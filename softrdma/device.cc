// The device, its contexts and their asynchronous events.
//
// softrdma presents one RoCE-like device, "softrdma0", with one Ethernet
// port whose GID table holds the IPv4-mapped addresses of the machine's
// interfaces (as rxe does). Each time it comes back after a removal it is a
// new ibv_device; contexts opened on an earlier one stay dead.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "device.h"
#include "fork_hooks.h"

namespace softrdma {

namespace {

ibv_device* newDevice() {
  auto* d = static_cast<ibv_device*>(calloc(1, sizeof(ibv_device)));
  d->node_type = IBV_NODE_CA;
  d->transport_type = IBV_TRANSPORT_IB;
  snprintf(d->name, sizeof d->name, "softrdma0");
  snprintf(d->dev_name, sizeof d->dev_name, "uverbs0");
  snprintf(d->dev_path, sizeof d->dev_path, "/sys/class/infiniband_verbs/uverbs0");
  snprintf(d->ibdev_path, sizeof d->ibdev_path, "/sys/class/infiniband/softrdma0");
  return d;
}

// The device and the contexts open on it. Devices of earlier generations
// are kept (never freed): the contexts opened on them point at them.
struct DeviceState {
  std::mutex mu;
  ibv_device* dev = newDevice();  // nullptr while absent
  std::vector<ibv_device*> old;
  std::vector<Context*> contexts;
  std::atomic<bool> port_active{true};
};

DeviceState& device() {
  static auto* d = new DeviceState();
  return *d;
}

}  // namespace

std::vector<in6_addr> gidTable() {
  std::vector<in6_addr> gids;
  auto add = [&](in_addr a) {
    in6_addr g{};
    g.s6_addr[10] = 0xff;
    g.s6_addr[11] = 0xff;
    memcpy(&g.s6_addr[12], &a, 4);
    gids.push_back(g);
  };
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET)
        add(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr);
    }
    freeifaddrs(ifs);
  }
  if (gids.empty()) add(in_addr{htonl(INADDR_LOOPBACK)});
  // Loopback addresses first, so that GID index 0 is 127.0.0.1 wherever lo is up.
  std::stable_partition(gids.begin(), gids.end(),
                        [](const in6_addr& g) { return g.s6_addr[12] == 127; });
  return gids;
}

ibv_device* currentDevice() {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  return d.dev;
}

bool portActive() {
  return device().port_active.load();
}

void detachDevice() {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  if (d.dev != nullptr) d.old.push_back(d.dev);
  d.dev = nullptr;
  for (Context* c : d.contexts) {
    if (c->dead.exchange(true)) continue;  // lost an earlier generation
    raiseAsync(c->ctx(), IBV_EVENT_DEVICE_FATAL, kAsyncDevice, 0);
  }
}

void attachDevice() {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  if (d.dev != nullptr) return;
  d.dev = newDevice();
  d.port_active = true;
}

int setPortState(bool active) {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  if (d.dev == nullptr) return -1;
  return d.port_active.exchange(active) != active ? 1 : 0;
}

void raiseOnContexts(ibv_event_type type, uint32_t kind) {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  for (Context* c : d.contexts)
    raiseAsync(c->ctx(), type, kind, 0);
}

Context* toContext(ibv_context* c) {
  return reinterpret_cast<Context*>(reinterpret_cast<uint8_t*>(c) -
                                    offsetof(Context, vctx.context));
}

void forkDevice(ForkStep s) {
  DeviceState& d = device();
  switch (s) {
    case ForkStep::Prepare:
      d.mu.lock();
      return;
    case ForkStep::Child:
      // The parent's contexts stay usable by the child (their async pipe is
      // shared, as the uverbs file is), but device events and removals in
      // the child reach only the contexts it opens itself.
      abandon(d.contexts);
      [[fallthrough]];
    case ForkStep::Parent:
      d.mu.unlock();
      return;
  }
}

void raiseAsync(ibv_context* ctx, ibv_event_type type, uint32_t kind, uint64_t handle) {
  // After DEVICE_FATAL a disassociated context reports nothing more.
  if (contextDead(ctx) && type != IBV_EVENT_DEVICE_FATAL) return;
  AsyncRecord r{static_cast<uint32_t>(type), kind, handle};
  ssize_t n = write(toContext(ctx)->async_wfd, &r, sizeof r);
  (void)n;
}

bool addContext(ibv_device* dev, Context* c) {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  if (d.dev != dev) return false;  // removed meanwhile
  d.contexts.push_back(c);
  return true;
}

bool removeContext(Context* c) {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  std::erase(d.contexts, c);
  // Objects the program left on the context (perftest leaves a CQ): the
  // kernel destroys them when the uverbs file closes, and libibverbs'
  // ibv_close_device always returns 0. softrdma keeps their memory, and
  // the context's, since the program may still hold pointers into it.
  if (c->users.load() != 0) {
    static auto* kept = new std::vector<Context*>();
    kept->push_back(c);
    return false;
  }
  return true;
}

Context* findContextByFd(int fd) {
  struct stat s {};
  if (fstat(fd, &s) != 0) return nullptr;
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  for (Context* c : d.contexts) {
    struct stat t {};
    if (c->origin == nullptr && fstat(c->ctx()->cmd_fd, &t) == 0 && t.st_dev == s.st_dev &&
        t.st_ino == s.st_ino)
      return c;
  }
  return nullptr;
}

}  // namespace softrdma
