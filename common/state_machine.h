// StateMachine<S>: one state and the one place it changes.
//
// Every state machine of the daemon (a connection, a peer, its idle-close
// agreement, the mesh, a client session, its shared-memory link, the
// shared-memory channel) and of the client library (its shared-memory
// link) keeps its state in one of these. The machine's
// enum supplies, found by argument-dependent lookup beside it:
//
//   bool allowedEdge(S from, S to);     // the edges the machine has
//   std::string_view toString(S s);     // (or const char*) its name
//
// set() is the only transition: an edge the machine does not have is a bug
// and stops the process loudly (never an outcome to handle); an allowed one
// is reported to the process's observer, which the daemon points at its
// debug log, naming the machine. Moving to the state it is in changes
// nothing and reports nothing. A machine that moves at every wake-up (the
// channel's arming) passes an empty `who`: its edges are checked, its moves
// are not reported.
#pragma once

#include <string>
#include <string_view>

namespace rdmamsg {

namespace state_machine {
// What a process does with transitions: `moved` sees every allowed one
// (who, from, to); `invalid` is called for an edge the machine does not
// have and must not return. Defaults: nothing; a line on stderr and abort().
struct Observer {
  void (*moved)(std::string_view who, std::string_view from, std::string_view to) = nullptr;
  void (*invalid)(const std::string& line) = nullptr;
};
void setObserver(Observer o);
void reportMove(std::string_view who, std::string_view from, std::string_view to);
[[noreturn]] void reportInvalid(std::string_view who, std::string_view from, std::string_view to);
}  // namespace state_machine

template <typename S>
class StateMachine {
 public:
  explicit StateMachine(S initial) : state_(initial) {}

  S get() const { return state_; }
  bool is(S s) const { return state_ == s; }

  // Moves to `next` (`who` names the machine in the report). False when it
  // was already there.
  bool set(S next, std::string_view who) {
    if (next == state_) return false;
    if (!allowedEdge(state_, next)) state_machine::reportInvalid(who, name(state_), name(next));
    if (!who.empty()) state_machine::reportMove(who, name(state_), name(next));
    state_ = next;
    return true;
  }

 private:
  static std::string_view name(S s) { return std::string_view(toString(s)); }
  S state_;
};

}  // namespace rdmamsg
