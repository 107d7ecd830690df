// The send side of one connection's QP: the batches it fills in send
// buffers from the device's pool (rdma/shared_pools.h), within the credits
// of the ledger (credit_ledger.h) and the buffers it may hold
// (send_batches.h), and the sends it posts and sees complete.
//
// A batch opens on a buffer taken from the pool (a connection that finds
// the pool empty is woken when buffers come back), is filled through
// batch(), sealed with the credits it returns and releases, and posted
// with the other sealed ones in one ibv_post_send list, only the last of
// which is solicited. A signaled completion gives back its buffer and
// every one posted before it; after the QP went to error, the teardown
// beacon's completion gives back every posted one. With session keys
// (batch_auth.h), sealing writes each batch's trailer after its bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/external_payload.h"
#include "daemon/loop/service_queue.h"
#include "daemon/peer/batch_auth.h"
#include "daemon/peer/credit_ledger.h"
#include "daemon/peer/protocol.h"
#include "daemon/peer/send_batches.h"
#include "daemon/rdma/shared_pools.h"

namespace rdmamsg::peer {

class Sender {
 public:
  // wr_id tag of its send work requests (| buffer index).
  static constexpr uint64_t kTag = 1ULL << 32;

  struct Counters {
    uint64_t sendsPosted = 0;  // RDMA send work requests
    uint64_t bytesPosted = 0;  // what they carried
    uint64_t sendsSignaled = 0;
    uint64_t postSendCalls = 0;
    uint64_t creditStalls = 0;   // times data waited for credits
    uint64_t sendPoolWaits = 0;  // times a batch waited for the device's send pool
  };

  Sender(CreditLedger& ledger, loop::ServiceQueue::Waker wake)
      : ledger_(ledger), wake_(std::move(wake)) {}

  // The keys that seal its batches once active (nullptr: none).
  void authenticate(BatchAuth* auth) { auth_ = auth; }
  // The QP exists: the device's pool, and the sends it may have posted.
  void attach(rdma::SendPool& pool, uint32_t cap);
  // The handshake is done: how much a batch may hold (the smaller of the
  // two ends' buffers).
  void setBatchCapacity(size_t bytes) { batchCapacity_ = bytes; }

  // Opens a batch if none is open; false when no buffer or credit is
  // available (or the open batch took the last credit and this record is
  // for messages).
  bool open(bool forMessages);
  BatchWriter& batch() { return writer_; }
  bool hasOpen() const { return batches_.hasOpen(); }
  bool hasSealed() const { return !batches_.sealed().empty(); }
  // Seals the open batch (with session keys, its trailer); io_error naming
  // the libcrypto call when sealing failed: then nothing sealed may be
  // posted, and the connection fails.
  Status seal();
  // Seals the open batch with no credits and no trailer (the handshake's
  // authentication batch).
  void sealBare();
  // Seals the open batch, whose last record is a message head
  // (BatchWriter::addMessageHead), with its payload: `bytes` of `payload`
  // posted from where they lie (lkey: their memory's on this device). The
  // send holds the payload until its completion, or until giveBack().
  Status sealInPlace(const PayloadHandle& payload, std::span<const std::byte> bytes, uint32_t lkey);
  // Posts every sealed batch in one list; an io_error naming the call when
  // ibv_post_send refused it.
  Status post(ibv_qp* qp);

  // A send completion for buffer `index`; io_error when it was not posted
  // (the device reported a send this side never made).
  Status onCompleted(uint32_t index);
  // The teardown beacon came back: every posted send is done.
  void onBeacon();
  // Sends posted and not yet known complete.
  uint32_t outstanding() const { return outstanding_; }
  void forgetOutstanding() { outstanding_ = 0; }
  // The connection is gone: every buffer back to the pool. detach(): the
  // pool is gone with its device.
  void giveBack();
  void detach();

  const Counters& counters() const { return counters_; }

 private:
  CreditLedger& ledger_;
  BatchAuth* auth_ = nullptr;
  loop::ServiceQueue::Waker wake_;
  rdma::SendPool* pool_ = nullptr;
  SendBatches batches_;
  BatchWriter writer_;
  size_t batchCapacity_ = 0;
  uint32_t outstanding_ = 0;
  // The batches whose payload is posted in place, by buffer index.
  struct InPlace {
    PayloadHandle payload;
    ibv_sge sge;
  };
  std::unordered_map<uint32_t, InPlace> inPlace_;
  void give(uint32_t index);  // a buffer back to the pool, and what its send held
  std::vector<ibv_send_wr> wrs_;
  std::vector<ibv_sge> sges_;
  Counters counters_;
};

}  // namespace rdmamsg::peer
