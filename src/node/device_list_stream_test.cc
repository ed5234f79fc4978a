// DeviceListStream: ListAndWatch streams served on threads of their own into
// a recording writer (no socket), as gRPC's threads would serve them.
#include "node/device_list_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "node/test_fixtures.h"

namespace tessera::node {
namespace {

using testing::WaitUntil;

// Records what a stream writes; Write fails once `fail` is set.
class RecordingWriter final : public grpc::ServerWriterInterface<v1beta1::ListAndWatchResponse> {
 public:
  void SendInitialMetadata() override {}
  bool Write(const v1beta1::ListAndWatchResponse& msg, grpc::WriteOptions) override TESSERA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    lists_.push_back(msg);
    return !fail_;
  }

  void Fail() TESSERA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    fail_ = true;
  }
  size_t count() const TESSERA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return lists_.size();
  }
  // The device IDs of list `i`.
  std::vector<std::string> Ids(size_t i) const TESSERA_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    std::vector<std::string> out;
    for (const auto& d : lists_.at(i).devices()) out.push_back(d.id());
    return out;
  }

 private:
  mutable Mutex mu_;
  std::vector<v1beta1::ListAndWatchResponse> lists_ TESSERA_GUARDED_BY(mu_);
  bool fail_ TESSERA_GUARDED_BY(mu_) = false;
};

// One stream served on its own thread until it ends (a test that fails
// before ending it shuts `devices` down, so the thread is joined).
class Stream {
 public:
  explicit Stream(DeviceListStream& devices)
      : devices_(devices), thread_([this] {
          grpc::Status st = devices_.Serve(nullptr, &writer_);
          code_ = st.error_code();
          done_ = true;
        }) {}
  ~Stream() {
    if (!done_) devices_.Shutdown();
    thread_.join();
  }

  RecordingWriter& writer() { return writer_; }
  bool done() const { return done_; }
  grpc::StatusCode code() const { return code_; }

 private:
  DeviceListStream& devices_;
  RecordingWriter writer_;
  std::atomic<bool> done_{false};
  std::atomic<grpc::StatusCode> code_{grpc::StatusCode::UNKNOWN};
  std::thread thread_;  // last: starts once the rest is built
};

std::vector<Slot> Slots(int n, bool healthy = true) {
  std::vector<Slot> out;
  for (int k = 0; k < n; ++k) out.push_back(Slot{SlotId("GPU-0", k), "GPU-0", k, 1, healthy});
  return out;
}

TEST(DeviceListTest, OneDevicePerSlotWithHealthAndNumaNode) {
  std::vector<Slot> slots = Slots(2);
  slots[1].healthy = false;
  slots[1].numa_node = -1;
  v1beta1::ListAndWatchResponse list = DeviceList(slots);
  ASSERT_EQ(list.devices_size(), 2);
  EXPECT_EQ(list.devices(0).id(), "GPU-0-0");
  EXPECT_EQ(list.devices(0).health(), kHealthy);
  ASSERT_EQ(list.devices(0).topology().nodes_size(), 1);
  EXPECT_EQ(list.devices(0).topology().nodes(0).id(), 1);
  EXPECT_EQ(list.devices(1).health(), kUnhealthy);
  EXPECT_FALSE(list.devices(1).has_topology());  // NUMA node unknown
}

TEST(DeviceListStreamTest, PublishSaysWhetherTheListChanged) {
  DeviceListStream devices("tessera.io/gpu", "slot", testing::Quiet());
  EXPECT_TRUE(devices.Devices().empty());
  EXPECT_TRUE(devices.Publish(Slots(2)));
  EXPECT_FALSE(devices.Publish(Slots(2)));
  EXPECT_TRUE(devices.Publish(Slots(2, /*healthy=*/false)));  // health is part of the list
  EXPECT_EQ(devices.Devices(), Slots(2, false));
}

TEST(DeviceListStreamTest, EveryOpenStreamSendsTheListAtOnceThenEachChange) {
  DeviceListStream devices("tessera.io/gpu", "slot", testing::Quiet());
  devices.Publish(Slots(2));
  Stream a(devices), b(devices);
  ASSERT_TRUE(WaitUntil([&] { return a.writer().count() == 1 && b.writer().count() == 1; }));
  EXPECT_EQ(a.writer().Ids(0), (std::vector<std::string>{"GPU-0-0", "GPU-0-1"}));

  devices.Publish(Slots(3));
  ASSERT_TRUE(WaitUntil([&] { return a.writer().count() == 2 && b.writer().count() == 2; }));
  EXPECT_EQ(b.writer().Ids(1), (std::vector<std::string>{"GPU-0-0", "GPU-0-1", "GPU-0-2"}));

  // The same list again sends nothing.
  devices.Publish(Slots(3));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(a.writer().count(), 2u);
  devices.Shutdown();
}

TEST(DeviceListStreamTest, EndStreamsEndsTheOpenOnesOnly) {
  DeviceListStream devices("aliyun.com/gpu-mem", "GiB unit", testing::Quiet());
  devices.Publish(Slots(1));
  {
    Stream old(devices);
    ASSERT_TRUE(WaitUntil([&] { return old.writer().count() == 1; }));
    devices.EndStreams();
    ASSERT_TRUE(WaitUntil([&] { return old.done(); }));
    EXPECT_EQ(old.code(), grpc::StatusCode::OK);
  }
  // A stream opened after it (the kubelet's, once served anew) runs as usual.
  Stream fresh(devices);
  ASSERT_TRUE(WaitUntil([&] { return fresh.writer().count() == 1; }));
  devices.Publish(Slots(2));
  ASSERT_TRUE(WaitUntil([&] { return fresh.writer().count() == 2; }));
  EXPECT_FALSE(fresh.done());
  devices.Shutdown();
  ASSERT_TRUE(WaitUntil([&] { return fresh.done(); }));
  EXPECT_EQ(fresh.code(), grpc::StatusCode::OK);
}

TEST(DeviceListStreamTest, ShutdownEndsEveryStreamForGood) {
  DeviceListStream devices("tessera.io/gpu", "slot", testing::Quiet());
  devices.Publish(Slots(1));
  {
    Stream open(devices);
    ASSERT_TRUE(WaitUntil([&] { return open.writer().count() == 1; }));
    devices.Shutdown();
    ASSERT_TRUE(WaitUntil([&] { return open.done(); }));
    EXPECT_EQ(open.code(), grpc::StatusCode::OK);
  }
  // Later streams end before sending anything.
  Stream late(devices);
  ASSERT_TRUE(WaitUntil([&] { return late.done(); }));
  EXPECT_EQ(late.code(), grpc::StatusCode::OK);
  EXPECT_EQ(late.writer().count(), 0u);
}

TEST(DeviceListStreamTest, AFailedWriteEndsTheStreamAsCancelled) {
  DeviceListStream devices("tessera.io/gpu", "slot", testing::Quiet());
  devices.Publish(Slots(1));
  Stream gone(devices);
  ASSERT_TRUE(WaitUntil([&] { return gone.writer().count() == 1; }));
  gone.writer().Fail();  // the kubelet went away
  devices.Publish(Slots(2));
  ASSERT_TRUE(WaitUntil([&] { return gone.done(); }));
  EXPECT_EQ(gone.code(), grpc::StatusCode::CANCELLED);
  devices.Shutdown();
}

}  // namespace
}  // namespace tessera::node
