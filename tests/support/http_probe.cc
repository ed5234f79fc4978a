#include "tests/support/http_probe.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <string_view>

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

Result<std::string> FetchMetrics(int port) {
  httplib::Client http("127.0.0.1", port);
  http.set_connection_timeout(std::chrono::seconds(2));
  auto res = http.Get("/metrics");
  if (!res || res->status != 200) {
    return Status(StatusCode::kUnavailable, "GET 127.0.0.1:" + std::to_string(port) + "/metrics failed");
  }
  return res->body;
}

Result<double> SampleValue(const std::string& page, const std::string& series) {
  const std::string text = "\n" + page;
  const std::string needle = "\n" + series + " ";
  const size_t at = text.find(needle);
  if (at == std::string::npos) return NotFound(series + " not in /metrics:\n" + page);
  const size_t start = at + needle.size();
  const std::string value = text.substr(start, text.find('\n', start) - start);
  if (value == "+Inf") return std::numeric_limits<double>::infinity();
  try {
    return std::stod(value);
  } catch (const std::exception&) {
    return InvalidArgument(series + ": \"" + value + "\" is not a sample value");
  }
}

Result<double> SumSamples(const std::string& page, const std::string& name) {
  double sum = 0;
  bool found = false;
  size_t at = 0;
  while (at < page.size()) {
    const size_t end = std::min(page.find('\n', at), page.size());
    const std::string_view line(page.data() + at, end - at);
    at = end + 1;
    if (!line.starts_with(name) || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;
    const size_t space = line.rfind(' ');
    try {
      sum += std::stod(std::string(line.substr(space + 1)));
      found = true;
    } catch (const std::exception&) {
      return InvalidArgument(std::string(line) + ": not a sample line");
    }
  }
  if (!found) return NotFound(name + " not in /metrics:\n" + page);
  return sum;
}

Result<uint64_t> ScrapeCounter(int port, const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(std::string page, FetchMetrics(port));
  TESSERA_ASSIGN_OR_RETURN(double value, SumSamples(page, name));
  if (value < 0) return InvalidArgument(name + ": not a counter value on /metrics");
  return static_cast<uint64_t>(value);
}

}  // namespace tessera::testing
