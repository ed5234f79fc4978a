// Decoding a watch response: the apiserver sends one JSON event per line,
// {"type":"ADDED","object":{...}}, and the network may split lines anywhere.
// WatchStreamDecoder buffers the partial line between chunks. Not thread-safe.
//
//   WatchStreamDecoder decoder("GET /api/v1/pods");
//   TESSERA_ASSIGN_OR_RETURN(bool more, decoder.Feed(chunk, on_event));
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tessera::kube {

// One watch event. type: ADDED, MODIFIED, DELETED, BOOKMARK (object carries
// only metadata.resourceVersion) or ERROR (object is a Kubernetes Status).
struct WatchEvent {
  std::string type;
  nlohmann::json object;
};

// Called once per event; returns false to end the watch. The event is the
// handler's to change: it may move `object` out (an informer stores it
// without copying a whole pod per event).
using WatchHandler = std::function<bool(WatchEvent&)>;

class WatchStreamDecoder {
 public:
  // `context` prefixes error messages ("GET /api/v1/pods").
  explicit WatchStreamDecoder(std::string context) : context_(std::move(context)) {}

  // Appends `chunk` and hands each complete event to on_event, in order.
  // Returns true to go on reading, false once on_event returned false (later
  // lines are not delivered). Errors: an ERROR event becomes the Status its
  // object describes (code 410 Expired/Gone -> kOutOfRange, see api_error.h);
  // a line that is not a JSON event -> kInternal. After an error or false,
  // the decoder must not be fed again.
  Result<bool> Feed(std::string_view chunk, const WatchHandler& on_event);

  // Bytes of an unfinished line held back (for a stream that ends mid-line).
  size_t pending() const { return buffer_.size(); }

 private:
  Result<bool> HandleLine(std::string_view line, const WatchHandler& on_event);

  std::string context_;
  std::string buffer_;
};

}  // namespace tessera::kube
