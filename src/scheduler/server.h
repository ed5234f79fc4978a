// ExtenderServer: the HTTP(S) face of the Extender (cpp-httplib).
//
//   POST {prefix}/filter, {prefix}/prioritize, {prefix}/bind,
//        {prefix}/preempt                                    the extender verbs
//   POST {claims_prefix}/filter, {claims_prefix}/prioritize  the verbs for DRA
//        claim pods (Extender::FilterClaims, PrioritizeClaims): kube-scheduler's
//        second extenders entry
//   GET  /healthz    200 "ok" while the process serves
//   GET  /readyz     200 "ok" when `ready` says so, else 503 with its reason
//   GET  /metrics    options.metrics rendered (Prometheus text 0.0.4), when set
// Other paths: 404; another method on a known path: 405 (with Allow). Bodies
// larger than max_body_bytes: 413. Each connection is served on a thread of
// its own, started on demand (ServerOptions::max_threads).
//
// Thread-safety: Start and Stop from one thread; handlers run on the pool.
//
//   ExtenderServer server(*extender, ServerOptions{});
//   TESSERA_ASSIGN_OR_RETURN(int port, server.Start("127.0.0.1", 0));
//   ...
//   server.Stop();
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "metrics/registry.h"
#include "scheduler/extender.h"
#include "scheduler/verb_metrics.h"

namespace httplib {
class Server;
}

namespace tessera::scheduler {

struct ServerOptions {
  // Path prefix of the verbs ("" -> /filter; "/tessera" -> /tessera/filter),
  // matching kube-scheduler's urlPrefix path.
  std::string prefix;
  // Path prefix of the claim pods' verbs (the second extenders entry's
  // urlPrefix path); must differ from `prefix`. Default "/dra".
  std::string claims_prefix = "/dra";
  // Larger request bodies get 413. Default 64 MiB (a full NodeList at 5,000
  // nodes is a few MiB).
  size_t max_body_bytes = size_t{64} << 20;
  // Worker threads: cpp-httplib serves each connection on one thread until
  // it closes, and kube-scheduler opens a connection per call in flight, so
  // a thread is started whenever a new connection finds none idle, up to
  // max_threads (beyond that, connections wait for one). Threads beyond
  // min_threads exit after idle_thread_seconds without work. Each bind
  // holds its thread while it waits on the API server: a fixed pool would
  // let binds in flight take every thread and a filter call, on which
  // kube-scheduler's one scheduling loop waits, queue behind them.
  int min_threads = 8;
  int max_threads = 4096;
  int idle_thread_seconds = 30;
  // Idle keep-alive connections are closed after this many seconds. Stop()
  // waits for them, so this also bounds how long a stop takes with a client
  // (kube-scheduler) connected: keep it well inside a pod's termination
  // grace period. Clients reconnect after it; busy connections never idle.
  int keep_alive_seconds = 5;
  // Both set: serve HTTPS with this PEM certificate and key.
  std::string tls_cert_file;
  std::string tls_key_file;
  // /readyz: OK -> 200, otherwise 503 with the message. nullptr: always ready.
  std::function<Status()> ready;
  // Where errors are logged; nullptr: spdlog's default logger.
  std::shared_ptr<spdlog::logger> logger;
  // Served on GET /metrics, with the verbs' latency and decisions
  // (verb_metrics.h) added to it at the first Start; must outlive the
  // server. nullptr: no /metrics, nothing measured. The claim pods' verbs
  // are measured as dra_filter and dra_prioritize.
  metrics::Registry* metrics = nullptr;
};

class ExtenderServer {
 public:
  // `extender` must outlive the server.
  ExtenderServer(Extender& extender, ServerOptions options);
  ~ExtenderServer();  // Stop()
  ExtenderServer(const ExtenderServer&) = delete;
  ExtenderServer& operator=(const ExtenderServer&) = delete;

  // Binds `host`:`port` (0: any free port) and serves on a background thread.
  // Returns the bound port. UNAVAILABLE when the address cannot be bound,
  // INVALID_ARGUMENT when the TLS files cannot be loaded (or TLS is not
  // compiled in), FAILED_PRECONDITION when already started, ALREADY_EXISTS
  // when options.metrics holds the verbs' families already.
  Result<int> Start(const std::string& host, int port);
  // Stops accepting, finishes in-flight requests, waits for open keep-alive
  // connections to close (at most keep_alive_seconds idle), joins the thread.
  // Idempotent.
  void Stop();
  // The bound port; 0 before Start.
  int port() const { return port_; }

 private:
  void Route();

  Extender& extender_;
  const ServerOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  std::unique_ptr<VerbMetrics> verb_metrics_;  // set at the first Start when options_.metrics is
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace tessera::scheduler
