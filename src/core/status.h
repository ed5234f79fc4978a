// Status and Result<T>: Tessera's one way of returning errors.
//
// A Status is a gRPC-style code plus a human-readable message; OK is cheap.
// Result<T> holds either a value or a non-OK Status. Both are [[nodiscard]].
// Errors are translated only at the edges (HTTP, gRPC, CUresult, exit codes).
// Thread-safety: values; safe to copy between threads.
//
//   Result<int> Parse(std::string_view s);
//   TESSERA_ASSIGN_OR_RETURN(int v, Parse("12"));
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tessera {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument = 3,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kFailedPrecondition = 9,
  kResourceExhausted = 8,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "prefix: message" (no-op when OK).
  Status WithContext(std::string_view prefix) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgument(std::string message);
Status NotFound(std::string message);
Status AlreadyExists(std::string message);
Status PermissionDenied(std::string message);
Status FailedPrecondition(std::string message);
Status ResourceExhausted(std::string message);
Status OutOfRange(std::string message);
Status Internal(std::string message);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result needs a non-OK Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  // Precondition: ok().
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tessera

#define TESSERA_RETURN_IF_ERROR(expr)               \
  do {                                              \
    ::tessera::Status tessera_status_ = (expr);     \
    if (!tessera_status_.ok()) return tessera_status_; \
  } while (0)

#define TESSERA_CONCAT_INNER_(a, b) a##b
#define TESSERA_CONCAT_(a, b) TESSERA_CONCAT_INNER_(a, b)
#define TESSERA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
// TESSERA_ASSIGN_OR_RETURN(T x, ResultExpr): declares x or returns the error.
#define TESSERA_ASSIGN_OR_RETURN(lhs, expr) \
  TESSERA_ASSIGN_OR_RETURN_IMPL_(TESSERA_CONCAT_(tessera_result_, __LINE__), lhs, expr)
