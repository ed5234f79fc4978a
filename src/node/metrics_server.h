// tessera-node's HTTP endpoint (cpp-httplib): GET /metrics answers with the
// Prometheus text a callback renders, GET /healthz with "ok". Other paths: 404.
// Thread-safety: Start and Stop from one thread; the callback runs on the
// server's threads and must be thread-safe.
//
//   MetricsServer server([&] { return registry.Render(); }, log);
//   TESSERA_ASSIGN_OR_RETURN(int port, server.Start(*ParseBindAddress(":9410")));
#pragma once

#include <spdlog/logger.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "core/status.h"

namespace httplib {
class Server;
}

namespace tessera::node {

struct BindAddress {
  std::string host;  // "0.0.0.0" when the flag named none
  int port = 0;
  bool operator==(const BindAddress&) const = default;
};

// ":9410" -> 0.0.0.0:9410, "127.0.0.1:9410", "[::1]:9410" -> ::1:9410.
// INVALID_ARGUMENT, naming the flag's value, when there is no port or it is
// not in 0..65535.
Result<BindAddress> ParseBindAddress(std::string_view address);

class MetricsServer {
 public:
  MetricsServer(std::function<std::string()> render, std::shared_ptr<spdlog::logger> log);
  ~MetricsServer();  // Stop()
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds (port 0: any free port) and serves on a background thread; the
  // bound port. UNAVAILABLE when the address cannot be bound,
  // FAILED_PRECONDITION when already started.
  Result<int> Start(const BindAddress& address);
  // Stops serving and joins the thread. Idempotent.
  void Stop();

 private:
  const std::function<std::string()> render_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace tessera::node
