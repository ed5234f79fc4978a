#include "kube/internal/curl_session.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>

namespace tessera::kube::internal {
namespace {

// Handles (and their TLS connections) kept for reuse. Above this many
// requests at once, the extra handles are closed after use and the next
// burst pays for new TLS handshakes. tessera-scheduler's binds reach 64 at
// once (scheduler::kMaxBindsInFlight), beside its other requests.
constexpr size_t kMaxIdleHandles = 96;
constexpr size_t kMaxErrorBody = 64 * 1024;

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

Slist BuildHeaders(const std::vector<std::string>& headers) {
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  list = curl_slist_append(list, "Expect:");  // no 100-continue round trip for large bodies
  return Slist(list);
}

size_t AppendBody(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

// Picks Retry-After (delta-seconds form only) out of the response headers.
size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  std::string_view line(data, size * n);
  constexpr std::string_view kName = "retry-after:";
  if (line.size() > kName.size()) {
    std::string lower(line.substr(0, kName.size()));
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lower == kName) {
      const std::string value(line.substr(kName.size()));
      char* end = nullptr;
      const long secs = std::strtol(value.c_str(), &end, 10);
      if (end != value.c_str() && secs >= 0) {
        static_cast<HttpResponse*>(user)->retry_after = std::chrono::seconds(secs);
      }
    }
  }
  return size * n;
}

bool MaySend(CURLcode code) {
  return code != CURLE_COULDNT_RESOLVE_HOST && code != CURLE_COULDNT_RESOLVE_PROXY && code != CURLE_COULDNT_CONNECT;
}

std::string Describe(CURLcode code, const char* error_buffer) {
  std::string out = curl_easy_strerror(code);
  if (error_buffer[0] != '\0') {
    out += ": ";
    out += error_buffer;
  }
  return out;
}

void SetBlob(CURL* h, CURLoption option, const std::string& data) {
  curl_blob blob{const_cast<char*>(data.data()), data.size(), CURL_BLOB_COPY};
  curl_easy_setopt(h, option, &blob);
}

struct StreamState {
  CURL* handle = nullptr;
  const std::function<bool(std::string_view)>* on_data = nullptr;
  long code = 0;
  bool consumer_stopped = false;
  std::string error_body;
};

size_t OnStreamData(char* data, size_t size, size_t n, void* user) {
  auto* st = static_cast<StreamState*>(user);
  const size_t len = size * n;
  if (st->code == 0) curl_easy_getinfo(st->handle, CURLINFO_RESPONSE_CODE, &st->code);
  if (st->code < 200 || st->code > 299) {
    const size_t room = kMaxErrorBody - std::min(kMaxErrorBody, st->error_body.size());
    st->error_body.append(data, std::min(room, len));
    return len;
  }
  if (!(*st->on_data)(std::string_view(data, len))) {
    st->consumer_stopped = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR), recognised below
  }
  return len;
}

static_assert(CURL_LOCK_DATA_LAST <= CurlShareLocks::kKinds, "a mutex for each kind of curl_lock_data");

// libcurl takes a share object's lock in one callback and releases it in
// another, which the lock analysis cannot pair.
void LockShare(CURL*, curl_lock_data data, curl_lock_access, void* user) TESSERA_NO_THREAD_SAFETY_ANALYSIS {
  static_cast<CurlShareLocks*>(user)->mu[data].Lock();
}

void UnlockShare(CURL*, curl_lock_data data, void* user) TESSERA_NO_THREAD_SAFETY_ANALYSIS {
  static_cast<CurlShareLocks*>(user)->mu[data].Unlock();
}

// A share object for TLS sessions and DNS, locked on `locks`; null when
// libcurl refuses any part (requests then go without it).
CURLSH* NewShare(CurlShareLocks* locks) {
  CURLSH* share = curl_share_init();
  if (share == nullptr) return nullptr;
  const bool ok = curl_share_setopt(share, CURLSHOPT_LOCKFUNC, &LockShare) == CURLSHE_OK &&
                  curl_share_setopt(share, CURLSHOPT_UNLOCKFUNC, &UnlockShare) == CURLSHE_OK &&
                  curl_share_setopt(share, CURLSHOPT_USERDATA, locks) == CURLSHE_OK &&
                  curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) == CURLSHE_OK &&
                  curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) == CURLSHE_OK;
  if (!ok) {
    curl_share_cleanup(share);
    return nullptr;
  }
  return share;
}

}  // namespace

CurlSession::CurlSession(const ClientConfig& config) : config_(config) {
  GlobalInit();
  if (config_.share_tls_sessions) share_ = NewShare(&share_locks_);
}

CurlSession::~CurlSession() {
  // Handles first: a share object in use cannot be freed.
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
  if (share_ != nullptr) curl_share_cleanup(static_cast<CURLSH*>(share_));
}

