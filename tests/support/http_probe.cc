#include "tests/support/http_probe.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tessera::testing {

int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

Result<uint64_t> ScrapeCounter(int port, const std::string& name) {
  httplib::Client http("127.0.0.1", port);
  http.set_connection_timeout(std::chrono::seconds(2));
  auto res = http.Get("/metrics");
  if (!res || res->status != 200) {
    return Status(StatusCode::kUnavailable, "GET 127.0.0.1:" + std::to_string(port) + "/metrics failed");
  }
  const std::string page = "\n" + res->body;
  const std::string needle = "\n" + name + " ";
  const size_t at = page.find(needle);
  if (at == std::string::npos) return NotFound(name + " not in /metrics:\n" + res->body);
  try {
    return static_cast<uint64_t>(std::stoull(page.substr(at + needle.size())));
  } catch (const std::exception&) {
    return InvalidArgument(name + ": not a counter value on /metrics");
  }
}

}  // namespace tessera::testing
