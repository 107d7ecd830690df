// softrdma's rsockets: the rsocket API of librdmacm (<rdma/rsocket.h>, rsocket(7)) on a kernel
// TCP socket per rsocket, so that librdmacm's own rsocket code, which reads librdmacm's private
// rdma_cm_id layout, never runs against softrdma's objects.
//
// An rsocket is the descriptor of its TCP socket (rsocket() returns it; the program only hands
// it back to r* calls). rdma_cm port P on address A is TCP port P on A, as for softrdma's
// rdma_cm ids: rsockets share rdma_cm's port space (RDMA_PS_TCP), as on hardware.
//
// The byte stream carries frames (RsFrame): the connection starts with a Hello each way (the
// client's first, then the listener's answer, sent by the progress thread as librdmacm's listen
// service accepts in the background), then Data, IoMap (a riomap the peer may write to) and
// IoWrite frames in order. The progress thread - the NIC - reads every connected rsocket's socket:
// it places IoWrite payloads into the mapped memory at once, without the program calling
// anything (riostream spins on a byte of its mapped buffer), and queues data in a receive buffer
// of SO_RCVBUF bytes; when that is full it stops reading (TCP flow control does the rest) until
// the program takes data. Writes go out from the calling thread; what the socket does not take
// of a frame is kept and flushed by whichever thread gets to it first (the progress thread on
// EPOLLOUT).
//
// Readiness: `evfd`, an eventfd, is readable exactly while the rsocket has something for POLLIN
// (data, end of stream, an error, a connection to accept) or a finished connect not yet seen.
// rpoll polls it, and the TCP socket for POLLOUT; blocking calls poll it too (poll is a
// cancellation point).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "base.h"
#include "fabric.h"

namespace softrdma::rs {

enum class RsType : uint8_t { Hello = 1, Data = 2, IoMap = 3, IoWrite = 4 };

struct RsFrame {
  uint32_t len;  // payload bytes after the header
  RsType type;
  uint8_t pad[3];
  uint64_t offset;  // IoWrite: where in the peer's mappings
};
static_assert(sizeof(RsFrame) == 16);

constexpr uint32_t kHelloMagic = 0x6b6f7352;  // "Rsok"
constexpr uint16_t kVersion = 1;
struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t iomap_size;  // how many of the receiver's mappings the sender can hold (RDMA_IOMAPSIZE)
  uint32_t reserved[2];
};

struct IoMapMsg {
  uint32_t slot;
  uint32_t pad;
  uint64_t offset;
  uint64_t len;
};

constexpr size_t kMaxTransfer = 65536;  // bytes of payload per frame
constexpr size_t kStage = 2 * kMaxTransfer;

enum class State { Init, Bound, Listening, Connecting, Accepting, Connected, Failed };

struct LocalMap {
  uint8_t* addr;
  size_t len;
  uint64_t offset;
  int slot;  // -1: PROT_NONE (local only)
};
struct RemoteMap {
  bool valid = false;
  uint64_t offset = 0, len = 0;
};

// Options (rsetsockopt); a listener's are inherited by the rsockets it accepts.
struct Options {
  int sqsize = 384, rqsize = 384, inline_size = 64;  // librdmacm's defaults
  int iomap_size = 0;
  int rcvbuf = 1 << 17;  // receive buffer (librdmacm's default; SO_RCVBUF sets twice the value)
  int sndbuf = 1 << 17;
  bool nodelay = false;        // what TCP_NODELAY reports (the TCP socket always has it)
  std::vector<uint8_t> route;  // RDMA_ROUTE
};

struct RSocket : Endpoint, std::enable_shared_from_this<RSocket> {
  RSocket(int sock, int family);
  ~RSocket() override;
  void onEvents(uint32_t events) override;

  const int family;
  int evfd = -1;

  std::mutex mu;  // everything below
  State state = State::Init;
  int fd_flags = 0;  // rfcntl: O_NONBLOCK
  Options opts;
  int so_error = 0;         // SO_ERROR
  int err = 0;              // the connection broke (ECONNRESET, ...): reads and writes fail with it
  bool conn_event = false;  // a connect finished (or failed) and nobody looked yet
  bool level = false;       // evfd is readable
  bool tcp_up = false;      // the TCP connection is established
  bool watched = false;     // registered with the progress thread
  bool passive = false;     // made by a listener
  bool enqueue = false;     // passive: handshake done, to be queued for raccept
  // Listener
  std::deque<std::shared_ptr<RSocket>> accept_queue;
  std::weak_ptr<RSocket> listener;  // a passive rsocket until it is queued
  // The receive side: the progress thread parses the socket's bytes into frames and queues data
  // for the program, which takes it from the ring.
  struct Receive {
    std::vector<uint8_t> stage;  // raw bytes read, not yet parsed
    size_t st_begin = 0, st_end = 0;
    RsFrame cur{};  // the frame being parsed
    bool have_hdr = false;
    size_t cur_left = 0;
    std::vector<uint8_t> ctrl;  // Hello / IoMap payload being collected
    std::vector<uint8_t> ring;  // data for the program (SO_RCVBUF bytes)
    size_t r_head = 0, r_len = 0;
    bool paused = false;   // the ring is full: the socket is not read
    bool rd_eof = false;   // the peer shut down its sending side (FIN)
    bool rd_shut = false;  // rshutdown(SHUT_RD)
  } rx;
  // The send side: frames the socket has not taken yet, and how the sending side ends.
  struct Send {
    std::vector<uint8_t> txq;  // bytes of frames the socket has not taken yet
    size_t off = 0;
    bool wr_shut = false;  // rshutdown(SHUT_WR): FIN once txq is empty
    bool fin_sent = false;
    bool closing = false;  // rclose()d: the socket goes once txq is flushed
  } tx;
  // riomap: this side's mappings the peer may write to, and the peer's.
  struct IoMaps {
    std::vector<LocalMap> local_maps;
    std::vector<RemoteMap> remote_maps;  // the peer's, by slot (size: our RDMA_IOMAPSIZE)
    int peer_iomap_size = 0;             // slots we may announce to the peer
  } iomap;

  // --- all with mu held
  void updateLevel();
  bool readable() const;
  void pumpRx();
  bool parse();
  void onEof();
  void acceptAll();
  void finishClose();
  void flushTx();
  bool txBusy() const { return tx.off < tx.txq.size(); }
  // Queues one frame (header + payload); writes what the socket takes now.
  void queueFrame(RsType t, uint64_t offset, const void* payload, size_t len);
  void fail(int e);  // the connection broke
  void startConnected();
  size_t takeData(uint8_t* dst, size_t len, bool peek);
};

// The rsocket table: rsocket descriptors to their objects.
std::shared_ptr<RSocket> find(int fd);
void insert(const std::shared_ptr<RSocket>& r);
std::shared_ptr<RSocket> erase(int fd);

// Waits (without mu) until `fd` reports one of `events` or `ms` passes (-1: forever).
void waitFd(int fd, short events, int ms);
// Registers a connecting or connected rsocket with the progress thread.
void watch(const std::shared_ptr<RSocket>& r);
// Fails a connect or handshake still under way after SOFTRDMA_CM_TIMEOUT_MS (ETIMEDOUT).
void armTimeout(const std::shared_ptr<RSocket>& r);
void handOver(const std::shared_ptr<RSocket>& c, const std::shared_ptr<RSocket>& listener);
// rclose: the socket goes once what was sent is flushed; queued connections are closed.
void closeSocket(const std::shared_ptr<RSocket>& r);

}  // namespace softrdma::rs
