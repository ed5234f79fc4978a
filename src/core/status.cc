#include "core/status.h"

namespace tessera {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view prefix) const {
  if (ok()) return *this;
  std::string msg(prefix);
  msg += ": ";
  msg += message_;
  return Status(code_, std::move(msg));
}

Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

}  // namespace tessera
