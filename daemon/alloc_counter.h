// Counts the daemon's heap allocations (operator new), so that the status
// can show allocations per message: the fast path allocates nothing per
// message once its buffers have reached their working size.
#pragma once

#include <cstdint>

namespace rdmamsg {
uint64_t heapAllocations();
}  // namespace rdmamsg
