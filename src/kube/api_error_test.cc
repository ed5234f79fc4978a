#include "kube/api_error.h"

#include <gtest/gtest.h>

namespace tessera::kube {
namespace {

std::string ApiStatus(int code, const std::string& reason, const std::string& message) {
  return nlohmann::json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
                        {"code", code},     {"reason", reason},   {"message", message}}
      .dump();
}

TEST(ErrorFromResponseTest, BindConflictCarriesCodeReasonAndMessage) {
  Status s = ErrorFromResponse("POST", "/api/v1/namespaces/ns/pods/p/binding", 409,
                               ApiStatus(409, "Conflict", "pod p is already assigned to node n1"));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "POST /api/v1/namespaces/ns/pods/p/binding: 409 Conflict: pod p is already assigned to node n1");
}

TEST(ErrorFromResponseTest, MapsCodes) {
  struct Case {
    const char* verb;
    long http;
    const char* reason;
    StatusCode want;
  };
  const Case cases[] = {
      {"GET", 404, "NotFound", StatusCode::kNotFound},
      {"POST", 409, "AlreadyExists", StatusCode::kAlreadyExists},
      {"PUT", 409, "Conflict", StatusCode::kFailedPrecondition},
      {"POST", 409, "Conflict", StatusCode::kFailedPrecondition},
      {"GET", 410, "Expired", StatusCode::kOutOfRange},
      {"GET", 410, "Gone", StatusCode::kOutOfRange},
      {"POST", 400, "BadRequest", StatusCode::kInvalidArgument},
      {"POST", 422, "Invalid", StatusCode::kInvalidArgument},
      {"GET", 401, "Unauthorized", StatusCode::kFailedPrecondition},
      {"GET", 403, "Forbidden", StatusCode::kFailedPrecondition},
      {"GET", 429, "TooManyRequests", StatusCode::kUnavailable},
      {"GET", 500, "InternalError", StatusCode::kUnavailable},
      {"GET", 503, "ServiceUnavailable", StatusCode::kUnavailable},
      {"GET", 504, "Timeout", StatusCode::kUnavailable},
      {"GET", 405, "MethodNotAllowed", StatusCode::kInvalidArgument},
      {"GET", 302, "", StatusCode::kInternal},
  };
  for (const Case& c : cases) {
    Status s = ErrorFromResponse(c.verb, "/p", c.http, ApiStatus(static_cast<int>(c.http), c.reason, "m"));
    EXPECT_EQ(s.code(), c.want) << c.verb << " " << c.http << " " << c.reason << ": " << s.ToString();
  }
}

TEST(ErrorFromResponseTest, ForbiddenKeepsRbacMessage) {
  Status s = ErrorFromResponse("GET", "/api/v1/nodes", 403,
                               ApiStatus(403, "Forbidden", "nodes is forbidden: User \"x\" cannot list resource"));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "GET /api/v1/nodes: 403 Forbidden: nodes is forbidden: User \"x\" cannot list resource");
}

TEST(ErrorFromResponseTest, NonStatusBodyUsesPhraseAndExcerpt) {
  Status s = ErrorFromResponse("GET", "/healthz", 502, "<html>bad gateway</html>\n");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "GET /healthz: 502 Bad Gateway: <html>bad gateway</html>");
  Status empty = ErrorFromResponse("DELETE", "/x", 404, "");
  EXPECT_EQ(empty.code(), StatusCode::kNotFound);
  EXPECT_EQ(empty.message(), "DELETE /x: 404 Not Found");
  // A 409 without a Status body: a create of an existing name.
  EXPECT_EQ(ErrorFromResponse("POST", "/x", 409, "").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrorFromResponse("PUT", "/x", 409, "").code(), StatusCode::kFailedPrecondition);
}

TEST(ErrorFromApiStatusTest, WatchErrorEvent) {
  const auto status = nlohmann::json::parse(ApiStatus(410, "Expired", "too old resource version: 1 (2)"));
  Status s = ErrorFromApiStatus("GET /api/v1/pods?watch=1", status);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(), "GET /api/v1/pods?watch=1: 410 Expired: too old resource version: 1 (2)");
  Status no_code = ErrorFromApiStatus("ctx", nlohmann::json{{"message", "boom"}});
  EXPECT_EQ(no_code.code(), StatusCode::kUnavailable);
  EXPECT_EQ(no_code.message(), "ctx: 500 Internal Server Error: boom");
}

TEST(TransportErrorTest, IsRetryable) {
  Status s = TransportError("GET", "/api", "Couldn't connect to server");
  EXPECT_EQ(s.message(), "GET /api: Couldn't connect to server");
  EXPECT_TRUE(IsRetryable(s));
  EXPECT_FALSE(IsRetryable(NotFound("x")));
}

}  // namespace
}  // namespace tessera::kube
