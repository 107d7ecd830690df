// The metrics listener (metrics_server.h).
#include "daemon/metrics_server.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/openmetrics.h"

namespace rdmamsg {

void MetricsServer::HttpDeleter::operator()(evhttp* h) const {
  evhttp_free(h);
}

MetricsServer::MetricsServer(loop::EventLoop& loop, const config::Address& address,
                             std::function<nlohmann::json()> status)
    : http_(evhttp_new(loop.base())), status_(std::move(status)) {
  if (!http_) throw std::runtime_error("metrics_listen: cannot create the HTTP server");
  evhttp_set_allowed_methods(http_.get(), EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
  evhttp_set_max_headers_size(http_.get(), 8192);
  evhttp_set_max_body_size(http_.get(), 0);
  evhttp_set_timeout(http_.get(), 10);
  evhttp_set_gencb(http_.get(), &MetricsServer::onRequest, this);
  if (evhttp_bind_socket(http_.get(), address.host.c_str(), address.port) != 0)
    throw std::runtime_error("metrics_listen: cannot listen on " + address.toString() + ": " +
                             std::strerror(errno));
  spdlog::info("serving metrics on http://{}/metrics", address.toString());
}

MetricsServer::~MetricsServer() = default;

void MetricsServer::onRequest(evhttp_request* req, void* arg) {
  auto* self = static_cast<MetricsServer*>(arg);
  const char* uri = evhttp_request_get_uri(req);
  evhttp_uri* parsed = evhttp_uri_parse(uri != nullptr ? uri : "");
  const char* path = parsed != nullptr ? evhttp_uri_get_path(parsed) : nullptr;
  const bool isMetrics = path != nullptr && std::strcmp(path, "/metrics") == 0;
  if (parsed != nullptr) evhttp_uri_free(parsed);
  evkeyvalq* headers = evhttp_request_get_output_headers(req);
  if (!isMetrics) {
    evhttp_add_header(headers, "Content-Type", "text/plain; charset=utf-8");
    evbuffer* body = evbuffer_new();
    evbuffer_add_printf(body, "rdmamsgd serves its metrics at /metrics\n");
    evhttp_send_reply(req, HTTP_NOTFOUND, "Not Found", body);
    evbuffer_free(body);
    return;
  }
  self->scrapes_++;
  const std::string text = metrics::render(self->status_());
  evhttp_add_header(headers, "Content-Type", std::string(metrics::kContentType).c_str());
  evbuffer* body = evbuffer_new();
  evbuffer_add(body, text.data(), text.size());
  evhttp_send_reply(req, HTTP_OK, "OK", body);
  evbuffer_free(body);
}

}  // namespace rdmamsg
