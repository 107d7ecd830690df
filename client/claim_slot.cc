// ClaimSlot: the held claim and who frees its block.
#include "client/claim_slot.h"

#include <utility>

namespace rdmamsg::client {

void ClaimSlot::open(SendClaim& out, uint64_t handle, std::string_view node,
                     std::string_view service, std::string_view fromService, size_t size,
                     std::optional<Block> block) {
  block_ = std::move(block);
  if (block_) {
    out.payload = block_->bytes.last(size);
  } else {
    copy_.resize(size);
    out.payload = copy_;
  }
  out.inPlace = block_.has_value();
  out.handle = handle;
  node_.assign(node);
  service_.assign(service);
  from_.assign(fromService);
  subject_.clear();
  size_ = size;
  handle_ = handle;
  given_ = false;
}

void ClaimSlot::openPublish(SendClaim& out, uint64_t handle, std::string_view subject, size_t size,
                            std::optional<Block> block) {
  open(out, handle, {}, {}, {}, size, std::move(block));
  subject_.assign(subject);
}

std::span<const std::byte> ClaimSlot::payload() const {
  if (block_) return block_->bytes.last(size_);
  return copy_;
}

std::optional<ClaimSlot::Block> ClaimSlot::close(SendClaim& c) {
  std::optional<Block> left;
  if (block_ && !given_) left = block_;
  handle_ = 0;
  block_.reset();
  given_ = false;
  c = SendClaim{};
  return left;
}

}  // namespace rdmamsg::client
