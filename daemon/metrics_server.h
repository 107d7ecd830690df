// The metrics listener (metrics_listen): an HTTP server on the daemon's
// event loop (libevent's evhttp) that answers GET /metrics with the status
// as an OpenMetrics exposition (common/openmetrics.h). Requests are served
// from the loop like any other event; a scrape costs one status snapshot.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "config/address.h"
#include "daemon/loop/event_loop.h"

struct evhttp;
struct evhttp_request;

namespace rdmamsg {

class MetricsServer {
 public:
  // `status` gives the status snapshot's JSON form (status.h). Throws
  // std::runtime_error when the address cannot be bound.
  MetricsServer(loop::EventLoop& loop, const config::Address& address,
                std::function<nlohmann::json()> status);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  uint64_t scrapes() const { return scrapes_; }

 private:
  static void onRequest(evhttp_request* req, void* self);
  struct HttpDeleter {
    void operator()(evhttp* h) const;
  };
  std::unique_ptr<evhttp, HttpDeleter> http_;
  std::function<nlohmann::json()> status_;
  uint64_t scrapes_ = 0;
};

}  // namespace rdmamsg
