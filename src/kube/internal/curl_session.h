// libcurl behind Client: one request attempt, or one streamed response, with
// the TLS and timeout settings of a ClientConfig. Keeps a small pool of easy
// handles so connections (and HTTP/2 sessions) are reused. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
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

 private:
  void* Acquire();             // CURL*
  void Release(void* handle);  // back to the pool, or freed
  void Configure(void* handle, const HttpRequest& request, void* header_list, char* error_buffer,
                 std::chrono::milliseconds timeout, bool stream) const;

  const ClientConfig config_;
  Mutex mu_;
  std::vector<void*> idle_ TESSERA_GUARDED_BY(mu_);
};

}  // namespace tessera::kube::internal
