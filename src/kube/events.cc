#include "kube/events.h"

#include "kube/leader_elector.h"
#include "kube/paths.h"

namespace tessera::kube {

std::string EventsPath(std::string_view ns) { return NamespacePath(ns) + "/events"; }

std::string TruncateMessage(std::string_view message, size_t max_bytes) {
  if (message.size() <= max_bytes) return std::string(message);
  size_t keep = (max_bytes < 3 ? 3 : max_bytes) - 3;
  // Back off over UTF-8 continuation bytes (10xxxxxx) so no character is split.
  while (keep > 0 && (static_cast<unsigned char>(message[keep]) & 0xC0) == 0x80) --keep;
  return std::string(message.substr(0, keep)) + "...";
}

nlohmann::json BuildEvent(const EventSpec& spec, std::chrono::system_clock::time_point now) {
  const std::string stamp = FormatMicroTime(now);
  nlohmann::json involved = {{"kind", spec.object.kind}, {"apiVersion", spec.object.api_version},
                             {"namespace", spec.object.ns}, {"name", spec.object.name}};
  if (!spec.object.uid.empty()) involved["uid"] = spec.object.uid;
  nlohmann::json source = {{"component", spec.component}};
  if (!spec.host.empty()) source["host"] = spec.host;
  nlohmann::json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"generateName", spec.object.name + "."}, {"namespace", spec.object.ns}}},
      {"involvedObject", std::move(involved)},
      {"type", spec.type},
      {"reason", spec.reason},
      {"message", TruncateMessage(spec.message)},
      {"source", std::move(source)},
      {"reportingComponent", spec.component},
      {"reportingInstance", spec.host},
      {"firstTimestamp", stamp},
      {"lastTimestamp", stamp},
      {"count", 1},
  };
  return event;
}

}  // namespace tessera::kube
