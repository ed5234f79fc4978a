// Tells which files appear in or vanish from one folder (Linux inotify), so
// the node agent notices at once when a restarting kubelet wipes the
// device-plugin directory and creates kubelet.sock again.
// Thread-compatible: one caller at a time.
//
//   TESSERA_ASSIGN_OR_RETURN(DirWatch watch, DirWatch::Open("/var/lib/kubelet/device-plugins"));
//   TESSERA_ASSIGN_OR_RETURN(auto events, watch.Wait(std::chrono::milliseconds(100)));
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::node {

struct DirEvent {
  std::string name;  // file name inside the folder
  bool created = false;  // false: deleted or moved away
  bool operator==(const DirEvent&) const = default;
};

class DirWatch {
 public:
  // Starts watching `dir` for created, deleted and moved entries.
  // NOT_FOUND / INTERNAL with the reason when inotify refuses.
  static Result<DirWatch> Open(const std::string& dir);
  DirWatch(DirWatch&& other) noexcept;
  DirWatch& operator=(DirWatch&& other) noexcept;
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;
  ~DirWatch();

  // The events that arrive within `timeout` (empty when none); returns as
  // soon as at least one has arrived. INTERNAL when reading fails.
  Result<std::vector<DirEvent>> Wait(std::chrono::milliseconds timeout);

 private:
  explicit DirWatch(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace tessera::node
