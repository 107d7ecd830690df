// Requests: the one outstanding blocking request of each kind a client
// makes — REGISTER (registerService()) and STATUS_REQUEST (status()) — and
// the daemon's answer to it once it came: REGISTERED or STATUS_REPLY, or
// the ERROR that names the request it answers.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "rdmamsg/status.h"

namespace rdmamsg::client {

class Requests {
 public:
  // REGISTER of `service` sent: its answer is awaited.
  void registering(std::string_view service) {
    registerReply_.reset();
    registerService_.assign(service);
  }
  void registered(std::string_view service) {
    if (!registerReply_ && service == registerService_) registerReply_ = Status();
  }
  void registerFailed(Status why) {
    if (!registerReply_) registerReply_ = std::move(why);
  }
  // The answer, once it came.
  const std::optional<Status>& registerReply() const { return registerReply_; }

  // STATUS_REQUEST sent: its answer is awaited.
  void askingStatus() { statusReply_.reset(); }
  void statusReplied(std::string_view text) { statusReply_ = std::string(text); }
  void statusFailed(Status why) { statusReply_ = Result<std::string>(std::move(why)); }
  bool statusAnswered() const { return statusReply_.has_value(); }
  // The answer (statusAnswered()), moved out.
  Result<std::string> takeStatusReply() { return std::move(*statusReply_); }

 private:
  std::optional<Status> registerReply_;
  std::string registerService_;
  std::optional<Result<std::string>> statusReply_;
};

}  // namespace rdmamsg::client
