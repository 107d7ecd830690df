// ClaimSlot: the one message claim() holds (send_claim.cc) until commit()
// sends it or abort() gives it back — its destination, its size and where
// its payload lies: the end of a block of the payload area (in place; the
// SEND or PUB frame's head is written in front of it at commit()) or a
// private buffer.
//
// Who frees a block: the claim, as long as it holds it. At commit() the
// block goes with the message (giveBlock()): from then on it is the
// daemon's, or the shared-memory link frees it when it could not be sent;
// close() then has nothing to give back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/shm_payload_area.h"
#include "rdmamsg/client.h"

namespace rdmamsg::client {

class ClaimSlot {
 public:
  using Block = shm_payload::PayloadAllocator::Block;

  bool held() const { return handle_ != 0; }
  // Whether `c` is the claim held (not committed or aborted already).
  bool holds(const SendClaim& c) const { return c.handle != 0 && c.handle == handle_; }

  // Holds a claim of `size` bytes, named `handle` (not 0), and describes it
  // in `out`: in the last `size` bytes of `block` when there is one, else
  // in a private buffer. Not held().
  void open(SendClaim& out, uint64_t handle, std::string_view node, std::string_view service,
            std::string_view fromService, size_t size, std::optional<Block> block);
  // The same for a publish to `subject` (Client::claimPublish()).
  void openPublish(SendClaim& out, uint64_t handle, std::string_view subject, size_t size,
                   std::optional<Block> block);

  const std::string& node() const { return node_; }
  const std::string& service() const { return service_; }
  const std::string& fromService() const { return from_; }
  // A publish's subject; empty for a SEND.
  const std::string& subject() const { return subject_; }
  std::span<const std::byte> payload() const;
  // The block the payload lies at the end of; nullptr: a private buffer.
  const Block* block() const { return block_ ? &*block_ : nullptr; }

  // The block went with the message: the claim no longer frees it.
  void giveBlock() { given_ = true; }
  bool blockGiven() const { return given_; }

  // Ends the claim and resets `c`; returns the block to give back to the
  // payload area when the claim still held one (not given).
  std::optional<Block> close(SendClaim& c);

 private:
  uint64_t handle_ = 0;  // 0: none held
  std::string node_, service_, from_, subject_;
  size_t size_ = 0;
  std::optional<Block> block_;
  std::vector<std::byte> copy_;  // the payload when there is no block (reused)
  bool given_ = false;
};

}  // namespace rdmamsg::client
