#include "scheduler/server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <thread>
#include <vector>

#include "core/thread_annotations.h"

namespace tessera::scheduler {
namespace {

constexpr const char* kJson = "application/json";
constexpr const char* kText = "text/plain; charset=utf-8";

// `s` with regex metacharacters escaped (httplib routes are regexes).
std::string RegexEscape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// "/x/" -> "/x"; "x" -> "/x"; "" and "/" -> "".
std::string NormalizePrefix(std::string p) {
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (!p.empty() && p.front() != '/') p.insert(p.begin(), '/');
  return p;
}

// Sets `body` as the reply, never compressed. cpp-httplib gzips a JSON or
// text reply set with set_content whenever the client accepts gzip, and Go's
// HTTP client (kube-scheduler's) always says it does: for replies of a few
// hundred bytes, deflating here and inflating there cost both processes
// more than the bytes saved on a local link (measured: 5 % of
// tessera-scheduler's CPU under load). A content provider of known length
// is sent as it is.
void SetUncompressed(httplib::Response& res, std::string body, const char* content_type) {
  if (body.empty()) return res.set_content("", content_type);
  auto shared = std::make_shared<const std::string>(std::move(body));
  res.set_content_provider(shared->size(), content_type,
                           [shared](size_t offset, size_t length, httplib::DataSink& sink) {
                             return sink.write(shared->data() + offset, length);
                           });
}

void MethodNotAllowed(httplib::Server& server, const std::string& pattern, const char* allow,
                      bool get_allowed) {
  auto reply = [allow](const httplib::Request& req, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", allow);
    res.set_content(req.method + " is not allowed on " + req.path + " (use " + allow + ")\n", kText);
  };
  if (!get_allowed) server.Get(pattern, reply);
  else server.Post(pattern, reply);
  server.Put(pattern, reply);
  server.Delete(pattern, reply);
  server.Patch(pattern, reply);
  server.Options(pattern, reply);
}

// cpp-httplib's task queue with a thread per task in flight: a task that
// finds no idle thread starts one (up to `max`); threads beyond `min` exit
// after `idle` without work. cpp-httplib runs one task per connection for
// as long as it is open, so this is a thread per open connection.
class ElasticPool final : public httplib::TaskQueue {
 public:
  ElasticPool(size_t min, size_t max, std::chrono::seconds idle) : min_(min), max_(std::max(min, max)), idle_(idle) {
    MutexLock lock(mu_);
    while (threads_ < min_) StartLocked();
  }
  ~ElasticPool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    MutexLock lock(mu_);
    ReapLocked();
    jobs_.push_back(std::move(fn));
    if (idle_threads_ < jobs_.size() && threads_ < max_) StartLocked();
    work_.NotifyOne();
  }

  void shutdown() override {
    MutexLock lock(mu_);
    stopping_ = true;
    work_.NotifyAll();
    // Workers finish the queued tasks, then leave.
    exited_.Wait(mu_, [this] {
      mu_.AssertHeld();
      return threads_ == 0;
    });
    ReapLocked();
  }

 private:
  struct Worker {
    std::thread thread;
  };

  void StartLocked() TESSERA_REQUIRES(mu_) {
    ++threads_;
    auto it = workers_.emplace(workers_.end());
    it->thread = std::thread([this, it] { Run(it); });
  }

  // Joins the workers that have left (they no longer touch the pool). Only
  // those: with a thread per open connection there can be hundreds running,
  // and enqueue reaps on every new connection.
  void ReapLocked() TESSERA_REQUIRES(mu_) {
    for (auto it : finished_) {
      it->thread.join();
      workers_.erase(it);
    }
    finished_.clear();
  }

  void Run(std::list<Worker>::iterator self) {
    MutexLock lock(mu_);
    for (;;) {
      if (!jobs_.empty()) {
        std::function<void()> fn = std::move(jobs_.front());
        jobs_.pop_front();
        lock.Unlock();
        fn();
        lock.Lock();
        continue;
      }
      if (stopping_) break;
      ++idle_threads_;
      const std::cv_status woke = work_.WaitFor(mu_, idle_);
      --idle_threads_;
      if (woke == std::cv_status::timeout && jobs_.empty() && threads_ > min_) break;
    }
    --threads_;
    finished_.push_back(self);
    exited_.NotifyAll();
  }

  const size_t min_;
  const size_t max_;
  const std::chrono::seconds idle_;
  Mutex mu_;
  CondVar work_;    // a task was queued, or stopping
  CondVar exited_;  // a worker left
  std::deque<std::function<void()>> jobs_ TESSERA_GUARDED_BY(mu_);
  std::list<Worker> workers_ TESSERA_GUARDED_BY(mu_);
  std::vector<std::list<Worker>::iterator> finished_ TESSERA_GUARDED_BY(mu_);  // left, not joined yet
  size_t threads_ TESSERA_GUARDED_BY(mu_) = 0;       // running workers
  size_t idle_threads_ TESSERA_GUARDED_BY(mu_) = 0;  // of them, waiting for a task
  bool stopping_ TESSERA_GUARDED_BY(mu_) = false;
};

}  // namespace

ExtenderServer::ExtenderServer(Extender& extender, ServerOptions options)
    : extender_(extender),
      options_(std::move(options)),
      log_(options_.logger ? options_.logger : spdlog::default_logger()) {}

ExtenderServer::~ExtenderServer() { Stop(); }