void* CurlSession::Acquire() {
  {
    MutexLock lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void CurlSession::Release(void* handle) {
  curl_easy_reset(static_cast<CURL*>(handle));  // keeps its live connections; Configure sets the share again
  {
    MutexLock lock(mu_);
    if (idle_.size() < kMaxIdleHandles) {
      idle_.push_back(handle);
      return;
    }
  }
  curl_easy_cleanup(static_cast<CURL*>(handle));
}

void CurlSession::Configure(void* handle, const HttpRequest& request, void* header_list, char* error_buffer,
                            std::chrono::milliseconds timeout, bool stream) const {
  CURL* h = static_cast<CURL*>(handle);
  if (share_ != nullptr) curl_easy_setopt(h, CURLOPT_SHARE, static_cast<CURLSH*>(share_));
  curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, static_cast<curl_slist*>(header_list));
  curl_easy_setopt(h, CURLOPT_USERAGENT, config_.user_agent.c_str());
  if (!stream) {
    // Whatever libcurl can decode. Not for streams: a compressor buffers, so
    // watch events would arrive late.
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
  }
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  if (!stream && !config_.http2) curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min<int64_t>(config_.timeout.count(), 10000)));
  if (request.verb == "GET") {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.verb.c_str());
  }
  if (!request.body.empty()) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  }
  // TLS
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!config_.ca_data.empty() || !config_.ca_file.empty()) {
    curl_easy_setopt(h, CURLOPT_CAPATH, nullptr);  // trust the given CA only
    if (!config_.ca_data.empty()) {
      SetBlob(h, CURLOPT_CAINFO_BLOB, config_.ca_data);
    } else {
      curl_easy_setopt(h, CURLOPT_CAINFO, config_.ca_file.c_str());
    }
  }
  if (!config_.cert_data.empty()) {
    SetBlob(h, CURLOPT_SSLCERT_BLOB, config_.cert_data);
  } else if (!config_.cert_file.empty()) {
    curl_easy_setopt(h, CURLOPT_SSLCERT, config_.cert_file.c_str());
  }
  if (!config_.key_data.empty()) {
    SetBlob(h, CURLOPT_SSLKEY_BLOB, config_.key_data);
  } else if (!config_.key_file.empty()) {
    curl_easy_setopt(h, CURLOPT_SSLKEY, config_.key_file.c_str());
  }
}

void CurlSession::CountConnections(void* handle) {
  long opened = 0;
  if (curl_easy_getinfo(static_cast<CURL*>(handle), CURLINFO_NUM_CONNECTS, &opened) == CURLE_OK && opened > 0) {
    connections_opened_.fetch_add(opened, std::memory_order_relaxed);
  }
}

Result<HttpResponse> CurlSession::Perform(const HttpRequest& request, bool* sent) {
  CURL* h = static_cast<CURL*>(Acquire());
  if (h == nullptr) return Internal("curl_easy_init failed");
  Slist headers = BuildHeaders(request.headers);
  char error_buffer[CURL_ERROR_SIZE] = {0};
  Configure(h, request, headers.get(), error_buffer, config_.timeout, /*stream=*/false);
  HttpResponse response;
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &response);
  const CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &response.code);
  CountConnections(h);
  Release(h);
  if (rc != CURLE_OK) {
    if (sent != nullptr) *sent = MaySend(rc);
    return Status(StatusCode::kUnavailable, Describe(rc, error_buffer));
  }
  if (sent != nullptr) *sent = true;
  return response;
}

Result<HttpResponse> CurlSession::Stream(const HttpRequest& request,
                                         const std::function<bool(std::string_view)>& on_data,
                                         const std::atomic<bool>* stop, std::chrono::milliseconds timeout) {
  // A handle of its own, driven through a multi handle so `stop` is polled
  // while the stream is idle, and freed after: a watch holds its connection
  // for minutes, so a pooled handle would gain nothing, and a stream's
  // connection (HTTP/2 where offered) would be of no use to requests on
  // HTTP/1.1. It shares the TLS sessions all the same (Configure), so a
  // watch that starts again resumes one.
  std::unique_ptr<CURL, void (*)(CURL*)> easy(curl_easy_init(), &curl_easy_cleanup);
  std::unique_ptr<CURLM, CURLMcode (*)(CURLM*)> multi(curl_multi_init(), &curl_multi_cleanup);
  if (!easy || !multi) return Internal("curl init failed");
  Slist headers = BuildHeaders(request.headers);
  char error_buffer[CURL_ERROR_SIZE] = {0};
  Configure(easy.get(), request, headers.get(), error_buffer, timeout, /*stream=*/true);
  StreamState state;
  state.handle = easy.get();
  state.on_data = &on_data;
  curl_easy_setopt(easy.get(), CURLOPT_WRITEFUNCTION, &OnStreamData);
  curl_easy_setopt(easy.get(), CURLOPT_WRITEDATA, &state);
  curl_multi_add_handle(multi.get(), easy.get());

  CURLcode result = CURLE_OK;
  bool done = false;
  bool stopped = false;
  while (!done) {
    int running = 0;
    const CURLMcode mc = curl_multi_perform(multi.get(), &running);
    if (mc != CURLM_OK) {
      curl_multi_remove_handle(multi.get(), easy.get());
      return Internal(std::string("curl_multi_perform: ") + curl_multi_strerror(mc));
    }
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi.get(), &queued)) {
      if (msg->msg == CURLMSG_DONE) {
        result = msg->data.result;
        done = true;
      }
    }
    if (done || state.consumer_stopped) break;
    if (stop != nullptr && stop->load()) {
      stopped = true;
      break;
    }
    curl_multi_poll(multi.get(), nullptr, 0, 100, nullptr);
  }
  curl_multi_remove_handle(multi.get(), easy.get());
  CountConnections(easy.get());

  HttpResponse response;
  if (state.code == 0) curl_easy_getinfo(easy.get(), CURLINFO_RESPONSE_CODE, &state.code);
  response.code = state.code;
  if (state.consumer_stopped || stopped) return response;
  if (result != CURLE_OK) return Status(StatusCode::kUnavailable, Describe(result, error_buffer));
  response.body = std::move(state.error_body);
  return response;
}

}  // namespace tessera::kube::internal
