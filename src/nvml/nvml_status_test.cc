#include "nvml/nvml_status.h"

#include <gtest/gtest.h>

namespace tessera::nvml {
namespace {

TEST(NvmlStatus, NamesTheCallTheTextAndTheNumber) {
  Status st = NvmlStatus("nvmlDeviceGetName", NVML_ERROR_GPU_IS_LOST, "GPU is lost");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "nvmlDeviceGetName: GPU is lost (NVML error 15)");
}

TEST(NvmlStatus, SuccessIsOk) { EXPECT_TRUE(NvmlStatus("nvmlInit_v2", NVML_SUCCESS, "Success").ok()); }

TEST(NvmlStatus, EmptyTextSaysUnknown) {
  EXPECT_EQ(NvmlStatus("nvmlInit_v2", NVML_ERROR_UNKNOWN, "").message(),
            "nvmlInit_v2: unknown error (NVML error 999)");
}

TEST(NvmlStatus, CodesFollowTheError) {
  auto code = [](nvmlReturn_t r) { return NvmlStatus("f", r, "x").code(); };
  EXPECT_EQ(code(NVML_ERROR_INVALID_ARGUMENT), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(NVML_ERROR_NOT_SUPPORTED), StatusCode::kUnimplemented);
  EXPECT_EQ(code(NVML_ERROR_NOT_FOUND), StatusCode::kNotFound);
  EXPECT_EQ(code(NVML_ERROR_DRIVER_NOT_LOADED), StatusCode::kFailedPrecondition);
  EXPECT_EQ(code(NVML_ERROR_NO_PERMISSION), StatusCode::kFailedPrecondition);
  EXPECT_EQ(code(NVML_ERROR_TIMEOUT), StatusCode::kUnavailable);
  EXPECT_EQ(code(NVML_ERROR_INSUFFICIENT_SIZE), StatusCode::kResourceExhausted);
  EXPECT_EQ(code(NVML_ERROR_UNKNOWN), StatusCode::kInternal);
}

TEST(LibraryMissing, TellsThePersonWhatToDo) {
  Status st = LibraryMissing("libnvidia-ml.so.1", "libnvidia-ml.so.1: cannot open shared object file");
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "libnvidia-ml.so.1 not found: is the NVIDIA driver installed? use --simulated-gpus for simulated "
            "mode (dlopen: libnvidia-ml.so.1: cannot open shared object file)");
  EXPECT_EQ(LibraryMissing("/x/lib.so", "").message(),
            "/x/lib.so not found: is the NVIDIA driver installed? use --simulated-gpus for simulated mode");
}

TEST(SymbolMissing, NamesTheSymbol) {
  EXPECT_EQ(SymbolMissing("libnvidia-ml.so.1", "nvmlDeviceGetCount_v2").message(),
            "libnvidia-ml.so.1 has no nvmlDeviceGetCount_v2: the NVIDIA driver is too old for tessera-node");
}

}  // namespace
}  // namespace tessera::nvml
