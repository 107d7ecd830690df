// ShmChannel: a local client's shared-memory data path to rdmamsgd — one
// region holding two rings (client → daemon and daemon → client) and two
// doorbells — carrying the local protocol's frame stream in place of the
// Unix socket, which stays open for control (its end is the client's end)
// and as the fallback.
//
// The client creates the channel (ShmChannel::create: a sealed memfd with
// both rings formatted, two eventfds) and passes its three fds with the
// SHM_OFFER frame (docs/protocol.md); the daemon attaches to them
// (ShmChannel::attach), checking every size, seal and header, and answers
// SHM_ACCEPT. From then on each side writes its frames into its outgoing
// ring and reads the other's from its incoming ring.
//
//   region: [ ring client → daemon ][ ring daemon → client ]
//           [ payload area ][ delivery area ]
//   fds:    region memfd, the daemon's doorbell, the client's doorbell
//
// The two areas (optional, shm_payload_area.h) hold large frames as blocks
// that are given back in any order, each named by a payload record in a
// ring. The payload area (ring version 3) holds large SEND frames the
// client places and the daemon posts from in place; the delivery area
// (version 4) holds large DELIVER frames the daemon places and the client
// reads in place. Each ring's header names the capacity of the area its
// payload records point into. A block held pins only itself: the ring
// record naming it is released at once.
//
// Each side waits on its own doorbell (wakeFd()) and rings the other's only
// when the ring says the other sleeps (the wake-up rule, shm_ring.h): a
// busy pair makes no system call per frame. A side about to sleep calls
// prepareToSleep() — also to be woken when it waits for room in its
// outgoing ring — and after waking, disarm().
//
// The frame stream is cut into records as a socket cuts it into reads: a
// record holds part of a frame, one frame or several. read() copies records
// into the reader's own memory before anything parses them, so a value the
// other side changes after it was written is never read twice: the reader
// parses its private copy exactly as it parses a socket's bytes.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/byte_buffer.h"
#include "common/shm_doorbell.h"
#include "common/shm_payload_area.h"
#include "common/shm_region.h"
#include "common/shm_ring.h"
#include "common/state_machine.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace rdmamsg {

namespace shm_channel {
// Ring capacities a daemon accepts (bytes, powers of two).
inline constexpr size_t kMinCapacity = size_t{64} << 10;
inline constexpr size_t kMaxCapacity = size_t{64} << 20;
// The fds passed with SHM_OFFER, in this order.
inline constexpr size_t kFdCount = 3;
// Whether `capacity` is one a daemon accepts.
bool validCapacity(uint64_t capacity);
// A SEND whose payload has at least this many bytes goes as a frame record
// (ring version 2), which the daemon posts from in place; smaller ones are
// cheaper copied, in the frame stream.
inline constexpr size_t kMinFrameRecordPayload = size_t{16} << 10;
}  // namespace shm_channel

// What a channel did (for status, metrics and benchmarks).
struct ShmChannelCounters {
  uint64_t recordsWritten = 0;
  uint64_t recordsRead = 0;
  uint64_t bytesWritten = 0;
  uint64_t bytesRead = 0;
  uint64_t wakesSent = 0;      // the other side's doorbell rung (one write(2) each)
  uint64_t doorbellReads = 0;  // own doorbell read (one read(2) each)
  uint64_t sleeps = 0;         // prepareToSleep() that said: sleep
};

// What a side of a channel asked to be woken for (armInput(), armRoom()),
// until disarm(): nothing (awake), records arriving, room appearing in its
// outgoing ring, or both. A side arms for one thing more or disarms; it
// never swaps input for room (or room for input) in one move.
enum class ShmArming : uint8_t { kAwake, kInput, kRoom, kInputAndRoom };
const char* toString(ShmArming a);
bool allowedEdge(ShmArming from, ShmArming to);

class ShmChannel {
 public:
  enum class Side : uint8_t { client, daemon };

  ShmChannel(ShmChannel&&) noexcept = default;
  ShmChannel& operator=(ShmChannel&&) noexcept = default;

  // The client's side: a new region with both rings, the payload area and
  // the delivery area (none when a capacity is 0) and both doorbells.
  [[nodiscard]] static Result<ShmChannel> create(size_t toDaemonCapacity, size_t toClientCapacity,
                                                 size_t payloadCapacity = 0,
                                                 size_t deliveryCapacity = 0);
  // The daemon's side, from the fds of a client's SHM_OFFER (in
  // fdsToPass() order) and the capacities it named; the areas are those the
  // rings' headers name (version 4; a version 3 region's payload area is
  // what the memfd holds past both rings). Anything that does not match —
  // a capacity out of range, an unsealed memfd or one of another size, a
  // ring header that is not what was offered, an fd that is not an
  // eventfd — is a protocol_error naming it; the fds are closed.
  [[nodiscard]] static Result<ShmChannel> attach(std::array<UniqueFd, shm_channel::kFdCount> fds,
                                                 uint64_t toDaemonCapacity,
                                                 uint64_t toClientCapacity);

