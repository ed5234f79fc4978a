#include "node/slots.h"

#include <gtest/gtest.h>

namespace tessera::node {
namespace {

TEST(SlotsTest, IdsAreUuidDashIndex) {
  EXPECT_EQ(SlotId("GPU-1234", 3), "GPU-1234-3");
  auto uuid = SlotGpu("GPU-ab12-cd34-7");
  ASSERT_TRUE(uuid.ok());
  EXPECT_EQ(*uuid, "GPU-ab12-cd34");
  EXPECT_EQ(*SlotGpu(SlotId("GPU-a-b-c-d-e", 12)), "GPU-a-b-c-d-e");
}

TEST(SlotsTest, MalformedIdsAreRejected) {
  EXPECT_FALSE(SlotGpu("GPU1234").ok());
  EXPECT_FALSE(SlotGpu("GPU-12ab-x").ok());
  EXPECT_FALSE(SlotGpu("GPU-").ok());
  EXPECT_FALSE(SlotGpu("-3").ok());
}

TEST(SlotsTest, SlotsForCarryHealthAndNuma) {
  std::vector<core::GpuInfo> gpus = {{0, "GPU-a", "A100", 81920, 108, 0, true},
                                     {1, "GPU-b", "A100", 81920, 108, 1, false}};
  auto slots = SlotsFor(gpus, 2);
  ASSERT_TRUE(slots.ok());
  ASSERT_EQ(slots->size(), 4u);
  EXPECT_EQ((*slots)[0], (Slot{"GPU-a-0", "GPU-a", 0, 0, true}));
  EXPECT_EQ((*slots)[3], (Slot{"GPU-b-1", "GPU-b", 1, 1, false}));
}

TEST(SlotsTest, SlotsForRejectsBadInput) {
  std::vector<core::GpuInfo> gpus = {{0, "GPU-a", "A100", 1, 1, 0, true}};
  EXPECT_FALSE(SlotsFor(gpus, 0).ok());
  gpus[0].uuid = "";
  EXPECT_FALSE(SlotsFor(gpus, 1).ok());
  gpus[0].uuid = std::string(62, 'x');
  auto too_long = SlotsFor(gpus, 1);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("63"), std::string::npos);
}

}  // namespace
}  // namespace tessera::node
