// Protection domains and memory regions (verbs_pd.cc, verbs_mr.cc): the
// objects, the PD table by handle (for ibv_import_pd) and the process-wide
// MR key table.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "base.h"
#include "fork_hooks.h"

namespace softrdma {

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
// The process's PDs by handle, for ibv_import_pd (import.cc): a PD is
// noted when allocated and forgotten when deallocated. A PD found with
// findPdLocked stays allocated while the lock is held.
void notePd(Pd* p);
void forgetPd(Pd* p);
std::unique_lock<std::mutex> lockPdTable();
Pd* findPdLocked(uint32_t handle);
// fork: the PD table's lock, a leaf.
void forkPds(ForkStep s);

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

}  // namespace softrdma
