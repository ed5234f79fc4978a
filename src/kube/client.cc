#include "kube/client.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "core/thread_annotations.h"
#include "kube/backoff.h"
#include "kube/internal/curl_session.h"
#include "kube/token_bucket.h"

namespace tessera::kube {
namespace {

using internal::HttpRequest;
using internal::HttpResponse;

constexpr auto kTokenReload = std::chrono::seconds(60);
constexpr auto kRetryBase = std::chrono::milliseconds(100);
constexpr auto kRetryCap = std::chrono::milliseconds(5000);
constexpr auto kMaxRetryAfter = std::chrono::seconds(30);

bool Is2xx(long code) { return code >= 200 && code <= 299; }

const char* ContentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge: return "application/merge-patch+json";
    case PatchType::kStrategicMerge: return "application/strategic-merge-patch+json";
    case PatchType::kJson: return "application/json-patch+json";
  }
  return "application/merge-patch+json";
}

}  // namespace

struct Client::Impl {
  explicit Impl(ClientConfig c)
      : config(std::move(c)), bucket(config.qps, config.burst), session(config), token(config.token),
        token_read(std::chrono::steady_clock::now()) {
    base_url = config.server;
    while (!base_url.empty() && base_url.back() == '/') base_url.pop_back();
  }

  // The bearer token, re-read from token_file at most once a minute.
  std::string Token() TESSERA_EXCLUDES(token_mu) {
    MutexLock lock(token_mu);
    if (!config.token_file.empty() && std::chrono::steady_clock::now() - token_read >= kTokenReload) {
      token_read = std::chrono::steady_clock::now();
      std::ifstream in(config.token_file);
      std::stringstream text;
      text << in.rdbuf();
      std::string t = text.str();
      while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
      if (in && !t.empty()) token = std::move(t);
    }
    return token;
  }

  HttpRequest MakeRequest(const std::string& verb, const std::string& path, std::string body,
                          const char* content_type) {
    HttpRequest r{verb, base_url + path, std::move(body), {"Accept: application/json"}};
    if (content_type != nullptr) r.headers.push_back(std::string("Content-Type: ") + content_type);
    if (std::string t = Token(); !t.empty()) r.headers.push_back("Authorization: Bearer " + t);
    return r;
  }

  void Throttle() {
    const auto wait = bucket.Reserve();
    if (wait.count() > 0) std::this_thread::sleep_for(wait);
  }

  // Sends with the retry policy of client.h; a 2xx response or the error.
  // `retry_429`: false sends a 429 straight back (an eviction refused by a
  // PodDisruptionBudget); `error_code`, when given, gets the HTTP code of an
  // error answer.
  Result<HttpResponse> Send(const std::string& verb, const std::string& path, std::string body = "",
                            const char* content_type = nullptr, bool retry_429 = true, long* error_code = nullptr) {
    const HttpRequest request = MakeRequest(verb, path, std::move(body), content_type);
    const bool idempotent = verb != "POST";
    Backoff backoff(kRetryBase, kRetryCap);
    for (int attempt = 0;; ++attempt) {
      Throttle();
      bool sent = true;
      auto response = session.Perform(request, &sent);
      Status error;
      bool retryable = false;
      std::optional<std::chrono::seconds> retry_after;
      if (!response.ok()) {
        error = TransportError(verb, path, response.status().message());
        retryable = idempotent || !sent;
      } else if (Is2xx(response->code)) {
        return response;
      } else {
        error = ErrorFromResponse(verb, path, response->code, response->body);
        if (error_code != nullptr) *error_code = response->code;
        retryable = (response->code == 429 && retry_429) || (idempotent && response->code >= 500);
        retry_after = response->retry_after;
      }
      if (!retryable || attempt >= config.max_retries) return error;
      auto delay = backoff.Next();
      if (retry_after) {
        delay = std::max<std::chrono::milliseconds>(delay, std::min<std::chrono::seconds>(*retry_after, kMaxRetryAfter));
      }
      spdlog::debug("kube: {} (retry {}/{} in {} ms)", error.message(), attempt + 1, config.max_retries,
                    delay.count());
      std::this_thread::sleep_for(delay);
    }
  }

  Result<nlohmann::json> SendJson(const std::string& verb, const std::string& path, std::string body = "",
                                  const char* content_type = nullptr) {
    TESSERA_ASSIGN_OR_RETURN(HttpResponse response, Send(verb, path, std::move(body), content_type));
    if (response.body.empty()) return nlohmann::json::object();
    auto parsed = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) {
      return Internal(verb + " " + path + ": response is not JSON: " + response.body.substr(0, 200));
    }
    return parsed;
  }

  ClientConfig config;
  std::string base_url;
  TokenBucket bucket;
  internal::CurlSession session;
  Mutex token_mu;
  std::string token TESSERA_GUARDED_BY(token_mu);
  std::chrono::steady_clock::time_point token_read TESSERA_GUARDED_BY(token_mu);
};

Client::Client(ClientConfig config) : impl_(std::make_shared<Impl>(std::move(config))) {}

const ClientConfig& Client::config() const { return impl_->config; }

int64_t Client::connections_opened() const { return impl_->session.connections_opened(); }

Result<nlohmann::json> Client::Get(const std::string& path) { return impl_->SendJson("GET", path); }

