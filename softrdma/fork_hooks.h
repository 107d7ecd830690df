// fork() support shared by every module: the steps of the atfork handlers,
// what a forked child abandons of its parent's, and each module's hook
// (fork.cc calls them in the lock order).
#pragma once

#include <utility>
#include <vector>

namespace softrdma {

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
void forkDevice(ForkStep s);     // device.cc
void forkCqs(ForkStep s);        // verbs_cq.cc
void forkQps(ForkStep s);        // verbs_qp.cc
void forkSrqs(ForkStep s);       // verbs_srq.cc: the SRQ table, right after the QP table
void forkCm(ForkStep s);         // cm.cc (its tables are guarded by the Fabric's cm_mu)
void forkManual(ForkStep s);     // manual_qp.cc
void forkTransport(ForkStep s);  // conn.cc
void forkCounters(ForkStep s);   // counters.cc
void forkMrs(ForkStep s);        // verbs_mr.cc: the MR key table, right after the device
// Leaves: the memory windows' lock (mw.cc) and the PD handle table's (verbs_pd.cc).
void forkWindows(ForkStep s);
void forkPds(ForkStep s);

}  // namespace softrdma