void ExtenderServer::Route() {
  httplib::Server& s = *server_;
  const std::string prefix = RegexEscape(NormalizePrefix(options_.prefix));
  const std::string claims = RegexEscape(NormalizePrefix(options_.claims_prefix));
  using Handler = HttpReply (Extender::*)(std::string_view);
  struct Entry {
    Verb verb;  // its label in the verb metrics
    std::string pattern;
    Handler handler;
  };
  for (const Entry& route : {Entry{Verb::kFilter, prefix + "/filter", &Extender::Filter},
                             Entry{Verb::kPrioritize, prefix + "/prioritize", &Extender::Prioritize},
                             Entry{Verb::kBind, prefix + "/bind", &Extender::Bind},
                             Entry{Verb::kPreempt, prefix + "/preempt", &Extender::Preempt},
                             Entry{Verb::kDraFilter, claims + "/filter", &Extender::FilterClaims},
                             Entry{Verb::kDraPrioritize, claims + "/prioritize", &Extender::PrioritizeClaims}}) {
    // Plain variables, not a structured binding: clang before 16 cannot
    // capture a binding in a lambda.
    const Verb verb = route.verb;
    const Handler handler = route.handler;
    s.Post(route.pattern, [this, verb, handler](const httplib::Request& req, httplib::Response& res) {
      const auto start = std::chrono::steady_clock::now();
      HttpReply reply = (extender_.*handler)(req.body);
      if (verb_metrics_) {
        verb_metrics_->Record(verb, reply.decision,
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      res.status = reply.status;
      if (reply.status == 200) {
        SetUncompressed(res, std::move(reply.body), kJson);
      } else {  // rare; the error handler below keeps a reply with a body
        res.set_content(std::move(reply.body), kText);
      }
    });
    MethodNotAllowed(s, route.pattern, "POST", /*get_allowed=*/false);
  }
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", kText); });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    const Status ready = options_.ready ? options_.ready() : Status();
    res.status = ready.ok() ? 200 : 503;
    res.set_content(ready.ok() ? "ok\n" : "not ready: " + ready.message() + "\n", kText);
  });
  if (options_.metrics != nullptr) {
    s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(options_.metrics->Render(), metrics::kContentType);
    });
    MethodNotAllowed(s, "/metrics", "GET", /*get_allowed=*/true);
  }
  for (const char* path : {"/healthz", "/readyz"}) MethodNotAllowed(s, path, "GET", /*get_allowed=*/true);
  s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    res.set_content(std::to_string(res.status) + ": " + req.method + " " + req.path +
                        (res.status == 404 ? " is not served here\n" : "\n"),
                    kText);
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log_->error("{} {}: internal error: {}", req.method, req.path, what);
    res.status = 500;
    res.set_content("internal error: " + what + "\n", kText);
  });
}

Result<int> ExtenderServer::Start(const std::string& host, int port) {
  if (server_) return FailedPrecondition("the extender server is already started");
  if (NormalizePrefix(options_.prefix) == NormalizePrefix(options_.claims_prefix))
    return InvalidArgument("the claim pods' verbs need a path prefix of their own (claims prefix \"" +
                           options_.claims_prefix + "\" is the verbs' prefix)");
  if (options_.metrics != nullptr && !verb_metrics_) {
    TESSERA_ASSIGN_OR_RETURN(verb_metrics_, VerbMetrics::Create(*options_.metrics));
  }
  const bool tls = !options_.tls_cert_file.empty() || !options_.tls_key_file.empty();
  if (tls) {
#ifdef CPPHTTPLIB_OPENSSL_SUPPORT
    auto ssl = std::make_unique<httplib::SSLServer>(options_.tls_cert_file.c_str(), options_.tls_key_file.c_str());
    if (!ssl->is_valid())
      return InvalidArgument("cannot load the TLS certificate " + options_.tls_cert_file + " and key " +
                             options_.tls_key_file);
    server_ = std::move(ssl);
#else
    return InvalidArgument("TLS was requested but cpp-httplib was built without OpenSSL");
#endif
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  const auto min_threads = static_cast<size_t>(std::max(1, options_.min_threads));
  const auto max_threads = static_cast<size_t>(std::max(options_.min_threads, options_.max_threads));
  const std::chrono::seconds idle(std::max(1, options_.idle_thread_seconds));
  server_->new_task_queue = [=] { return new ElasticPool(min_threads, max_threads, idle); };
  server_->set_payload_max_length(options_.max_body_bytes);
  server_->set_keep_alive_max_count(100000);
  server_->set_keep_alive_timeout(std::max(1, options_.keep_alive_seconds));
  server_->set_tcp_nodelay(true);
  // httplib's default adds SO_REUSEPORT, which would let a second process on
  // the same port silently take half the calls; keep only SO_REUSEADDR.
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  Route();
  errno = 0;
  const int bound = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    // httplib reports only false; errno still holds bind's or listen's reason
    // (its cleanup is a close that succeeds). Only the reasons bind and
    // listen give are named: after a failed name lookup errno means nothing.
    const int err = errno;
    server_.reset();
    const bool named = err == EADDRINUSE || err == EACCES || err == EADDRNOTAVAIL;
    return Status(StatusCode::kUnavailable, "cannot listen on " + host + ":" + std::to_string(port) +
                                                (named ? std::string(": ") + std::strerror(err) : std::string()));
  }
  thread_ = std::thread([this] {
    if (!server_->listen_after_bind()) log_->error("extender server on port {} stopped with an error", port_);
  });
  // stop() only works once the accept loop runs.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server_->is_running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  port_ = bound;
  log_->info("extender serving {} on {}:{} (verbs under \"{}/\")", tls ? "HTTPS" : "HTTP", host, bound,
             NormalizePrefix(options_.prefix));
  return bound;
}

void ExtenderServer::Stop() {
  if (!server_) return;
  server_->stop();  // Start waited for the accept loop, so this ends it
  if (thread_.joinable()) thread_.join();
  server_.reset();
  port_ = 0;
}

}  // namespace tessera::scheduler
