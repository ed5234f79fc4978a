#include "nvml/xid.h"

#include <gtest/gtest.h>
#include <nvml.h>

namespace tessera::nvml {
namespace {

TEST(Xid, LostSetIsTheDocumentedOne) {
  std::vector<uint64_t> xids;
  for (const LostXid& l : GpuLostXids()) xids.push_back(l.xid);
  EXPECT_EQ(xids, (std::vector<uint64_t>{48, 62, 64, 74, 79, 95, 119, 120}));
  for (uint64_t x : xids) EXPECT_TRUE(IsGpuLostXid(x)) << x;
}

TEST(Xid, ApplicationAndRecoverableXidsLeaveTheGpuHealthy) {
  for (uint64_t x : {13, 31, 43, 45, 68, 63, 92, 94, 999, 0}) {
    EXPECT_FALSE(IsGpuLostXid(x)) << x;
    EXPECT_EQ(XidReason(x), "application or recoverable error");
  }
  EXPECT_EQ(XidReason(79), "GPU has fallen off the bus");
}

TEST(Xid, LostReasonReadsTheEvent) {
  EXPECT_EQ(LostReason(nvmlEventTypeXidCriticalError, 79), "XID 79 (GPU has fallen off the bus)");
  EXPECT_EQ(LostReason(nvmlEventTypeXidCriticalError, 13), std::nullopt);
  EXPECT_EQ(LostReason(nvmlEventTypeDoubleBitEccError, 0), "double-bit ECC error");
  EXPECT_EQ(LostReason(nvmlEventTypeSingleBitEccError, 0), std::nullopt);
  // An XID number under another event type is not an XID.
  EXPECT_EQ(LostReason(nvmlEventTypePState, 79), std::nullopt);
}

}  // namespace
}  // namespace tessera::nvml
