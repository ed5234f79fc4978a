// How src/nvml reports what it sees without depending on a logging library:
// the caller passes a LogFn (tessera-node forwards it to spdlog; the GPU check
// prints to stderr). An empty LogFn drops every message.
// Thread-safety: a LogFn may be called from the health thread and the reading
// thread at once; it must be safe for that.
//
//   nvml::LogFn log = [](nvml::LogLevel l, const std::string& m) { std::cerr << m << "\n"; };
#pragma once

#include <functional>
#include <string>

namespace tessera::nvml {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

using LogFn = std::function<void(LogLevel, const std::string&)>;

}  // namespace tessera::nvml