  // The client's fds for SHM_OFFER: region, daemon doorbell, client doorbell.
  std::array<int, shm_channel::kFdCount> fdsToPass() const;
  uint64_t toDaemonCapacity() const { return toDaemonCapacity_; }
  uint64_t toClientCapacity() const { return toClientCapacity_; }
  uint64_t payloadCapacity() const { return payloadCapacity_; }
  uint64_t deliveryCapacity() const { return deliveryCapacity_; }

  // Copies as much of `bytes` as the outgoing ring has room for, in records;
  // returns how many bytes it took (0 when the ring is full: retry once the
  // other side released, prepareToSleep(true) first to be woken for it).
  // Rings the other side once if it sleeps.
  [[nodiscard]] Result<size_t> write(std::span<const std::byte> bytes);
  // Appends whole records from the incoming ring to `in` until the ring is
  // empty, more than `budget` bytes were read, or the next record is a
  // frame record (frameWaiting()); returns the bytes read. Rings the other
  // side once if it waits for room.
  [[nodiscard]] Result<size_t> read(ByteBuffer& in, size_t budget);

  // Frame records (ring version 2): a record holding exactly one whole
  // frame, which the reader keeps in place — a large SEND's payload goes
  // from there to the wire, not through the reader's memory. The writer
  // writes one with reserveFrameRecord() and commitRecord() when
  // frameRecords() (the reader's version has them). The reader finds one
  // when read() stopped before it: frameRecord() shows it (a view into
  // shared memory: the other side can change it at any time), holdFrame()
  // reads past it and keeps it until releaseHeld() with what it returned.
  //
  // A payload record (ring version 3; version 4 from the daemon too) is
  // read the same way: frameRecord() shows the block it names, in the area
  // the other side places blocks in (checked first: a protocol_error when
  // it is not a block of the area, or its slot is held), and holdFrame()
  // keeps that block while the ring's record is released at once — a held
  // block pins only itself.
  bool frameRecords() const { return out_.version() >= 2; }
  [[nodiscard]] Result<std::span<std::byte>> reserveFrameRecord(
      size_t n, uint32_t type = shm_ring::kFrameRecord);
  bool frameWaiting() const { return in_.peekedFrame() || in_.peekedPayload(); }
  // Whether the frame waiting lies in the payload area.
  bool frameInPayloadArea() const { return in_.peekedPayload(); }
  [[nodiscard]] Result<std::span<const std::byte>> frameRecord();
  // What holdFrame() keeps: a ring record (its position) or a block (its slot).
  struct FrameHold {
    static constexpr uint32_t kNoSlot = UINT32_MAX;
    uint64_t position = 0;
    uint32_t slot = kNoSlot;
    bool inPayloadArea() const { return slot != kNoSlot; }
  };
  [[nodiscard]] Result<FrameHold> holdFrame();
  // Releases the frame record frameRecord() shows (its bytes were copied).
  [[nodiscard]] Status consumeFrame();
  // Gives a held record's room back (rings the other side if it waits for
  // room); nothing when the channel failed meanwhile.
  [[nodiscard]] Status releaseHeld(const FrameHold& hold);
  size_t framesHeld() const { return in_.held(); }
  size_t blocksHeld() const {
    return static_cast<size_t>(std::count(slotHeld_.begin(), slotHeld_.end(), true));
  }
  // Bytes of the incoming ring read and not given back (held records and
  // the records read after the oldest of them).
  uint64_t heldBytes() const { return in_.heldSpan(); }
  // The incoming ring's data area, where held frames lie.
  std::span<const std::byte> inputArea() const { return in_.area(); }
  // The payload area's data (empty when the channel has none).
  std::span<const std::byte> payloadArea() const { return payloadData_; }

  // The area this side places blocks in (the client: the payload area, for
  // SEND frames; the daemon: the delivery area, for DELIVER frames): a
  // block to write one frame into (nullopt: no area, no room or no slot
  // now), then publishBlock() and its payload record, whose body is
  // describe(block): reserveFrameRecord(sizeof(Descriptor), kPayloadRecord)
  // and commitRecord(). freeBlock() gives back a block whose record was
  // never written.
  bool placesBlocks() const { return allocator_.capacity() != 0; }
  std::optional<shm_payload::PayloadAllocator::Block> allocateBlock(size_t n) {
    return allocator_.allocate(n);
  }
  void publishBlock(const shm_payload::PayloadAllocator::Block& b) { allocator_.publish(b); }
  void freeBlock(const shm_payload::PayloadAllocator::Block& b) { allocator_.free(b); }
  size_t blocksPlaced() const { return allocator_.inUse(); }
  static shm_payload::Descriptor describe(const shm_payload::PayloadAllocator::Block& b);

