// Where one connection's receive buffers come from, behind one interface so
// that the transport (connection.h) does not ask which:
//
// - SharedReceives (receive_queue: shared): the device's shared receive
//   queue (rdma/shared_pools.h). Opening reserves the initial grant; the
//   QP takes its receives from the SRQ; read buffers go back to it, and a
//   QP in error takes none after IBV_EVENT_QP_LAST_WQE_REACHED. It lends
//   busy peers more buffers (the ledger's Lender).
// - OwnReceives (receive_queue: per_peer): a receive set of buffer_count
//   buffers taken from the device and posted on the connection's own QP;
//   its work requests flush back when the QP goes to error. The set goes
//   back to the device for the next connection.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/peer/credit_ledger.h"
#include "daemon/rdma/device.h"

namespace rdmamsg::peer {

class ReceiveSupply {
 public:
  virtual ~ReceiveSupply() = default;
  // The device's shared receive queue if it has one, else a receive set of
  // `maxCredits` buffers; busy when the budget cannot hold them, io_error
  // when the registration failed.
  static Result<std::unique_ptr<ReceiveSupply>> open(rdma::Device& device, uint32_t maxCredits);

  // The QP's receive side, for rdma_create_qp.
  virtual void describe(ibv_qp_init_attr& attr) const = 0;
  // What the QP was granted: the buffers the peer may fill at once (its
  // initial grant), and those to post before connecting (their indexes).
  virtual uint32_t start(const ibv_qp_cap& granted, std::vector<uint32_t>& toPost) = 0;
  // The most the peer may ever fill, for its Hello.
  virtual uint32_t most() const = 0;
  virtual bool shared() const = 0;
  virtual Lender* lender() = 0;  // nullptr: it lends nothing

  virtual std::byte* at(uint32_t index) const = 0;
  // Posts the read buffers `indexes` again (io_error: the post failed).
  virtual Status post(ibv_qp* qp, std::span<const uint32_t> indexes) = 0;
  // The wr_id tag of its receive work requests, and whether an index is one
  // of its buffers.
  virtual uint64_t tag() const = 0;
  virtual bool owns(uint32_t index) const = 0;
  // One of its receive work requests completed (or flushed).
  virtual void completed() = 0;
  // A buffer nobody reads (it arrived as the connection closed, or was
  // refused): back to where it came from.
  virtual void discard(uint32_t index) = 0;

  // Teardown: every receive of the QP is back (or none will come).
  virtual bool drained() const = 0;
  virtual void onLastWqe() {}
  virtual void forgetPosted() = 0;  // none will come back: drained
  // The QP is gone: the buffers the connection still holds (`unread`) and
  // those lent to it go back to the device. Without this (the device goes
  // too), destroying the supply gives nothing back.
  virtual void returnAll(std::span<const uint32_t> unread, uint32_t lent) = 0;
};

}  // namespace rdmamsg::peer
