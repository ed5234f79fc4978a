// libcurl behind Client: one request attempt, or one streamed response, with
// the TLS and timeout settings of a ClientConfig. Thread-safe.
//
// Connections: requests take an easy handle from a pool of up to 96 idle
// ones, each keeping its own kept-alive connection (and HTTP/2 session), and
// put it back after. With more requests at once than idle handles, new
// handles open new connections, and handles put back beyond the pool close
// theirs. A stream takes a handle of its own, outside the pool, and frees
// it with its connection when the stream ends. With
// config.share_tls_sessions, every handle of a CurlSession, stream handles
// too, is attached to one libcurl share object holding the TLS session
// cache and the DNS cache, locked on mutexes the CurlSession owns: a new
// connection then resumes a TLS session another handle negotiated instead
// of a full handshake. Connections themselves are not shared
// (CURL_LOCK_DATA_CONNECT): libcurl does not support one connection cache
// used by concurrent threads (CURLSHOPT_SHARE(3)), and every request here
// runs curl_easy_perform on its caller's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/thread_annotations.h"
#include "kube/config.h"

namespace tessera::kube::internal {

struct HttpRequest {
  std::string verb;                  // GET, POST, PUT, PATCH, DELETE
  std::string url;
  std::string body;                  // sent when non-empty
  std::vector<std::string> headers;  // "Name: value"
};

struct HttpResponse {
  long code = 0;
  std::string body;                              // for Stream(): only a non-2xx body
  std::optional<std::chrono::seconds> retry_after;
};

// One mutex per kind of data a libcurl share object locks (curl_lock_data,
// CURL_LOCK_DATA_LAST of them), as CURLSHOPT_LOCKFUNC(3) asks.
struct CurlShareLocks {
  static constexpr int kKinds = 8;
  Mutex mu[kKinds];
};

class CurlSession {
 public:
  explicit CurlSession(const ClientConfig& config);
  ~CurlSession();
  CurlSession(const CurlSession&) = delete;
  CurlSession& operator=(const CurlSession&) = delete;

  // One attempt. Any HTTP answer is a response; a transport failure is
  // kUnavailable with curl's words, and *sent tells whether the request may
  // have reached the server (false: resolve or connect failed).
  Result<HttpResponse> Perform(const HttpRequest& request, bool* sent);

  // Streams a 2xx body into on_data chunk by chunk, on this thread, until the
  // server ends it, on_data returns false or *stop turns true (polled every
  // 100 ms); those three return the response (code set, body empty). A
  // non-2xx answer is returned with its body. Transport failures and
  // `timeout` (whole transfer) are kUnavailable.
  Result<HttpResponse> Stream(const HttpRequest& request, const std::function<bool(std::string_view)>& on_data,
                              const std::atomic<bool>* stop, std::chrono::milliseconds timeout);

  // Connections opened so far by Perform and Stream (libcurl's
  // CURLINFO_NUM_CONNECTS, summed): each one a TCP connect and a TLS
  // handshake, full or resumed. For benchmarks and tests.
  int64_t connections_opened() const { return connections_opened_.load(std::memory_order_relaxed); }

 private:
  void* Acquire();             // CURL*
  void Release(void* handle);  // back to the pool, or freed
  void CountConnections(void* handle);  // adds the handle's CURLINFO_NUM_CONNECTS
  void Configure(void* handle, const HttpRequest& request, void* header_list, char* error_buffer,
                 std::chrono::milliseconds timeout, bool stream) const;

  const ClientConfig config_;
  CurlShareLocks share_locks_;  // outlives share_ (freed in the destructor)
  void* share_ = nullptr;       // CURLSH*; null without config.share_tls_sessions or when init failed
  std::atomic<int64_t> connections_opened_{0};
  Mutex mu_;
  std::vector<void*> idle_ TESSERA_GUARDED_BY(mu_);
};

}  // namespace tessera::kube::internal
