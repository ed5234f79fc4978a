#include "node/gpu_inventory.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>

namespace tessera::node {
namespace {

std::shared_ptr<spdlog::logger> Quiet() {
  return std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
}

// Hands out what the test puts in `next`, and a load of 42 bytes.
class ScriptedSource final : public GpuSource {
 public:
  explicit ScriptedSource(Result<std::vector<core::GpuInfo>>* next) : next_(next) {}
  Result<std::vector<core::GpuInfo>> Read() override { return *next_; }
  std::string Describe() const override { return "scripted"; }
  Result<std::vector<GpuLoad>> ReadLoad() override {
    if (!load_ok) return Internal("the device went away");
    GpuLoad load;
    load.memory_used_bytes = 42;
    return std::vector<GpuLoad>{load};
  }
  bool load_ok = true;

 private:
  Result<std::vector<core::GpuInfo>>* next_;
};

class GpuInventoryTest : public ::testing::Test {
 protected:
  GpuInventoryTest() {
    auto source = std::make_unique<ScriptedSource>(&next_);
    source_ = source.get();
    inventory_ = std::make_unique<GpuInventory>(
        GpuInventoryOptions{"n1", 4}, std::move(source), nullptr,
        [this](const std::vector<core::GpuInfo>& gpus) {
          if (refuse_) return InvalidArgument("refused");
          offered_.push_back(gpus);
          return Status::Ok();
        },
        [this](const std::vector<core::GpuInfo>& gpus) -> Result<bool> {
          if (!publish_ok_) return Status(StatusCode::kUnavailable, "API server away");
          published_.push_back(gpus);
          return true;
        },
        Quiet());
  }

  static std::vector<core::GpuInfo> Gpus(bool healthy) { return {{0, "GPU-a", "T4", 15360, 40, 0, healthy}}; }

  Result<std::vector<core::GpuInfo>> next_ = Gpus(true);
  ScriptedSource* source_ = nullptr;
  bool refuse_ = false, publish_ok_ = true;
  std::vector<std::vector<core::GpuInfo>> offered_, published_;
  std::unique_ptr<GpuInventory> inventory_;
};

TEST_F(GpuInventoryTest, StartOffersKeepsAndPublishesTheFirstRead) {
  ASSERT_TRUE(inventory_->Start().ok());
  ASSERT_EQ(offered_.size(), 1u);
  ASSERT_EQ(published_.size(), 1u);
  EXPECT_EQ(inventory_->Current(), offered_[0]);
  EXPECT_EQ(offered_[0][0].max_sharers, 4);  // the slot count
  EXPECT_FALSE(offered_[0][0].mps);          // no MPS on this node
  inventory_->Resync();                      // nothing changed: nothing sent
  EXPECT_EQ(offered_.size(), 1u);
  EXPECT_EQ(published_.size(), 1u);
}

TEST_F(GpuInventoryTest, StartFailsWhenTheSourceOrTheOfferFails) {
  next_ = Result<std::vector<core::GpuInfo>>(NotFound("cannot read GPU file"));
  EXPECT_EQ(inventory_->Start().code(), StatusCode::kNotFound);
  next_ = Gpus(true);
  refuse_ = true;
  EXPECT_FALSE(inventory_->Start().ok());
  EXPECT_TRUE(inventory_->Current().empty());
  EXPECT_TRUE(published_.empty());
}

TEST_F(GpuInventoryTest, ChangesAreOfferedAndPublishedAndAFailedReadKeepsTheLast) {
  ASSERT_TRUE(inventory_->Start().ok());
  next_ = Gpus(false);
  inventory_->Resync();
  ASSERT_EQ(published_.size(), 2u);
  EXPECT_FALSE(published_[1][0].healthy);
  next_ = Result<std::vector<core::GpuInfo>>(Internal("NVML went away"));
  inventory_->Resync();
  EXPECT_EQ(inventory_->Current().size(), 1u);
  EXPECT_FALSE(inventory_->Current()[0].healthy);
  EXPECT_EQ(published_.size(), 2u);
}

TEST_F(GpuInventoryTest, ARefusedInventoryIsNeitherKeptNorPublished) {
  ASSERT_TRUE(inventory_->Start().ok());
  refuse_ = true;
  next_ = Gpus(false);
  inventory_->Resync();
  EXPECT_TRUE(inventory_->Current()[0].healthy);
  EXPECT_EQ(published_.size(), 1u);
  refuse_ = false;
  inventory_->Resync();  // offered again
  EXPECT_FALSE(inventory_->Current()[0].healthy);
  EXPECT_EQ(published_.size(), 2u);
}

TEST_F(GpuInventoryTest, AFailedPublicationIsRetriedWithoutAChange) {
  publish_ok_ = false;
  ASSERT_TRUE(inventory_->Start().ok());
  EXPECT_TRUE(published_.empty());
  publish_ok_ = true;
  inventory_->Resync();
  EXPECT_EQ(published_.size(), 1u);
}

TEST_F(GpuInventoryTest, LoadPassesThroughAndItsErrorsNameTheSource) {
  auto load = inventory_->ReadLoad();
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  EXPECT_EQ(load->at(0).memory_used_bytes, 42u);
  source_->load_ok = false;
  load = inventory_->ReadLoad();
  ASSERT_FALSE(load.ok());
  EXPECT_NE(load.status().message().find("GPU load from scripted unavailable"), std::string::npos);
  EXPECT_EQ(inventory_->Describe(), "scripted");
}

}  // namespace
}  // namespace tessera::node
