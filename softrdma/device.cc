// The devices, their contexts and their asynchronous events.
//
// softrdma presents RoCE-like devices, "softrdma0" and up, each with one
// Ethernet port whose GID table holds the IPv4-mapped addresses of its
// interface (netdev.h): one device over every address of the machine, or
// one per interface SOFTRDMA_DEVICES names, as rxe puts one over each
// netdev. Each time a device comes back after a removal it is a new
// ibv_device; contexts opened on an earlier one stay dead.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "device.h"
#include "fork_hooks.h"
#include "netdev.h"

namespace softrdma {

namespace {

// A device: the ibv_device programs see, and its index (its interface,
// netdev.h). ibv_device first: the two pointers convert.
struct Device {
  ibv_device dev;
  int index;
};

ibv_device* newDevice(int index) {
  auto* d = static_cast<Device*>(calloc(1, sizeof(Device)));
  d->index = index;
  ibv_device& v = d->dev;
  v.node_type = IBV_NODE_CA;
  v.transport_type = IBV_TRANSPORT_IB;
  snprintf(v.name, sizeof v.name, "softrdma%d", index);
  snprintf(v.dev_name, sizeof v.dev_name, "uverbs%d", index);
  snprintf(v.dev_path, sizeof v.dev_path, "/sys/class/infiniband_verbs/uverbs%d", index);
  snprintf(v.ibdev_path, sizeof v.ibdev_path, "/sys/class/infiniband/softrdma%d", index);
  return &v;
}

// One device and its port.
struct Slot {
  ibv_device* dev = nullptr;  // nullptr while absent
  std::atomic<bool> port_active{true};
};

// The devices and the contexts open on them. Devices of earlier
// generations are kept (never freed): the contexts opened on them point at
// them.
struct DeviceState {
  DeviceState() : slots(static_cast<size_t>(deviceSlots())) {
    for (size_t i = 0; i < slots.size(); i++) {
      slots[i].dev = newDevice(static_cast<int>(i));
      slots[i].port_active = interfaceRunning(static_cast<int>(i));
    }
  }
  std::mutex mu;
  std::vector<Slot> slots;
  std::vector<ibv_device*> old;
  std::vector<Context*> contexts;
};

DeviceState& device() {
  static auto* d = new DeviceState();
  return *d;
}

bool validIndex(int index) {
  return index >= 0 && static_cast<size_t>(index) < device().slots.size();
}

}  // namespace

std::vector<in6_addr> gidTable(int index) {
  return interfaceGids(index);
}

int deviceCount() {
  return static_cast<int>(device().slots.size());
}

int deviceIndex(const ibv_device* dev) {
  return dev != nullptr ? reinterpret_cast<const Device*>(dev)->index : 0;
}

int contextDevice(ibv_context* ctx) {
  return ctx != nullptr ? deviceIndex(ctx->device) : 0;
}

ibv_device* currentDevice(int index) {
  if (!validIndex(index)) return nullptr;
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  return d.slots[index].dev;
}

bool isCurrentDevice(const ibv_device* dev) {
  if (dev == nullptr) return false;
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  for (const Slot& s : d.slots)
    if (s.dev == dev) return true;
  return false;
}

bool portActive(int index) {
  return validIndex(index) && device().slots[index].port_active.load();
}

void detachDevice() {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  for (Slot& s : d.slots) {
    if (s.dev != nullptr) d.old.push_back(s.dev);
    s.dev = nullptr;
  }
  for (Context* c : d.contexts) {
    if (c->dead.exchange(true)) continue;  // lost an earlier generation
    raiseAsync(c->ctx(), IBV_EVENT_DEVICE_FATAL, kAsyncDevice, 0);
  }
}

void attachDevice() {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  for (size_t i = 0; i < d.slots.size(); i++) {
    Slot& s = d.slots[i];
    if (s.dev != nullptr) continue;
    s.dev = newDevice(static_cast<int>(i));
    s.port_active = interfaceRunning(static_cast<int>(i));
  }
}

int setPortState(int index, bool active) {
  if (!validIndex(index)) return -1;
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  Slot& s = d.slots[index];
  if (s.dev == nullptr) return -1;
  return s.port_active.exchange(active) != active ? 1 : 0;
}

void raiseOnContexts(int index, ibv_event_type type, uint32_t kind) {
  DeviceState& d = device();
  std::lock_guard lk(d.mu);
  for (Context* c : d.contexts)
    if (contextDevice(c->ctx()) == index) raiseAsync(c->ctx(), type, kind, 0);
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
  if (!validIndex(deviceIndex(dev)) || d.slots[deviceIndex(dev)].dev != dev)
    return false;  // removed meanwhile
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
