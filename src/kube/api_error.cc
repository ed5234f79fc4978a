#include "kube/api_error.h"

#include <string>

namespace tessera::kube {
namespace {

std::string_view ReasonPhrase(long code) {
  switch (code) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "Request Entity Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "HTTP error";
  }
}

// `reason` is the Kubernetes reason (may be empty) and picks the code with
// http_code; `shown` is what the text says in its place when it is empty.
Status Build(std::string_view context, long http_code, std::string_view reason, std::string_view shown,
             std::string_view message, bool is_create) {
  std::string text(context);
  text += ": ";
  text += std::to_string(http_code);
  if (std::string_view r = reason.empty() ? shown : reason; !r.empty()) {
    text += ' ';
    text += r;
  }
  if (!message.empty()) {
    text += ": ";
    text += message;
  }
  return Status(CodeForHttpStatus(http_code, reason, is_create), std::move(text));
}

}  // namespace

StatusCode CodeForHttpStatus(long http_code, std::string_view reason, bool is_create) {
  switch (http_code) {
    case 404: return StatusCode::kNotFound;
    case 409:
      if (reason == "AlreadyExists") return StatusCode::kAlreadyExists;
      if (reason.empty() && is_create) return StatusCode::kAlreadyExists;
      return StatusCode::kFailedPrecondition;
    case 410: return StatusCode::kOutOfRange;
    case 400:
    case 422: return StatusCode::kInvalidArgument;
    case 401:
    case 403: return StatusCode::kFailedPrecondition;
    case 429: return StatusCode::kUnavailable;
    default: break;
  }
  if (http_code >= 500 && http_code <= 599) return StatusCode::kUnavailable;
  if (http_code >= 400 && http_code <= 499) return StatusCode::kInvalidArgument;
  return StatusCode::kInternal;
}

Status ErrorFromResponse(std::string_view verb, std::string_view path, long http_code, std::string_view body) {
  std::string context(verb);
  context += ' ';
  context += path;
  const bool is_create = verb == "POST";
  auto parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object() && parsed.value("kind", std::string()) == "Status") {
    return Build(context, http_code, parsed.value("reason", std::string()), ReasonPhrase(http_code),
                 parsed.value("message", std::string()), is_create);
  }
  // Not a Status (a proxy's page, an empty body): the phrase and a short excerpt.
  std::string excerpt(body.substr(0, 200));
  while (!excerpt.empty() && (excerpt.back() == '\n' || excerpt.back() == '\r' || excerpt.back() == ' ')) {
    excerpt.pop_back();
  }
  return Build(context, http_code, "", ReasonPhrase(http_code), excerpt, is_create);
}

Status ErrorFromApiStatus(std::string_view context, const nlohmann::json& status, bool is_create) {
  long code = 500;
  std::string reason, message;
  if (status.is_object()) {
    auto c = status.find("code");
    if (c != status.end() && c->is_number_integer()) code = c->get<long>();
    reason = status.value("reason", std::string());
    message = status.value("message", std::string());
  }
  return Build(context, code, reason, ReasonPhrase(code), message, is_create);
}

Status TransportError(std::string_view verb, std::string_view path, std::string_view detail) {
  std::string text(verb);
  text += ' ';
  text += path;
  text += ": ";
  text += detail;
  return Status(StatusCode::kUnavailable, std::move(text));
}

}  // namespace tessera::kube
