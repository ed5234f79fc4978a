// Turns NVML results and a missing libnvidia-ml.so.1 into tessera::Status, so
// every NVML failure reads the same way: "<call>: <nvmlErrorString> (NVML
// error <n>)". Pure functions; thread-safe.
//
//   return NvmlStatus("nvmlDeviceGetName", ret, api.ErrorString(ret));
#pragma once

#include <nvml.h>

#include <string>
#include <string_view>

#include "core/status.h"

namespace tessera::nvml {

// The file dlopen()ed by default: the driver's NVML, never linked at build time.
inline constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";

// OK for NVML_SUCCESS. Otherwise a Status whose message names `call`, NVML's
// own text (`text`, from nvmlErrorString; "unknown error" when empty) and the
// number. Codes: INVALID_ARGUMENT, NOT_FOUND, UNIMPLEMENTED (not supported or
// not in this driver), FAILED_PRECONDITION (driver not loaded, uninitialized,
// no permission, version mismatch, reset required), UNAVAILABLE (GPU lost,
// timeout), RESOURCE_EXHAUSTED (insufficient size or memory), else INTERNAL.
Status NvmlStatus(std::string_view call, nvmlReturn_t ret, std::string_view text);

// FAILED_PRECONDITION for a library dlopen() could not load: "<path> not
// found: is the NVIDIA driver installed? use --simulated-gpus for simulated
// mode (dlopen: <detail>)". `detail` is dlerror()'s text and may be empty.
Status LibraryMissing(std::string_view path, std::string_view detail);

// FAILED_PRECONDITION for a required symbol the library lacks (an old driver).
Status SymbolMissing(std::string_view path, std::string_view symbol);

}  // namespace tessera::nvml
