#include "node/metrics_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include "metrics/text_format.h"

namespace tessera::node {

Result<BindAddress> ParseBindAddress(std::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) {
    return InvalidArgument("--metrics-bind-address must be host:port or :port, got \"" + std::string(address) + "\"");
  }
  BindAddress out;
  out.host = std::string(address.substr(0, colon));
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  if (out.host.empty()) out.host = "0.0.0.0";
  const std::string_view port = address.substr(colon + 1);
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), out.port);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || out.port < 0 || out.port > 65535) {
    return InvalidArgument("--metrics-bind-address: port must be in 0..65535, got \"" + std::string(address) + "\"");
  }
  return out;
}

MetricsServer::MetricsServer(std::function<std::string()> render, std::shared_ptr<spdlog::logger> log)
    : render_(std::move(render)), log_(std::move(log)) {}

MetricsServer::~MetricsServer() { Stop(); }

Result<int> MetricsServer::Start(const BindAddress& address) {
  if (server_) return FailedPrecondition("the metrics server is already started");
  server_ = std::make_unique<httplib::Server>();
  server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  // httplib's default adds SO_REUSEPORT, which would let a second agent on
  // the same port silently take half the scrapes; keep only SO_REUSEADDR.
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_(), metrics::kContentType);
  });
  server_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain; charset=utf-8");
  });
  errno = 0;
  const int bound = address.port == 0 ? server_->bind_to_any_port(address.host)
                                      : (server_->bind_to_port(address.host, address.port) ? address.port : -1);
  if (bound <= 0) {
    const int err = errno;  // bind's or listen's reason, named as the extender's server does
    server_.reset();
    const bool named = err == EADDRINUSE || err == EACCES || err == EADDRNOTAVAIL;
    return Status(StatusCode::kUnavailable, "cannot listen on " + address.host + ":" + std::to_string(address.port) +
                                                " for /metrics" +
                                                (named ? std::string(": ") + std::strerror(err) : std::string()));
  }
  thread_ = std::thread([this] {
    if (!server_->listen_after_bind()) log_->error("the metrics server stopped with an error");
  });
  // stop() only works once the accept loop runs.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server_->is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  log_->info("serving /metrics on {}:{}", address.host, bound);
  return bound;
}

void MetricsServer::Stop() {
  if (!server_) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace tessera::node
