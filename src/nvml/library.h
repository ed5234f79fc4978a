// Library: the driver's NVML, dlopen()ed at run time (never linked, so
// binaries start on machines without a driver), initialised for the object's
// lifetime, with the few calls Tessera makes wrapped to return Status/Result.
// Thread-safety: after Open the object is immutable and NVML is thread-safe,
// so every method may be called from any thread. EventSets must not outlive
// the Library that made them.
//
//   TESSERA_ASSIGN_OR_RETURN(auto lib, nvml::Library::Open());
//   TESSERA_ASSIGN_OR_RETURN(unsigned n, lib->DeviceCount());
#pragma once

#include <nvml.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "nvml/nvml_status.h"

namespace tessera::nvml {

class Library;

// An NVML event set, freed on destruction. Move-only.
class EventSet {
 public:
  EventSet(EventSet&& other) noexcept;
  EventSet& operator=(EventSet&&) = delete;
  ~EventSet();
  nvmlEventSet_t get() const { return set_; }

 private:
  friend class Library;
  EventSet(const Library* lib, nvmlEventSet_t set) : lib_(lib), set_(set) {}
  const Library* lib_;
  nvmlEventSet_t set_;
};

class Library {
 public:
  // dlopen()s `path`, resolves the versioned symbols and calls nvmlInit_v2.
  // FAILED_PRECONDITION with LibraryMissing's message when the file cannot be
  // loaded or SymbolMissing's when a required call is absent; nvmlInit_v2's
  // error (NvmlStatus) when the driver refuses. Nothing is left open on error.
  static Result<std::unique_ptr<Library>> Open(const std::string& path = kDefaultLibrary);
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  // nvmlShutdown, then dlclose.
  ~Library();

  const std::string& path() const { return path_; }

  Result<unsigned> DeviceCount() const;
  Result<nvmlDevice_t> DeviceByIndex(unsigned index) const;
  Result<std::string> Name(nvmlDevice_t device) const;
  Result<std::string> Uuid(nvmlDevice_t device) const;
  Result<uint64_t> MemoryTotalBytes(nvmlDevice_t device) const;
  // Device memory in use by every process and context, as nvidia-smi shows
  // it: nvmlDeviceGetMemoryInfo_v2's used, which leaves out the driver's
  // reserve (about 615 MiB on an H200 with driver 580); where v2 is missing
  // or refuses, v1's used, which counts the reserve.
  Result<uint64_t> MemoryUsedBytes(nvmlDevice_t device) const;
  // nvmlDeviceGetUtilizationRates' gpu field as 0..1: the fraction of the
  // driver's last sample period during which a kernel ran. UNIMPLEMENTED when
  // the driver or GPU lacks it.
  Result<double> Utilization(nvmlDevice_t device) const;
  // nvmlDeviceGetAttributes_v2's multiprocessorCount. UNIMPLEMENTED when the
  // driver or GPU lacks it (before Ampere).
  Result<int> SmCount(nvmlDevice_t device) const;
  // The one NUMA node nearest the GPU's memory (nvmlDeviceGetMemoryAffinity,
  // node scope): what the kubelet's topology hints want. NOT_FOUND when the
  // mask names no node or several; UNIMPLEMENTED when unsupported.
  Result<int> NumaNode(nvmlDevice_t device) const;

  // Events. UNIMPLEMENTED when the driver lacks the event calls.
  Result<EventSet> CreateEventSet() const;
  Result<unsigned long long> SupportedEventTypes(nvmlDevice_t device) const;
  Status RegisterEvents(nvmlDevice_t device, unsigned long long types, const EventSet& set) const;
  // Waits up to timeout_ms. nullopt on timeout (or an interrupt); an error
  // Status for anything else.
  Result<std::optional<nvmlEventData_t>> WaitEvent(const EventSet& set, unsigned timeout_ms) const;

 private:
  friend class EventSet;
  struct Api;
  Library(std::string path, void* handle, std::unique_ptr<Api> api);
  Status Check(const char* call, nvmlReturn_t ret) const;

  std::string path_;
  void* handle_;
  std::unique_ptr<Api> api_;
};

}  // namespace tessera::nvml
