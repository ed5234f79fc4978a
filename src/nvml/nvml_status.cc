#include "nvml/nvml_status.h"

namespace tessera::nvml {
namespace {

StatusCode CodeFor(nvmlReturn_t ret) {
  switch (ret) {
    case NVML_ERROR_INVALID_ARGUMENT:
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
      return StatusCode::kInvalidArgument;
    case NVML_ERROR_NOT_FOUND:
    case NVML_ERROR_GPU_NOT_FOUND:
      return StatusCode::kNotFound;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_DEPRECATED:
      return StatusCode::kUnimplemented;
    case NVML_ERROR_UNINITIALIZED:
    case NVML_ERROR_NO_PERMISSION:
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_LIBRARY_NOT_FOUND:
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
    case NVML_ERROR_RESET_REQUIRED:
    case NVML_ERROR_OPERATING_SYSTEM:
    case NVML_ERROR_INSUFFICIENT_POWER:
      return StatusCode::kFailedPrecondition;
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_TIMEOUT:
    case NVML_ERROR_NOT_READY:
    case NVML_ERROR_IN_USE:
      return StatusCode::kUnavailable;
    case NVML_ERROR_INSUFFICIENT_SIZE:
    case NVML_ERROR_MEMORY:
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
      return StatusCode::kResourceExhausted;
    default:
      return StatusCode::kInternal;
  }
}

}  // namespace

Status NvmlStatus(std::string_view call, nvmlReturn_t ret, std::string_view text) {
  if (ret == NVML_SUCCESS) return Status::Ok();
  std::string message(call);
  message += ": ";
  message += text.empty() ? std::string_view("unknown error") : text;
  message += " (NVML error " + std::to_string(static_cast<int>(ret)) + ")";
  return Status(CodeFor(ret), std::move(message));
}

Status LibraryMissing(std::string_view path, std::string_view detail) {
  std::string message(path);
  message += " not found: is the NVIDIA driver installed? use --simulated-gpus for simulated mode";
  if (!detail.empty()) message += " (dlopen: " + std::string(detail) + ")";
  return FailedPrecondition(std::move(message));
}

Status SymbolMissing(std::string_view path, std::string_view symbol) {
  return FailedPrecondition(std::string(path) + " has no " + std::string(symbol) +
                            ": the NVIDIA driver is too old for tessera-node");
}

}  // namespace tessera::nvml
