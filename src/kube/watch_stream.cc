#include "kube/watch_stream.h"

#include "kube/api_error.h"

namespace tessera::kube {

Result<bool> WatchStreamDecoder::Feed(std::string_view chunk,
                                      const WatchHandler& on_event) {
  buffer_.append(chunk);
  size_t start = 0;
  while (true) {
    const size_t nl = buffer_.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line(buffer_.data() + start, nl - start);
    start = nl + 1;
    auto more = HandleLine(line, on_event);
    if (!more.ok() || !more.value()) {
      buffer_.clear();
      return more;
    }
  }
  buffer_.erase(0, start);
  return true;
}

Result<bool> WatchStreamDecoder::HandleLine(std::string_view line,
                                            const WatchHandler& on_event) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  if (line.empty()) return true;
  auto parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || !parsed.contains("type") || !parsed["type"].is_string() || !parsed.contains("object")) {
    return Internal(context_ + ": malformed watch event: " + std::string(line.substr(0, 200)));
  }
  WatchEvent event{parsed["type"].get<std::string>(), std::move(parsed["object"])};
  if (event.type == "ERROR") return ErrorFromApiStatus(context_, event.object);
  return on_event(event);
}

}  // namespace tessera::kube