  // One record written in place: room for `n` bytes in the outgoing ring
  // (would_block when there is none now, too_large beyond maxRecord()),
  // filled by the caller, then published by commitRecord(). The other side
  // is rung, if it sleeps, by the next write() or announce() — once per
  // batch of records, not per record.
  [[nodiscard]] Result<std::span<std::byte>> reserveRecord(size_t n);
  [[nodiscard]] Status commitRecord();
  [[nodiscard]] Status announce();
  size_t maxRecord() const { return out_.maxPayload(); }

  // Nothing left to read (and, with `waitingForRoom`, no room to write):
  // true when this side may sleep on wakeFd() — the other side will ring —
  // false when something arrived or room appeared meanwhile (go on).
  [[nodiscard]] bool prepareToSleep(bool waitingForRoom);
  // The halves of prepareToSleep(), for a side that waits for input and for
  // room at different times: be woken when records arrive / room appears.
  [[nodiscard]] bool armInput();
  [[nodiscard]] bool armRoom();
  // Before working again (after a wake-up, or when it did not sleep):
  // takes back what this side armed, and resets the doorbell only when it
  // is owed a ring — the other side took an armed word to ring it, or
  // wakeSelf() rang — until every ring owed was read (a ring may come just
  // after the word was taken). No system call when nobody rang. Returns
  // whether it was rung.
  [[nodiscard]] Result<bool> disarm();
  bool armed() const { return !arming_.is(ShmArming::kAwake); }
  ShmArming arming() const { return arming_.get(); }
  // For a side that polls instead of sleeping (an idle strategy that
  // spins): whether records may be waiting, and whether room appeared since
  // write() last found the ring full. Loads of the other side's index, no
  // system call; read() and write() check what they find.
  bool inputWaiting() const { return in_.hasNews(); }
  bool roomReleased() const { return out_.roomReleased(); }
  // Resets the doorbell whatever is owed (one read(2)): for a side that was
  // woken and found nothing to do, so that a stray ring cannot keep
  // wakeFd() readable.
  [[nodiscard]] Status resetDoorbell();
  int wakeFd() const { return own_.fd(); }
  // Makes wakeFd() readable now: for a side that stops working before it
  // could arm (prepareToSleep() kept finding work) and must not sleep.
  [[nodiscard]] Status wakeSelf();

  // ok, or the protocol_error that broke a ring (the channel is then dead).
  Status status() const;
  const ShmChannelCounters& counters() const { return counters_; }

 private:
  struct Geometry {
    uint64_t toDaemon = 0, toClient = 0, payload = 0, delivery = 0;
  };
  struct Area {
    std::span<std::byte> header, data;
  };
  ShmChannel(Side side, ShmRegion region, ShmRingProducer out, ShmRingConsumer in, ShmDoorbell own,
             ShmDoorbell peer, const Geometry& g);
  Area areaAt(size_t at, uint64_t capacity) const;
  [[nodiscard]] Status releaseBlock(uint32_t slot);
  [[nodiscard]] Status wakePeer();
  void countFrameRead(size_t bytes);  // a frame record taken (held or consumed)

  ShmRegion region_;
  ShmRingProducer out_;
  ShmRingConsumer in_;
  ShmDoorbell own_;   // this side sleeps on it
  ShmDoorbell peer_;  // the other side sleeps on it
  uint64_t toDaemonCapacity_ = 0;
  uint64_t toClientCapacity_ = 0;
  uint64_t payloadCapacity_ = 0;
  uint64_t deliveryCapacity_ = 0;
  std::span<std::byte> payloadData_;
  Area inArea_;                                       // where the other side places blocks
  shm_payload::PayloadAllocator allocator_;           // this side's blocks, in the other area
  std::vector<bool> slotHeld_;                        // blocks of inArea_ this side holds
  std::optional<shm_payload::Descriptor> described_;  // of the payload record peeked
  ShmChannelCounters counters_;
  // The one place the arming changes is setArming() (edges checked, moves
  // not reported: it moves at every wake-up).
  StateMachine<ShmArming> arming_{ShmArming::kAwake};
  void setArming(ShmArming a) { arming_.set(a, {}); }
  size_t reserved_ = 0;       // bytes of the record reserveRecord() gave
  bool unannounced_ = false;  // records committed since the other side was last told
  uint64_t owedRings_ = 0;    // rings taken (a word, wakeSelf) not yet read from the doorbell
};

}  // namespace rdmamsg