Result<nlohmann::json> Client::List(const std::string& path, const std::string& label_selector,
                                    const std::string& field_selector, int page_size) {
  nlohmann::json items = nlohmann::json::array();
  std::string resource_version;
  std::string continue_token;
  bool restarted = false;
  while (true) {
    std::string page_path = path;
    if (!label_selector.empty()) page_path = AppendQuery(page_path, "labelSelector", label_selector);
    if (!field_selector.empty()) page_path = AppendQuery(page_path, "fieldSelector", field_selector);
    if (page_size > 0) page_path = AppendQuery(page_path, "limit", std::to_string(page_size));
    if (!continue_token.empty()) page_path = AppendQuery(page_path, "continue", continue_token);
    auto page = impl_->SendJson("GET", page_path);
    if (!page.ok()) {
      if (page.status().code() == StatusCode::kOutOfRange && !continue_token.empty() && !restarted) {
        // The continue token expired (410) mid-list: start over in one request.
        spdlog::debug("kube: {}; listing {} again unpaged", page.status().message(), path);
        items = nlohmann::json::array();
        resource_version.clear();
        continue_token.clear();
        page_size = 0;
        restarted = true;
        continue;
      }
      return page.status();
    }
    nlohmann::json& body = page.value();
    const nlohmann::json meta = body.value("metadata", nlohmann::json::object());
    if (resource_version.empty()) resource_version = meta.value("resourceVersion", std::string());
    if (auto it = body.find("items"); it != body.end() && it->is_array()) {
      for (auto& item : *it) items.push_back(std::move(item));
    }
    continue_token = meta.value("continue", std::string());
    if (continue_token.empty()) break;
  }
  return nlohmann::json{{"items", std::move(items)}, {"resourceVersion", resource_version}};
}

Result<nlohmann::json> Client::Create(const std::string& path, const nlohmann::json& body) {
  return impl_->SendJson("POST", path, body.dump(), "application/json");
}

Result<nlohmann::json> Client::Update(const std::string& path, const nlohmann::json& body) {
  return impl_->SendJson("PUT", path, body.dump(), "application/json");
}

Result<nlohmann::json> Client::Patch(const std::string& path, PatchType type, const nlohmann::json& patch) {
  if (type == PatchType::kJson && !patch.is_array()) {
    return InvalidArgument("PATCH " + path + ": a JSON patch must be an array of operations");
  }
  return impl_->SendJson("PATCH", path, patch.dump(), ContentType(type));
}

Status Client::Delete(const std::string& path, std::optional<int> grace_period_seconds, const std::string& uid) {
  std::string p = path;
  if (grace_period_seconds) p = AppendQuery(p, "gracePeriodSeconds", std::to_string(*grace_period_seconds));
  if (uid.empty()) return impl_->Send("DELETE", p).status();
  // With a body the API server reads the options from it alone, ignoring the
  // query: the grace period goes in both.
  nlohmann::json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"preconditions", {{"uid", uid}}}};
  if (grace_period_seconds) options["gracePeriodSeconds"] = *grace_period_seconds;
  return impl_->Send("DELETE", p, options.dump(), "application/json").status();
}

Status Client::Bind(const std::string& ns, const std::string& name, const std::string& uid, const std::string& node,
                    const std::map<std::string, std::string>& annotations) {
  nlohmann::json meta = {{"name", name}, {"namespace", ns}};
  if (!uid.empty()) meta["uid"] = uid;
  if (!annotations.empty()) meta["annotations"] = annotations;
  const nlohmann::json binding = {{"apiVersion", "v1"},
                                  {"kind", "Binding"},
                                  {"metadata", std::move(meta)},
                                  {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  return impl_->Send("POST", PodPath(ns, name) + "/binding", binding.dump(), "application/json").status();
}

Status Client::Evict(const std::string& ns, const std::string& name, const std::string& uid, bool dry_run) {
  nlohmann::json meta = {{"name", name}, {"namespace", ns}};
  nlohmann::json eviction = {{"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", std::move(meta)}};
  nlohmann::json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (!uid.empty()) options["preconditions"] = {{"uid", uid}};
  if (dry_run) options["dryRun"] = nlohmann::json::array({"All"});
  eviction["deleteOptions"] = std::move(options);
  long code = 0;
  Status st = impl_->Send("POST", PodPath(ns, name) + "/eviction", eviction.dump(), "application/json",
                          /*retry_429=*/false, &code)
                  .status();
  if (!st.ok() && code == 429) return Status(StatusCode::kResourceExhausted, st.message());
  return st;
}

Status Client::Watch(const std::string& path, const std::string& resource_version,
                     const WatchHandler& on_event, const std::atomic<bool>* stop,
                     int timeout_seconds) {
  std::string p = AppendQuery(path, "watch", "1");
  p = AppendQuery(p, "allowWatchBookmarks", "true");
  if (timeout_seconds > 0) p = AppendQuery(p, "timeoutSeconds", std::to_string(timeout_seconds));
  if (!resource_version.empty()) p = AppendQuery(p, "resourceVersion", resource_version);
  const std::string context = "GET " + p;

  impl_->Throttle();
  const HttpRequest request = impl_->MakeRequest("GET", p, "", nullptr);
  WatchStreamDecoder decoder(context);
  Status stream_error;
  auto on_data = [&](std::string_view chunk) {
    auto more = decoder.Feed(chunk, on_event);
    if (!more.ok()) {
      stream_error = more.status();
      return false;
    }
    return more.value();
  };
  // The server ends the watch at timeoutSeconds; the client's own limit only
  // catches a connection that died silently.
  const auto limit = std::chrono::seconds(timeout_seconds > 0 ? timeout_seconds + 30 : 24 * 3600);
  auto streamed = impl_->session.Stream(request, on_data, stop, limit);
  if (!stream_error.ok()) return stream_error;
  if (!streamed.ok()) return TransportError("GET", p, streamed.status().message());
  const HttpResponse& response = streamed.value();
  if (response.code != 0 && !Is2xx(response.code)) {
    return ErrorFromResponse("GET", p, response.code, response.body);
  }
  return Status::Ok();
}

}  // namespace tessera::kube
