// What a forked child abandoned of its parent's (fork_hooks.h): a leaf that
// every module's fork hook may use, below the Fabric's fork handling
// (fork.cc), which calls those hooks.
#include "fork_hooks.h"

namespace softrdma {

std::vector<const void*>& abandonedInChild() {
  static auto* v = new std::vector<const void*>();
  return *v;
}

}  // namespace softrdma
