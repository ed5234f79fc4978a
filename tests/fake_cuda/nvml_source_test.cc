// The NVML backend of tessera-node (src/nvml's GpuReader and the node's
// NvmlGpuSource) against the fake libnvidia-ml.so.1: inventory, XID health,
// lost GPUs and a missing library. The fake is dlopen()ed by path
// (TESSERA_TEST_FAKE_NVML), as the agent dlopen()s the real one; the test
// holds its own handle to reach the fake's tessera_fake_nvml_* controls.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "node/nvml_gpu_source.h"
#include "nvml/gpu_reader.h"

namespace tessera::nvml {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string FakePath() {
  const char* p = getenv("TESSERA_TEST_FAKE_NVML");
  return p != nullptr ? p : "";
}

class FakeNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(FakePath().empty()) << "TESSERA_TEST_FAKE_NVML is not set";
    handle_ = dlopen(FakePath().c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    inject_xid_ = Sym<void (*)(unsigned, unsigned long long)>("tessera_fake_nvml_inject_xid");
    set_lost_ = Sym<void (*)(unsigned, int)>("tessera_fake_nvml_set_lost");
    pending_ = Sym<unsigned (*)()>("tessera_fake_nvml_pending_events");
    open_sets_ = Sym<unsigned (*)()>("tessera_fake_nvml_open_event_sets");
    set_load_ = Sym<void (*)(unsigned, unsigned long long, int)>("tessera_fake_nvml_set_load");
  }
  void TearDown() override {
    if (set_lost_ != nullptr) {
      for (unsigned i = 0; i < 4; ++i) set_lost_(i, 0);
    }
    if (set_load_ != nullptr) {
      for (unsigned i = 0; i < 4; ++i) set_load_(i, 0, 0);
    }
    if (handle_ != nullptr) dlclose(handle_);
  }
  template <typename F>
  F Sym(const char* name) {
    auto f = reinterpret_cast<F>(dlsym(handle_, name));
    EXPECT_NE(f, nullptr) << name;
    return f;
  }
  GpuReaderOptions Options() {
    GpuReaderOptions o;
    o.library = FakePath();
    o.event_wait = milliseconds(50);
    o.log = [this](LogLevel, const std::string& m) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_.push_back(m);
    };
    return o;
  }
  std::vector<std::string> Log() {
    std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }
  // Polls until `pred` or 5 s.
  template <typename P>
  bool Eventually(P pred) {
    const auto end = steady_clock::now() + std::chrono::seconds(5);
    while (steady_clock::now() < end) {
      if (pred()) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return pred();
  }

  void* handle_ = nullptr;
  void (*inject_xid_)(unsigned, unsigned long long) = nullptr;
  void (*set_lost_)(unsigned, int) = nullptr;
  unsigned (*pending_)() = nullptr;
  unsigned (*open_sets_)() = nullptr;
  void (*set_load_)(unsigned, unsigned long long, int) = nullptr;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

core::GpuInfo Expected(int i) {
  core::GpuInfo g;
  g.index = i;
  g.uuid = "GPU-fa4e0000-0000-4000-8000-00000000000" + std::to_string(i);
  g.model = "H100";
  g.memory_mib = 81559;  // FAKE_CUDA_MEM_MIB in CMakeLists.txt
  g.sm_count = 132;
  g.numa_node = i % 2;
  g.healthy = true;
  return g;
}

TEST_F(FakeNvml, InventoryIsWhatNvmlReports) {
  auto reader = GpuReader::Open(Options());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto gpus = (*reader)->Read();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_EQ(*gpus, (std::vector<core::GpuInfo>{Expected(0), Expected(1)}));
}

TEST_F(FakeNvml, CriticalXidMarksOnlyThatGpuUnhealthy) {
  auto reader = GpuReader::Open(Options());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  inject_xid_(1, 79);
  ASSERT_TRUE(Eventually([&] {
    auto gpus = (*reader)->Read();
    return gpus.ok() && gpus->size() == 2 && !(*gpus)[1].healthy;
  }));
  auto gpus = (*reader)->Read();
  ASSERT_TRUE(gpus.ok());
  EXPECT_TRUE((*gpus)[0].healthy);
  EXPECT_EQ((*gpus)[1].uuid, Expected(1).uuid);
  bool logged = false;
  for (const std::string& m : Log()) logged |= m.find("XID 79 (GPU has fallen off the bus)") != std::string::npos;
  EXPECT_TRUE(logged);
}

TEST_F(FakeNvml, ApplicationXidLeavesTheGpuHealthy) {
  auto reader = GpuReader::Open(Options());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  for (unsigned long long xid : {13ULL, 31ULL, 43ULL, 45ULL, 68ULL}) inject_xid_(0, xid);
  ASSERT_TRUE(Eventually([&] { return pending_() == 0; }));
  // The last event is taken before it is handled: wait for its log line.
  ASSERT_TRUE(Eventually([&] {
    for (const std::string& m : Log()) {
      if (m.find("data 68") != std::string::npos) return true;
    }
    return false;
  }));
  auto gpus = (*reader)->Read();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(*gpus, (std::vector<core::GpuInfo>{Expected(0), Expected(1)}));
}

TEST_F(FakeNvml, LostGpuIsReportedUnhealthyThenRecovers) {
  auto reader = GpuReader::Open(Options());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_TRUE((*reader)->Read().ok());
  set_lost_(0, 1);
  auto gpus = (*reader)->Read();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  core::GpuInfo lost = Expected(0);
  lost.healthy = false;
  EXPECT_EQ(*gpus, (std::vector<core::GpuInfo>{lost, Expected(1)}));
  ASSERT_TRUE((*reader)->Read().ok());  // logged once, not per read
  int lines = 0;
  for (const std::string& m : Log()) lines += m.find("GPU 0 reported unhealthy") != std::string::npos;
  EXPECT_EQ(lines, 1);
  bool named = false;
  for (const std::string& m : Log()) named |= m.find("GPU is lost (NVML error 15)") != std::string::npos;
  EXPECT_TRUE(named);

  set_lost_(0, 0);
  gpus = (*reader)->Read();
  ASSERT_TRUE(gpus.ok());
  EXPECT_TRUE((*gpus)[0].healthy);
}

TEST_F(FakeNvml, GpuLostBeforeTheFirstReadIsLeftOut) {
  set_lost_(1, 1);
  auto reader = GpuReader::Open(Options());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto gpus = (*reader)->Read();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(*gpus, (std::vector<core::GpuInfo>{Expected(0)}));
}

TEST_F(FakeNvml, DestructorStopsTheHealthThreadPromptly) {
  auto options = Options();
  options.event_wait = milliseconds(200);
  auto reader = GpuReader::Open(options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(open_sets_(), 1u);
  std::this_thread::sleep_for(milliseconds(50));  // the thread is inside a wait
  const auto start = steady_clock::now();
  reader->reset();
  EXPECT_LT(steady_clock::now() - start, milliseconds(1500));
  EXPECT_EQ(open_sets_(), 0u);
}

TEST_F(FakeNvml, MissingLibraryGivesTheClearError) {
  GpuReaderOptions o;
  o.library = "/nonexistent/libnvidia-ml.so.1";
  auto reader = GpuReader::Open(o);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(reader.status().message().find("/nonexistent/libnvidia-ml.so.1 not found: is the NVIDIA driver "
                                           "installed? use --simulated-gpus for simulated mode"),
            std::string::npos)
      << reader.status().message();
}

// Run alone (its own ctest entry): once the fake is loaded, its soname
// libnvidia-ml.so.1 would satisfy the default name.
TEST(NoDriver, DefaultNameGivesTheClearError) {
  ASSERT_EQ(dlopen(kDefaultLibrary, RTLD_NOW | RTLD_NOLOAD), nullptr) << "run NoDriver.* alone";
  if (void* real = dlopen(kDefaultLibrary, RTLD_NOW | RTLD_LOCAL); real != nullptr) {
    dlclose(real);
    GTEST_SKIP() << "this machine has an NVIDIA driver";
  }
  auto source = node::NvmlGpuSource::Open(nullptr);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().message().rfind("libnvidia-ml.so.1 not found: is the NVIDIA driver installed? "
                                            "use --simulated-gpus for simulated mode",
                                            0),
            0u)
      << source.status().message();
}

TEST_F(FakeNvml, NodeSourceReadsAndValidates) {
  auto source = node::NvmlGpuSource::Open(nullptr, FakePath());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->Describe(), "NVML");
  auto gpus = (*source)->Read();
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_EQ(*gpus, (std::vector<core::GpuInfo>{Expected(0), Expected(1)}));
}

