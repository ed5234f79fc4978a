// core/v1 Events: the JSON of one Warning or Normal Event about an object, in
// the legacy core/v1 shape kubectl describe shows (source, first/last
// timestamp, count 1). Pure; thread-safe. EventRecorder (event_recorder.h)
// posts them off the caller's thread.
//
//   nlohmann::json event = BuildEvent(spec, std::chrono::system_clock::now());
//   TESSERA_RETURN_IF_ERROR(client.Create(EventsPath(spec.object.ns), event).status());
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tessera::kube {

// The longest message an Event carries; longer ones are cut (at a UTF-8
// character boundary) and end in "...".
inline constexpr size_t kMaxEventMessageBytes = 1024;

// The object an Event is about (involvedObject).
struct ObjectRef {
  std::string kind = "Pod";
  std::string api_version = "v1";
  std::string ns;
  std::string name;
  std::string uid;  // may be empty, but kubectl describe matches on it
  bool operator==(const ObjectRef&) const = default;
};

struct EventSpec {
  ObjectRef object;
  std::string type = "Warning";  // "Warning" or "Normal"
  std::string reason;            // UpperCamelCase, e.g. "TesseraAllocateFailed"
  std::string message;           // cut to kMaxEventMessageBytes
  std::string component;         // source.component / reportingComponent, e.g. "tessera-node"
  std::string host;              // source.host / reportingInstance (the node); may be empty
  bool operator==(const EventSpec&) const = default;
};

// /api/v1/namespaces/{ns}/events
std::string EventsPath(std::string_view ns);

// `message` cut to at most `max_bytes` bytes without splitting a UTF-8
// character, ending in "..." when cut. max_bytes below 3 is taken as 3.
std::string TruncateMessage(std::string_view message, size_t max_bytes = kMaxEventMessageBytes);

// The v1 Event to POST to EventsPath(spec.object.ns). Its name is generated
// by the API server (metadata.generateName "<object name>."), so repeated
// events never collide.
nlohmann::json BuildEvent(const EventSpec& spec, std::chrono::system_clock::time_point now);

}  // namespace tessera::kube
