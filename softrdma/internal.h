// softrdma's internal object model: the C structures rdma-core hands to
// programs (ibv_cq, ibv_qp, rdma_cm_id, ...) embedded as the first member of
// softrdma's own objects, plus the process-wide Fabric that owns the progress
// thread and the TCP endpoints.
//
// Ownership: objects handed to C callers are owned by softrdma from create
// to destroy. Objects that the progress thread may still be using when the
// program destroys them (QPs, connections, cm ids) are held by shared_ptr;
// the C pointer stays valid until the last reference goes.
//
// Lock order (outer to inner): a connection's receive side (Conn::progress,
// a try-lock) → Fabric::cm_mu → Qp::mu → Srq::mu → Cq::mu; Conn::tx_mu and
// the channel/timer locks are leaves. Fabric::cm_mu → the Fabric's own lock
// (cmContext) → the device lock (open contexts).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "wire.h"

#define SOFTRDMA_API extern "C" __attribute__((visibility("default")))

namespace softrdma {

using Clock = std::chrono::steady_clock;

// Device limits reported by ibv_query_device and enforced on every call.
constexpr uint32_t kMaxQpWr = 16384;
constexpr uint32_t kMaxSge = 32;
// Inline data: rxe's limit. A QP is granted max(16 * max_send_sge,
// max_inline_data) bytes (grantSendCap, verbs_qp.cc).
constexpr uint32_t kMaxInline = 512;
constexpr int kMaxCqe = (1 << 22) - 1;
// The max_cqe the device reports and enforces: kMaxCqe, or less when
// SOFTRDMA_MAX_CQE says so (a small device, for tests).
int maxCqe();
constexpr uint32_t kMaxSrqWr = 16384;
constexpr uint8_t kMaxRdAtom = 16;
constexpr size_t kConnectPrivateData = 56;  // IB CM REQ, after the 36-byte CMA header
constexpr size_t kAcceptPrivateData = 196;  // IB CM REP
constexpr size_t kRejectPrivateData = 148;  // IB CM REJ

int setErr(int err);  // sets errno = err, returns -1
void debugLog(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void warnLog(const char* fmt, ...) __attribute__((format(printf, 1, 2)));  // always printed

struct Qp;
struct Cq;
struct Srq;
struct Conn;
struct CmId;
struct UdState;  // ud.h

// ---------------------------------------------------------------- verbs

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
// A new context on `dev` (ibv_open_device: cmd_fd -1, a descriptor of its
// own is made); `cmd_fd` >= 0 is taken over (ibv_import_device).
ibv_context* openContext(ibv_device* dev, int cmd_fd);
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

// ------------------------------------------------------------ the device
//
// One device, present unless removed through the control channel
// (control.cc). Each time it comes back it is a new ibv_device (a new
// generation); contexts opened on an earlier one stay dead.

// The current device, or nullptr while it is absent.
ibv_device* currentDevice();
bool portActive();
// Marks the device absent and every open context dead, raising
// IBV_EVENT_DEVICE_FATAL on each (the last event a context reports).
void detachDevice();
// A new generation of the device appears, its port ACTIVE.
void attachDevice();
// Sets the port state: 1 if it changed, 0 if not, -1 while the device is absent.
int setPortState(bool active);
// Raises `type` on every open context that has not lost its device.
void raiseOnContexts(ibv_event_type type, uint32_t kind);

struct Pd {
  ibv_pd pd;
  std::atomic<int> users{0};  // MRs, QPs, SRQs
  Pd* base = nullptr;         // an imported PD (import.cc): the PD it shows
  std::atomic<int> views{0};  // imported PDs showing this one
};
// The PD a program's ibv_pd stands for: itself, or an imported one's
// original. Objects record and compare these.
inline Pd* toPd(ibv_pd* p) {
  auto* x = reinterpret_cast<Pd*>(p);
  return x->base != nullptr ? x->base : x;
}
// The process's PDs by handle, for ibv_import_pd (import.cc).
void notePd(Pd* p);
void forgetPd(Pd* p);

struct Mr {
  ibv_mr mr;
  std::atomic<Pd*> pd;        // ibv_rereg_mr may move it to another PD (verbs_mr.cc)
  std::atomic<int> access;    // ibv_rereg_mr may change it (verbs_mr.cc)
  std::atomic<int> mws{0};    // memory windows bound to it (mw.cc): no deregistration
  Mr* shown = nullptr;        // an imported MR (import.cc): the MR it shows
  std::atomic<int> views{0};  // imported MRs showing this one
  uint8_t* base() const { return static_cast<uint8_t*>(mr.addr); }
  bool covers(uint64_t addr, uint64_t len) const;
};

// Process-wide key table; lkey == rkey == (index << 8 | generation).
Mr* findMrByKey(uint32_t key);

// The fd is an eventfd in semaphore mode: one count per queued record.
// Like the kernel's event files (and unlike a pipe), destroying the channel
// does not wake a thread blocked reading it.
struct CompChannel {
  ibv_comp_channel ch;
  std::mutex mu;
  std::deque<uint32_t> records;  // CQ handles
  // The CQs using it: ibv_get_cq_event makes their progress. list_mu is held
  // while it does (a try-lock: one thread at a time) and by ibv_destroy_cq.
  std::mutex list_mu;
  std::vector<Cq*> cq_list;
  std::atomic<int> cqs{0};
};
// Adds one record to an eventfd-backed channel.
void signalToken(int fd);
// Takes one token: blocks, or fails with EAGAIN per the fd's O_NONBLOCK.
bool takeToken(int fd);

struct Cq {
  // ibv_cq_ex begins with ibv_cq's fields (ibv_cq_ex_to_cq is a cast): a CQ
  // made by ibv_create_cq_ex is the same object seen through ibv_cq_ex.
  union {
    ibv_cq cq;
    ibv_cq_ex cqx;
  };
  uint32_t id = 0;  // handle carried in completion-channel records
  CompChannel* channel = nullptr;
  // Inline progress (verbs_cq.cc): an epoll instance holding the sockets of
  // the connections whose QPs complete here, so that a thread polling the CQ
  // (or getting its channel's events) receives what is waiting in them
  // itself instead of waiting for the progress thread. -1 in a forked child
  // for a CQ its parent made: those sockets are the parent's.
  int rx_epfd = -1;
  uint64_t fork_gen = 0;  // forkGeneration() when it was created
  std::mutex mu;
  std::vector<ibv_wc> ring;
  size_t head = 0, count = 0;
  bool armed = false, solicited_only = false, overrun = false;
  uint32_t events_reported = 0;  // guarded by cq.mutex (ibv_ack_cq_events uses it)
  std::atomic<int> qps{0};

  // The extended poll API (ibv_start_poll, ibv_next_poll, ibv_end_poll):
  // start_poll takes poll_mu and end_poll releases it (unless the CQ was
  // created single-threaded), so that batches of two pollers never mix.
  // Each completion is taken out of the ring when the iterator reaches it,
  // under mu like ibv_poll_cq; `current` is what the read_* accessors read.
  std::mutex poll_mu;
  bool single_threaded = false;
  ibv_wc current{};
  // Takes the next completion into `current`: 0, ENOENT (none) or
  // EOVERFLOW (the CQ overran).
  int takeCurrent();

  // Adds a completion; raises a channel event if armed and eligible.
  void push(const ibv_wc& wc, bool solicited);
  // Receives what waits in the sockets of this CQ's connections, on the
  // calling thread (no CQ lock held). True if any connection was ready.
  bool progress();
  // Drops every completion of `qp_num` (ibv_destroy_qp, modify to RESET).
  void clean(uint32_t qp_num);
};

struct RecvWqe {
  uint64_t wr_id;
  uint32_t num_sge;
  uint32_t sge_off;  // into the owner's sge storage
};

// A bounded ring of receive work requests (a QP's RQ or an SRQ).
struct RecvQueue {
  uint32_t max_wr = 0, max_sge = 0;
  std::vector<RecvWqe> ring;
  std::vector<ibv_sge> sges;
  size_t head = 0, count = 0;
  void init(uint32_t wr, uint32_t sge);
  int post(ibv_recv_wr* wr, ibv_recv_wr** bad);
  bool pop(RecvWqe& out, const ibv_sge*& sg);
  bool peek(RecvWqe& out, const ibv_sge*& sg) const;  // the next one, left in place
};

struct Srq {
  ibv_srq srq;
  std::mutex mu;
  RecvQueue rq;
  uint32_t limit = 0;
  std::atomic<int> qps{0};
};

struct SendWqe {
  uint64_t wr_id;
  uint32_t psn;
  uint32_t byte_len;
  ibv_wc_opcode opcode;
  bool signaled;
  ibv_wc_status preset;  // a local error found at post time (reported at completion)
  uint32_t num_sge;      // RDMA READ destination
  uint32_t sge_off;
};

// A work request built with the ibv_wr_* API, waiting for ibv_wr_complete.
struct PendingWr {
  ibv_send_wr wr;        // sg_list and num_sge are set when the batch is posted
  uint32_t sge_off = 0;  // into WrBatch::sges
  uint32_t num_sge = 0;
  bool inline_data = false;  // the data is WrBatch::inline_data[inline_off, +inline_len)
  uint32_t inline_off = 0;
  uint32_t inline_len = 0;
};

struct WrBatch {
  std::vector<PendingWr> wrs;
  std::vector<ibv_sge> sges;
  std::vector<uint8_t> inline_data;
  int err = 0;  // the first error a builder or setter found (posting nothing)
  void clear() {
    wrs.clear();
    sges.clear();
    inline_data.clear();
    err = 0;
  }
};

struct Qp {
  // First: ibv_qp* and Qp* convert with reinterpret_cast. ibv_qp_ex begins
  // with an ibv_qp, as libibverbs' verbs_qp does.
  union {
    ibv_qp qp;
    ibv_qp_ex qpx;
  };
  std::weak_ptr<Qp> self;
  bool transport_lost = false;
  std::mutex mu;
  ibv_qp_cap cap{};
  bool sq_sig_all = false;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  Srq* srq = nullptr;
  Pd* pd = nullptr;
  bool destroyed = false;
  // Attributes set through ibv_modify_qp.
  ibv_qp_attr attr{};
  // Send queue: posted, not yet completed, in order.
  std::deque<SendWqe> sq;
  std::vector<ibv_sge> sq_sges;  // READ destinations, ring indexed by slot
  uint32_t sq_slot = 0;
  uint32_t sq_used = 0;          // slots held (unsignaled ones until a later signaled CQE)
  uint32_t unsignaled_done = 0;  // retired unsignaled WRs still holding a slot
  uint32_t next_psn = 0;
  bool sq_halted = false;  // a request failed its local checks: nothing more is sent
  RecvQueue rq;
  std::shared_ptr<Conn> conn;
  std::shared_ptr<UdState> ud;  // a UD QP's socket and groups (ud.h)
  uint64_t rnr_events = 0;
  // Made by ibv_create_qp_ex: ibv_qp_to_qp_ex returns &qpx, whose wr_*
  // functions post through the batch (verbs_qp_ex.cc).
  bool extended = false;
  std::mutex wr_mu;  // held from ibv_wr_start to ibv_wr_complete / ibv_wr_abort
  WrBatch batch;

  ibv_qp_state state() const { return qp.state; }
  void setState(ibv_qp_state s);
  // The following expect mu held.
  void flushAll(ibv_wc_status first_status);  // QP → ERR, every WR completes
  void completeSendsUpTo(uint32_t psn, ibv_wc_status status_at_psn, bool psn_failed);
  void sendCompletion(const SendWqe& w, ibv_wc_status st);
  int modify(ibv_qp_attr* a, int mask);
};
std::shared_ptr<Qp> qpRef(ibv_qp* q);
// How many times this process is a forked child of one that used softrdma
// (0 in the first): objects made under another generation are a parent's.
uint64_t forkGeneration();
// Posts `wr` (the data path of ibv_post_send). `all_or_nothing`: every WR is
// checked before any is posted, and an error posts none (ibv_wr_complete).
int postSend(Qp* qp, ibv_send_wr* wr, ibv_send_wr** bad, bool all_or_nothing);
// The extended ops of a context (verbs_context): verbs_qp_ex.cc, verbs_cq.cc,
// verbs_device.cc.
ibv_qp* createQpExOp(ibv_context* ctx, ibv_qp_init_attr_ex* ax);
ibv_cq_ex* createCqExOp(ibv_context* ctx, ibv_cq_init_attr_ex* a);
int queryDeviceExOp(ibv_context* ctx, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size);
// Sets the ibv_wr_* functions of an extended QP for `send_ops_flags`.
void setWrOps(Qp* qp, uint64_t send_ops_flags);
// A work request of the ibv_wr_* API, added to the QP's batch (verbs_qp_ex.cc).
PendingWr& buildWr(ibv_qp_ex* x, ibv_wr_opcode op);

// Memory windows (mw.cc). The context's alloc_mw, dealloc_mw and bind_mw.
void setMwOps(ibv_context* ctx);
// The memory-window builders of an extended QP (ibv_wr_bind_mw, ...).
void setMwWrOps(Qp* qp, uint64_t send_ops_flags);
// Posts a bind or local invalidation (qp->mu held; `e` filled, its slot
// taken): executed now, completed in order with the requests before it.
void postLocalOp(Qp* qp, const ibv_send_wr& w, SendWqe& e);
// A SEND with invalidate's invalidation at the responder: false if the key
// names no bound type 2 window.
bool remoteInvalidate(uint32_t rkey);
// The responder's check of a remote access of `len` bytes at `addr` through
// `rkey` (an MR's or a memory window's) needing `need` (one access flag),
// with the QP's access flags and PD; `*local` gets the address the bytes are
// at (a zero-based window's offsets are translated).
bool resolveRkey(const Qp& q, uint32_t rkey, uint64_t addr, uint64_t len, int need,
                 uint64_t* local);
std::shared_ptr<Qp> findQpByNum(uint32_t qpn);
// Every QP not destroyed (taken after detachDevice: none is created later
// on a dead context).
std::vector<std::shared_ptr<Qp>> allQps();

inline bool contextDead(ibv_context* c) {
  return c != nullptr && toContext(c)->dead.load();
}

// ------------------------------------------------------------- progress

// Something the progress thread polls. Every endpoint is listed process-wide
// (fork.cc), so that a forked child can close its copies of their sockets.
struct Endpoint {
  Endpoint();
  virtual ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  virtual void onEvents(uint32_t events) = 0;
  int fd = -1;
  std::atomic<bool> dead{false};
};

class Fabric {
 public:
  static Fabric& get();

  void add(const std::shared_ptr<Endpoint>& ep, uint32_t events);
  void modify(Endpoint* ep, uint32_t events);
  void remove(const std::shared_ptr<Endpoint>& ep);
  // Runs `fn` on the progress thread at `when` (or as soon as possible).
  void schedule(Clock::time_point when, std::function<void()> fn);
  void post(std::function<void()> fn) { schedule(Clock::time_point{}, std::move(fn)); }

  // librdmacm's per-device context, opened on first use, and its default
  // PD; nullptr while the device is absent. A context whose device was
  // removed is retired (closed once no id uses it) and a new one opened.
  Context* cmContext();
  Pd* cmPd();
  struct Retired {
    Context* ctx;
    Pd* pd;
  };
  std::vector<Retired> takeRetired();
  void keepRetired(const std::vector<Retired>& r);
  // Every endpoint the progress thread polls.
  std::vector<std::shared_ptr<Endpoint>> endpoints();

  std::mutex cm_mu;  // every rdma_cm state change
  std::condition_variable cm_cv;

  // Tunables from the environment (docs/softrdma.md).
  int timewait_ms = 100;
  int cm_timeout_ms = 3000;

  // fork() (fork.cc). Before: the progress thread stops between two turns
  // and the Fabric's locks are taken. After, in the parent: released, the
  // thread goes on. In the child, which has no progress thread: the
  // inherited Fabric is abandoned without touching the kernel objects it
  // shares with the parent (its epoll instance above all); the next get()
  // builds a new one.
  static void forkPrepare();
  static void forkParent();
  static void forkChild();
  // softrdma_hold_progress: the progress thread stops between two turns
  // (hold) or goes on (release); holds nest, as fork's do.
  void holdProgress(bool hold);

 private:
  Fabric();
  void run();
  void wake();
  void park();  // progress thread: waits while a fork is under way
  bool onProgressThread() const { return std::this_thread::get_id() == thread_id_; }
  Context* cmContextLocked();
  static std::atomic<Fabric*> instance_;
  static std::mutex instance_mu_;  // creating the instance
  int epfd_ = -1;
  int wakefd_ = -1;
  int timerfd_ = -1;  // wakes the progress thread for a timer scheduled elsewhere
  // The latest the progress thread sleeps until (mu_): min while it is
  // awake, max when it waits for events alone.
  Clock::time_point sleeping_until_ = Clock::time_point::min();
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  std::atomic<int> park_requests_{0};
  bool parked_ = false;
  std::mutex mu_;
  std::multimap<Clock::time_point, std::function<void()>> timers_;
  std::vector<std::shared_ptr<Endpoint>> live_, graveyard_;
  std::thread thread_;
  std::thread::id thread_id_;
  Context* cm_ctx_ = nullptr;
  Pd* cm_pd_ = nullptr;
  std::vector<Retired> retired_;
};

// Starts the control channel if SOFTRDMA_CONTROL names a path (control.cc);
// called once, by the Fabric's constructor.
void startControl(Fabric& f);

// ---------------------------------------------------------------- fork
//
// The atfork handlers (Fabric::forkPrepare/Parent/Child, fork.cc) call each
// module's hook with the step: Prepare takes the module's process-wide locks
// (in the lock order, after the Fabric's), Parent releases them, Child
// releases them and forgets what belonged to the parent (QPs, ids,
// connections, contexts), which the child's new objects never meet.
enum class ForkStep { Prepare, Parent, Child };
// What a forked child abandoned of its parent's: never freed (the program
// may still hold pointers into it), and reachable from here, so that leak
// checkers do not report it.
std::vector<const void*>& abandonedInChild();
// Empties `table` in a forked child: its contents move to a heap object kept
// in abandonedInChild().
template <typename T>
void abandon(T& table) {
  abandonedInChild().push_back(new T(std::move(table)));
  table.clear();
}
void forkEndpoints(ForkStep s);  // fabric.cc: closes the child's copies of every socket
void forkDevice(ForkStep s);     // verbs_device.cc
void forkCqs(ForkStep s);        // verbs_cq.cc
void forkQps(ForkStep s);        // verbs_qp.cc
void forkCm(ForkStep s);         // cm.cc (its tables are guarded by the Fabric's cm_mu)
void forkManual(ForkStep s);     // manual_qp.cc
void forkTransport(ForkStep s);  // transport.cc
void forkCounters(ForkStep s);   // counters.cc
// Leaves: the memory windows' lock (mw.cc) and the PD handle table's (import.cc).
void forkWindows(ForkStep s);
void forkImport(ForkStep s);

// ---------------------------------------------------------- transport

enum class ConnRole { Active, Passive };

// One TCP connection: carries the CM handshake of one rdma_cm connection and
// then the RC traffic of the QP bound to it.
struct Conn : Endpoint, std::enable_shared_from_this<Conn> {
  explicit Conn(int sock, ConnRole r);
  ~Conn() override;
  void onEvents(uint32_t events) override;

  ConnRole role;
  std::atomic<bool> connecting{false};  // active side: TCP connect in progress
  bool manual = false;                  // a QP connected without rdma_cm (manual_qp.cc)

  // --- bindings (cm_mu)
  std::weak_ptr<CmId> id;
  std::weak_ptr<CmId> listener_id;  // passive: the listener that accepted it
  uint32_t remote_qpn = 0;
  bool qp_was_bound = false;
  CmMessage deferred_req{};  // passive: a REQ waiting for room in the backlog
  // --- QP binding (qp_mu)
  std::mutex qp_mu;
  std::shared_ptr<Qp> qp;
  void bindQp(const std::shared_ptr<Qp>& q);
  std::shared_ptr<Qp> boundQp();

  // --- transmit (tx_mu); any thread
  std::mutex tx_mu;
  struct Seg {
    const uint8_t* ext;  // nullptr: bytes live in tbuf at `off`
    size_t off, len;
    bool frame_start;
    bool request;
  };
  std::deque<Seg> txq;
  std::vector<uint8_t> tbuf;
  bool tx_closed = false;
  bool want_out = false;
  bool close_after_flush = false;
  // A coalesced ACK (for unsignaled requests): it goes out in front of the
  // next frame this connection sends, or when the ACK timer fires.
  bool ack_owed = false;
  bool ack_timer = false;
  uint32_t owed_psn = 0;
  void oweAck(uint32_t psn);
  void sendOwedAck();
  // Queues header+payload; writes immediately when nothing is queued.
  // One piece of outgoing data; `stable` memory stays valid until the
  // request completes (a non-inline send buffer) and may be referenced
  // instead of copied when the socket is full. No default member
  // initializers: the arrays of these on the send path (hundreds of
  // entries) are left as they are until filled, not zeroed on every call.
  struct TxIov {
    const void* p;
    size_t len;
    bool stable;
    bool header;   // the first piece of a frame
    bool request;  // part of a request (dropped if the QP goes to error)
  };
  // Queues the pieces in order; writes at once when nothing is queued.
  void sendv(const TxIov* iov, int n);
  void sendvLocked(const TxIov* iov, int n);  // tx_mu held
  void sendFrame(FrameType t, uint32_t psn, uint16_t syndrome = 0, const void* payload = nullptr,
                 uint32_t len = 0);
  void flushLocked();
  void compactLocked();
  void shutdownAfterFlush();
  // The QP went to error: frames not yet begun are never sent, and the rest
  // of a partly sent frame is copied (its buffer goes back to the program).
  void abortData();

  // --- receive: whichever thread comes first (the progress thread on an
  // epoll event, a program's thread polling a CQ of the connection's QP):
  // progress() services the connection, or, when another thread is already
  // at it, makes that thread go round once more. The fields below belong to
  // the thread servicing it.
  void progress();
  std::atomic<bool> rx_busy{false};
  std::atomic<bool> rx_want{false};
  // Work for the servicing thread from elsewhere: the RNR timer fired, the
  // peer hung up while the receive side was held, the connection was severed
  // (the reason: a string that lives forever).
  std::atomic<bool> rnr_due{false};
  std::atomic<bool> hup_seen{false};
  std::atomic<const char*> lost_why{nullptr};
  // The rx epolls of the CQs this connection's socket is in (qp_mu), and
  // its key there (connByKey).
  uint64_t rx_key = 0;
  std::vector<int> rx_epfds;
  void watchFrom(const std::shared_ptr<Qp>& q);  // qp_mu held
  std::vector<uint8_t> rbuf;
  size_t rpos = 0, rend = 0;
  bool have_hdr = false;
  bool hdr_handled = false;
  uint32_t rx_psn = 0;  // next request PSN expected from the peer
  FrameHeader hdr{};
  size_t remaining = 0;     // payload bytes still to place
  std::vector<iovec> dest;  // where they go (empty: discard)
  size_t dest_idx = 0;
  enum class Block { None, NotReady, Rnr } block = Block::None;
  int rnr_tries = 0;
  bool rnr_timer = false;
  bool discard_requests = false;  // after a NAK, until the requester stops
  uint32_t acked_psn = 0;
  bool ack_pending = false;
  bool ack_now = false;  // a request of this pass asked for an immediate ACK
  // Receive completions of this pass: made visible only after their ACK is
  // queued, as an HCA acknowledges before the CQE can be polled.
  std::vector<std::pair<ibv_wc, bool>> pending_cqes;
  std::atomic<bool> eof{false};
  // Frame currently being received and what to do when its payload is in.
  struct Pending {
    enum Kind {
      None,
      Recv,
      Write,
      ReadReq,
      ReadResp,
      Atomic,
      Control,
      Cm,
      Discard,
      Nak
    } kind = None;
    Syndrome syndrome = Syndrome::None;
    RecvWqe wqe{};
    ibv_wc_status status = IBV_WC_SUCCESS;
    uint32_t byte_len = 0;
    std::vector<uint8_t> cm;  // CM payload
    AtomicArgs atomic{};      // an atomic request's operands
  } cur;

  void service();  // the receive side is this thread's (progress)
  // What other threads handed over (lost_why, hup_seen, rnr_due), done;
  // false when the receive loop must not run.
  bool takeHandedWork();
  void kick();  // service again on the progress thread
  void fail(const char* why);
  bool readMore();
  void place(const uint8_t* p, size_t n);
  bool handleHeader(const std::shared_ptr<Qp>& q);
  bool handleRequest(Qp& q);
  bool remoteAccess(Qp& q, FrameType t);  // WRITE, WRITE with immediate, READ
  void waitForReceive(Qp& q);             // RNR: none posted; retried on a timer
  void targetReceive(Qp& q, const RecvWqe& wqe, const ibv_sge* sg);
  bool handleResponse(Qp& q);
  // Atomics (atomics.cc): the responder's checks, its execution and
  // response; the requester's placing of the original value.
  bool atomicRequest(Qp& q);
  void executeAtomic(Qp& q);
  bool atomicResponse(Qp& q);
  void finishFrame(const std::shared_ptr<Qp>& q);
  void finishRequest(Qp& q);
  void onRnrTimer();  // service(): rnr_due was set
  void flushAcks(const std::shared_ptr<Qp>& q);
  void flushAcksLocked(Qp* q);  // q->mu held
  void onPeerGone(const char* why, bool garbage = false);
  // The local device or port went away: the TCP connection is shut down
  // (the peer sees a dead peer) and this side reports the loss the same way
  // (progress thread).
  void sever(const char* why);
};
// The connection registered in rx epolls under `key`, or null.
std::shared_ptr<Conn> connByKey(uint64_t key);

// Atomics on the requester's side (atomics.cc): whether an atomic work
// request may be posted (`wr_api`: built with ibv_wr_*, which checks
// less), and its frame (header and operands) for the connection.
bool atomicWrValid(const ibv_send_wr& w, uint64_t len, bool wr_api);
int addAtomicFrame(FrameHeader& h, AtomicArgs& args, Conn::TxIov* iov, int niov, const Qp& qp,
                   const ibv_send_wr& w, const SendWqe& e);

// -------------------------------------------------------------- rdma_cm

struct CmEvent;
struct CmChannel {
  rdma_event_channel ch;       // fd: an eventfd in semaphore mode, one count per event
  bool sync = false;           // private channel of a synchronous id
  std::deque<CmEvent*> queue;  // one eventfd count per entry (cm_mu)
  // softrdma_hold_cm_events: counts not yet written to the fd (cm_mu).
  bool held = false;
  uint64_t held_tokens = 0;
};
// One more event on `ch` (cm_mu held): a count on its fd, unless held.
void signalChannel(CmChannel* ch);

enum class CmState {
  Idle,
  AddrBound,
  AddrQuery,
  AddrResolved,
  RouteQuery,
  RouteResolved,
  Listen,
  Connect,   // active: REQ queued/sent
  ReqRcvd,   // passive: CONNECT_REQUEST delivered or queued
  Accepted,  // passive: REP sent, waiting for RTU
  RepRcvd,   // active: REP received, ESTABLISHED/CONNECT_RESPONSE pending
  Established,
  DisconnectSent,  // DREQ sent, waiting for DREP
  DreqRcvd,        // DREQ received, application not yet disconnected
  Disconnected,
  DeviceRemoval,  // DEVICE_REMOVAL reported: no further events, calls fail
  Destroying,
};
const char* toString(CmState s);

struct CmEvent {
  rdma_cm_event ev{};
  uint8_t pdata[kAcceptPrivateData]{};
  std::shared_ptr<CmId> owner;    // whose events_reported/acked counts it
  std::shared_ptr<CmId> subject;  // ev.id (a new id for CONNECT_REQUEST)
  bool dead = false;
  bool rep = false;  // active REP: the QP transitions happen when it is gotten
};

struct CmId {
  rdma_cm_id id{};  // first: rdma_cm_id* and CmId* convert with reinterpret_cast
  std::weak_ptr<CmId> self;
  CmChannel* channel = nullptr;
  CmState state = CmState::Idle;
  bool sync = false;
  std::shared_ptr<Conn> conn;
  // Listener
  std::shared_ptr<Endpoint> listener;
  int backlog = 0;
  int queued_requests = 0;
  std::vector<std::weak_ptr<Conn>> deferred;  // REQs over the backlog
  CmId* listen_parent = nullptr;              // passive ids: their listener
  // Connection parameters
  uint8_t remote_rnr_retry = 7, remote_retry = 7;
  uint8_t responder_resources = 1, initiator_depth = 1;
  uint8_t ack_timeout = 14;  // RDMA_OPTION_ID_ACK_TIMEOUT; the kernel CM's default
  // rdma_set_option (cm_sync.cc). TOS: the connection's IP TOS / traffic
  // class and the path's traffic class. REUSEADDR and AFONLY: the port rules
  // among this process's ids (checkPort, cm_api.cc) and IPV6_V6ONLY.
  bool tos_set = false;
  uint8_t tos = 0;
  bool reuseaddr = false;
  int afonly = -1;          // -1: not set; at bind, 1 for IPv4, bindv6only for IPv6
  uint16_t bound_port = 0;  // host order; the port this id holds (0: none)
  uint32_t remote_qpn = 0;
  bool qp_created_by_cm = false;
  bool cm_created_cqs = false;
  // rdma_create_ep passive ids keep the QP attributes for rdma_get_request.
  std::unique_ptr<ibv_qp_init_attr> ep_qp_attr;
  ibv_pd* ep_pd = nullptr;
  // Event accounting (cm_mu)
  uint32_t events_reported = 0, events_acked = 0;
  std::vector<CmEvent*> queued;  // not yet gotten
  uint64_t timer_gen = 0;
  bool destroyed = false;
  ibv_sa_path_rec path{};
  bool owns_channel = false;  // a synchronous id's private channel
  bool peer_gone = false;
  // Multicast groups joined through this id (cm_ud.cc).
  struct Join {
    sockaddr_storage addr;
    ibv_gid mgid;
    bool send_only;
  };
  std::vector<Join> joins;
};
CmId* toCmId(rdma_cm_id* id);

// Queue an event for `subject` (cm_mu held). `owner` defaults to subject.
void queueEvent(const std::shared_ptr<CmId>& subject, rdma_cm_event_type type, int status,
                const void* pdata = nullptr, size_t pdata_len = 0, size_t pdata_size = 0,
                const std::shared_ptr<CmId>& owner = nullptr, bool rep = false);
void setCmState(CmId* id, CmState s);
// Called by a connection's receive path (progress thread) for CM frames.
void onCmFrame(const std::shared_ptr<Conn>& c, FrameType t, const CmMessage& m);
void onConnLost(const std::shared_ptr<Conn>& c, const char* why);
void onConnConnected(const std::shared_ptr<Conn>& c, int err);
void onAcceptedConn(CmId* listener, const std::shared_ptr<Conn>& c);
int cmModifyQp(CmId* id, ibv_qp_state to);
// The device was removed: DEVICE_REMOVAL for every id bound to it (takes cm_mu).
void removeCmDevice();

// QPs connected without rdma_cm, by ibv_modify_qp with the peer's GID and
// QP number (manual_qp.cc).
void manualConnect(const std::shared_ptr<Qp>& qp);
void manualAttach(const std::shared_ptr<Conn>& c, const CmMessage& m);
void manualForget(uint32_t qpn);
// The QP was moved to RESET: a connection made without rdma_cm is dropped,
// and a new one is made when the QP reaches RTR again (a QP reset and
// brought back to RTS works again, as on rxe).
void manualReset(const std::shared_ptr<Qp>& qp);
std::vector<in6_addr> gidTable();

}  // namespace softrdma
