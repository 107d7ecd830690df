// The devices ("softrdma0", ..., present unless removed through the control
// channel), the contexts open on them, and their asynchronous events
// (device.cc). Objects of every kind raise their events through raiseAsync;
// async_events.cc hands them to the program.
#pragma once

#include <atomic>
#include <vector>

#include <netinet/in.h>

#include "base.h"

namespace softrdma {

constexpr uint64_t kNodeGuid = 0x02005e00536f6674ULL;  // "...Soft"
// Device `index`'s GUID: kNodeGuid with the index in its fourth byte.
constexpr uint64_t nodeGuid(int index) {
  return kNodeGuid + (static_cast<uint64_t>(index & 0xff) << 32);
}

struct Context {
  verbs_context vctx;  // ibv_context is its last member (libibverbs ABI)
  ibv_context* ctx() { return &vctx.context; }
  int async_wfd = -1;
  std::atomic<int> users{0};  // PDs, CQs, channels
  // The device was removed under this context (a disassociated uverbs
  // file): calls that create or modify resources fail with EIO, destroys
  // succeed.
  std::atomic<bool> dead{false};
  // A context made by ibv_import_device: the context whose objects it shares
  // (import.cc). Null for one opened by ibv_open_device.
  Context* origin = nullptr;
};
Context* toContext(ibv_context* c);
// The open context (not an imported one) whose cmd_fd `fd` is a copy of, or
// nullptr (import.cc).
Context* findContextByFd(int fd);
// Whether `c` (or the context of a PD, CQ, QP...) lost its device.
inline bool contextDead(ibv_context* c);

// Kinds of asynchronous event records (the object an event names).
enum AsyncKind : uint32_t {
  kAsyncCq = 0,
  kAsyncQp = 1,
  kAsyncSrq = 2,
  kAsyncPort = 3,
  kAsyncDevice = 4
};
void raiseAsync(ibv_context* ctx, ibv_event_type type, uint32_t kind, uint64_t handle);
// An async event travels through the context's async pipe as a record
// naming the object by handle, so that a record outliving its object is
// skipped rather than dereferenced (async_events.cc reads them).
struct AsyncRecord {
  uint32_t type;
  uint32_t kind;  // AsyncKind
  uint64_t handle;
};

// ------------------------------------------------------------ the devices
//
// One device ("softrdma0") over every address, or one per interface
// SOFTRDMA_DEVICES names ("softrdma0", "softrdma1", ...; netdev.h), each
// present unless removed through the control channel (control.cc). Each
// time one comes back it is a new ibv_device (a new generation); contexts
// opened on an earlier one stay dead.

int deviceCount();
// Device `index`, or nullptr while it is absent (or no such device).
ibv_device* currentDevice(int index);
bool isCurrentDevice(const ibv_device* dev);
// The index of one of softrdma's devices, of any generation.
int deviceIndex(const ibv_device* dev);
int contextDevice(ibv_context* ctx);  // deviceIndex(ctx->device)
bool portActive(int index);
// Marks every device absent and every open context dead, raising
// IBV_EVENT_DEVICE_FATAL on each (the last event a context reports).
void detachDevice();
// A new generation of every absent device appears, its port as its link.
void attachDevice();
// Sets device `index`'s port state: 1 if it changed, 0 if not, -1 while
// the device is absent.
int setPortState(int index, bool active);
// Raises `type` on every open context of device `index` that has not lost
// its device.
void raiseOnContexts(int index, ibv_event_type type, uint32_t kind);
// Adds a context opened on `dev` to the device's list: false (nothing
// added) if `dev` is no longer the current device (verbs_context.cc).
bool addContext(ibv_device* dev, Context* c);
// Takes a context out of the list (ibv_close_device): true if it may be
// freed, false if objects remain on it (it is kept, never freed).
bool removeContext(Context* c);
// Device `index`'s GID table: the IPv4-mapped addresses of its interface
// (of every interface for the single device), loopback first.
std::vector<in6_addr> gidTable(int index);

inline bool contextDead(ibv_context* c) {
  return c != nullptr && toContext(c)->dead.load();
}

}  // namespace softrdma
