// Turning apiserver answers into tessera::Status: the HTTP code picks the
// StatusCode, the Kubernetes Status body (reason, message) goes into the text.
// Pure functions; thread-safe.
//
//   ErrorFromResponse("POST", "/api/v1/namespaces/ns/pods/p/binding", 409, body)
//     -> FAILED_PRECONDITION "POST /api/v1/namespaces/ns/pods/p/binding: 409 Conflict:
//        pod p is already assigned to node n1"
//
// Mapping (HTTP code, Kubernetes reason -> StatusCode):
//   404                         kNotFound
//   409 reason AlreadyExists    kAlreadyExists (a create of an existing name)
//   409 otherwise               kFailedPrecondition (optimistic-concurrency or
//                               uid precondition conflict); a 409 without a
//                               Status body is kAlreadyExists for POST
//   410 Gone / Expired          kOutOfRange: "resourceVersion too old" for a
//                               watch, or an expired list continue token; the
//                               caller relists (core has no dedicated code)
//   400, 422                    kInvalidArgument
//   401, 403                    kFailedPrecondition (credentials or RBAC)
//   429, 5xx                    kUnavailable (retryable)
//   other 4xx                   kInvalidArgument; anything else kInternal
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "core/status.h"

namespace tessera::kube {

StatusCode CodeForHttpStatus(long http_code, std::string_view reason, bool is_create);

// A non-OK Status for a non-2xx answer: "VERB PATH: CODE REASON: MESSAGE".
// `body` is the response body; when it is a Kubernetes Status its reason and
// message are used, otherwise the HTTP reason phrase and the start of the body.
Status ErrorFromResponse(std::string_view verb, std::string_view path, long http_code, std::string_view body);

// The same for a Status object already parsed (a watch ERROR event's object):
// "CONTEXT: CODE REASON: MESSAGE". A missing code is treated as 500.
Status ErrorFromApiStatus(std::string_view context, const nlohmann::json& status, bool is_create = false);

// A transport failure (connect, TLS, timeout): kUnavailable "VERB PATH: DETAIL".
Status TransportError(std::string_view verb, std::string_view path, std::string_view detail);

// Whether an error from the above is worth retrying (kUnavailable).
inline bool IsRetryable(const Status& s) { return s.code() == StatusCode::kUnavailable; }

}  // namespace tessera::kube
