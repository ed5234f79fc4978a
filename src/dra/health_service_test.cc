// The DRA device-health stream: what one report says, and when a stream
// sends (at once, on a change, on the heartbeat, never after Shutdown).
#include "dra/health_service.h"

#include <gtest/gtest.h>

#include <thread>

#include "dra/test_gpus.h"
#include "node/test_fixtures.h"

namespace tessera::dra {
namespace {

using namespace std::chrono_literals;

class RecordingWriter final : public grpc::ServerWriterInterface<healthpb::NodeWatchResourcesResponse> {
 public:
  void SendInitialMetadata() override {}
  bool Write(const healthpb::NodeWatchResourcesResponse& msg, grpc::WriteOptions) override TESSERA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    reports_.push_back(msg);
    return !fail_;
  }
  void Fail() TESSERA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    fail_ = true;
  }
  std::vector<healthpb::NodeWatchResourcesResponse> Reports() const TESSERA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return reports_;
  }
  // Waits up to 5 s for at least `n` reports.
  bool WaitFor(size_t n) const {
    for (int i = 0; i < 500; ++i) {
      if (Reports().size() >= n) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

 private:
  mutable Mutex mu_;
  std::vector<healthpb::NodeWatchResourcesResponse> reports_ TESSERA_GUARDED_BY(mu_);
  bool fail_ TESSERA_GUARDED_BY(mu_) = false;
};

TEST(HealthReportTest, NamesEachGpuAsTheSliceDoesWithItsHealth) {
  auto gpus = testing::TwoGpus();
  gpus[1].healthy = false;
  const auto report = HealthReport("node-1", gpus, 1700000000);
  ASSERT_EQ(report.devices_size(), 2);
  EXPECT_EQ(report.devices(0).device().pool_name(), "node-1");
  EXPECT_EQ(report.devices(0).device().device_name(), "gpu-0");
  EXPECT_EQ(report.devices(0).health(), healthpb::HEALTHY);
  EXPECT_EQ(report.devices(0).message(), "");
  EXPECT_EQ(report.devices(0).last_updated_time(), 1700000000);
  EXPECT_EQ(report.devices(0).health_check_timeout_seconds(), kHealthTimeoutSeconds);
  EXPECT_EQ(report.devices(1).device().device_name(), "gpu-1");
  EXPECT_EQ(report.devices(1).health(), healthpb::UNHEALTHY);
  EXPECT_EQ(report.devices(1).message(), "GPU GPU-bbbb is unhealthy; it left the ResourceSlice");
}

TEST(DraHealthServiceTest, SendsAtOnceThenOnEachChangeAndEndsOnShutdown) {
  DraHealthService service("node-1", node::testing::Quiet(), 1h);
  service.SetGpus(testing::TwoGpus());
  RecordingWriter writer;
  grpc::Status result;
  std::thread stream([&] { result = service.Serve(nullptr, &writer); });
  ASSERT_TRUE(writer.WaitFor(1));
  service.SetGpus(testing::TwoGpus());  // the same GPUs: nothing to send
  auto changed = testing::TwoGpus();
  changed[0].healthy = false;
  service.SetGpus(changed);
  ASSERT_TRUE(writer.WaitFor(2));
  std::this_thread::sleep_for(50ms);
  service.Shutdown();
  stream.join();
  EXPECT_TRUE(result.ok());
  const auto reports = writer.Reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].devices(0).health(), healthpb::HEALTHY);
  EXPECT_EQ(reports[1].devices(0).health(), healthpb::UNHEALTHY);
  // A stream opened after Shutdown ends before it sends anything.
  RecordingWriter late;
  EXPECT_TRUE(service.Serve(nullptr, &late).ok());
  EXPECT_TRUE(late.Reports().empty());
}

TEST(DraHealthServiceTest, RepeatsTheReportOnTheHeartbeat) {
  DraHealthService service("node-1", node::testing::Quiet(), 50ms);
  service.SetGpus(testing::TwoGpus());
  RecordingWriter writer;
  std::thread stream([&] { (void)service.Serve(nullptr, &writer); });
  EXPECT_TRUE(writer.WaitFor(3));  // the first report and two beats, nothing changed
  service.Shutdown();
  stream.join();
}

TEST(DraHealthServiceTest, AFailedWriteEndsTheStreamCancelled) {
  DraHealthService service("node-1", node::testing::Quiet(), 1h);
  service.SetGpus(testing::TwoGpus());
  RecordingWriter writer;
  writer.Fail();
  EXPECT_EQ(service.Serve(nullptr, &writer).error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(writer.Reports().size(), 1u);
}

}  // namespace
}  // namespace tessera::dra
