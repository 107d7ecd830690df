// The process's observer of state transitions (state_machine.h).
#include "common/state_machine.h"

#include <cstdio>
#include <cstdlib>

namespace rdmamsg::state_machine {
namespace {

Observer& observer() {
  static Observer o;
  return o;
}

}  // namespace

void setObserver(Observer o) {
  observer() = o;
}

void reportMove(std::string_view who, std::string_view from, std::string_view to) {
  if (observer().moved != nullptr) observer().moved(who, from, to);
}

void reportInvalid(std::string_view who, std::string_view from, std::string_view to) {
  std::string line(who);
  line.append(": invalid state change ").append(from).append(" -> ").append(to);
  if (observer().invalid != nullptr) observer().invalid(line);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace rdmamsg::state_machine