TEST_F(FakeNvml, LoadIsEachGpusMemoryInUseAndUtilization) {
  set_load_(0, 300, 42);
  set_load_(1, 5, -1);  // this one cannot say how busy it is
  auto source = node::NvmlGpuSource::Open(nullptr, FakePath());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto load = (*source)->ReadLoad();
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  ASSERT_EQ(load->size(), 2u);
  EXPECT_EQ((*load)[0].index, 0);
  EXPECT_EQ((*load)[0].memory_used_bytes, 300ull << 20);
  ASSERT_TRUE((*load)[0].utilization.has_value());
  EXPECT_DOUBLE_EQ(*(*load)[0].utilization, 0.42);
  EXPECT_EQ((*load)[1].memory_used_bytes, 5ull << 20);
  EXPECT_FALSE((*load)[1].utilization.has_value());
  // The driver's reserve is not in use by anyone: nvidia-smi leaves it out
  // (NVML v2), and so does the load (v1's used counts it).
  setenv("FAKE_NVML_RESERVED_MIB", "615", 1);
  load = (*source)->ReadLoad();
  unsetenv("FAKE_NVML_RESERVED_MIB");
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  EXPECT_EQ((*load)[0].memory_used_bytes, 300ull << 20);
  // A lost GPU is left out of the load (Read reports it unhealthy).
  set_lost_(1, 1);
  load = (*source)->ReadLoad();
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  ASSERT_EQ(load->size(), 1u);
  EXPECT_EQ((*load)[0].index, 0);
}

}  // namespace
}  // namespace tessera::nvml
