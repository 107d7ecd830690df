// Reads the configuration file again for a reload, off the loop. Loading
// resolves local_policy's user and group names (getpwnam_r, getgrnam_r),
// which may wait seconds on LDAP or sssd; the loop must not. So SIGHUP
// starts one reader thread, which loads and checks the file and hands the
// result back through an eventfd; the loop applies it. A request while a
// read is under way is kept and served by one more read once it ends, so
// the last SIGHUP always sees the file as it was when it was sent.
//
// The thread shares nothing with the loop while it runs: it gets its
// arguments by value, writes its result (into state it co-owns) before
// signalling, and the loop joins it before reading the result (the join
// orders the two). A daemon stopping while a read is under way does not wait
// for it: the thread is left to end on its own, with the state it owns.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "config/loader.h"
#include "daemon/loop/event_loop.h"
#include "daemon/loop/events.h"

namespace rdmamsg {

class ConfigReader {
 public:
  using Done = std::function<void(const config::LoadResult&)>;
  // `done` runs on the loop with each result. Throws std::system_error when
  // no eventfd can be had.
  ConfigReader(loop::EventLoop& loop, Done done);
  ~ConfigReader();  // leaves a read under way to end on its own
  ConfigReader(const ConfigReader&) = delete;
  ConfigReader& operator=(const ConfigReader&) = delete;

  // Reads `path` (with --node `node`) off the loop.
  void request(const std::string& path, const std::optional<std::string>& node);
  bool busy() const { return thread_.joinable(); }

 private:
  void start();
  void onReady();

  // What a reader thread writes: its result and the eventfd it signals.
  struct Shared {
    int efd = -1;
    std::optional<config::LoadResult> result;  // written by the thread, read after the join
    ~Shared();
  };

  Done done_;
  std::shared_ptr<Shared> shared_;  // the thread holds a copy while it runs
  std::unique_ptr<loop::IoEvent> io_;
  std::thread thread_;
  std::string path_;
  std::optional<std::string> node_;
  bool again_ = false;
};

}  // namespace rdmamsg
