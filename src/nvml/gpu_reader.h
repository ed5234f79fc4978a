// GpuReader: the node's GPUs as NVML reports them (uuid, short model, memory,
// SM count, NUMA node, health), with a HealthWatch thread marking GPUs that a
// critical XID has lost. Needs only libc, libdl, pthread and nvml.h, so the
// GPU check in tests/gpu builds it without the rest of Tessera.
// Thread-compatible: one Read() at a time.
//
//   TESSERA_ASSIGN_OR_RETURN(auto reader, nvml::GpuReader::Open({}));
//   TESSERA_ASSIGN_OR_RETURN(std::vector<core::GpuInfo> gpus, reader->Read());
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "nvml/health_watch.h"
#include "nvml/library.h"
#include "nvml/log.h"

namespace tessera::nvml {

struct GpuReaderOptions {
  // File dlopen()ed; a path or a name the dynamic loader searches.
  std::string library = kDefaultLibrary;
  // Start the HealthWatch thread (XID and double-bit ECC events).
  bool watch_events = true;
  // Longest single event wait: bounds how long destruction takes.
  std::chrono::milliseconds event_wait{500};
  // Where log lines go; empty drops them.
  LogFn log;
};

// How busy one GPU is now, as NVML sees it: every process on it, inside
// Tessera's containers or not.
struct GpuLoad {
  int index = 0;
  uint64_t memory_used_bytes = 0;
  std::optional<double> utilization;  // 0..1; nullopt when NVML cannot say
  bool operator==(const GpuLoad&) const = default;
};

class GpuReader {
 public:
  // Loads NVML (errors as Library::Open), lists the GPUs and starts the
  // health thread. A GPU that cannot be queried now is logged and left out.
  static Result<std::unique_ptr<GpuReader>> Open(GpuReaderOptions options);
  GpuReader(const GpuReader&) = delete;
  GpuReader& operator=(const GpuReader&) = delete;
  // Stops the health thread, then shuts NVML down and unloads it.
  ~GpuReader();

  // The GPUs now, index ascending. Fails only when NVML cannot count them.
  // A GPU whose queries fail (or that is no longer counted) is reported
  // with what was last read from it and healthy = false; one never read
  // successfully is left out. Each change is logged once.
  Result<std::vector<core::GpuInfo>> Read();

  // The load of each GPU NVML counts now, index ascending. A GPU whose
  // memory query fails is left out (Read reports its health). May run on
  // another thread than Read.
  Result<std::vector<GpuLoad>> ReadLoad() const;

 private:
  GpuReader(GpuReaderOptions options, std::unique_ptr<Library> lib);
  Result<core::GpuInfo> ReadOne(unsigned index) const;
  void NoteFailure(int index, const Status& status);
  void NoteSuccess(int index);

  GpuReaderOptions options_;
  std::unique_ptr<Library> lib_;
  std::unique_ptr<HealthWatch> watch_;       // may be null (watch_events off)
  std::map<int, core::GpuInfo> last_good_;   // by index
  std::set<int> failing_;                    // indexes whose last query failed
};

}  // namespace tessera::nvml
