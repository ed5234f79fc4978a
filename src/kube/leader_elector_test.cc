#include "kube/leader_elector.h"

#include <gtest/gtest.h>

namespace tessera::kube {
namespace {

using std::chrono::system_clock;

system_clock::time_point At(int64_t micros) { return system_clock::time_point(std::chrono::microseconds(micros)); }

TEST(FormatMicroTimeTest, Rfc3339WithMicroseconds) {
  // 2026-01-02T03:04:05Z is 1767323045 s after the epoch.
  EXPECT_EQ(FormatMicroTime(At(1767323045LL * 1000000)), "2026-01-02T03:04:05.000000Z");
  EXPECT_EQ(FormatMicroTime(At(1767323045LL * 1000000 + 123456)), "2026-01-02T03:04:05.123456Z");
  EXPECT_EQ(FormatMicroTime(At(0)), "1970-01-01T00:00:00.000000Z");
}

TEST(NextLeaseTest, CreatesWhenAbsent) {
  auto lease = NextLease(nullptr, "kube-system", "tessera", "a", 15, true, At(0));
  ASSERT_TRUE(lease);
  EXPECT_EQ((*lease)["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ((*lease)["kind"], "Lease");
  EXPECT_EQ((*lease)["metadata"]["name"], "tessera");
  EXPECT_EQ((*lease)["metadata"]["namespace"], "kube-system");
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "a");
  EXPECT_EQ((*lease)["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 0);
  EXPECT_EQ((*lease)["spec"]["acquireTime"], "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ((*lease)["spec"]["renewTime"], "1970-01-01T00:00:00.000000Z");
}

nlohmann::json Held(const std::string& holder) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata", {{"name", "tessera"}, {"namespace", "kube-system"}, {"resourceVersion", "42"}}},
          {"spec",
           {{"holderIdentity", holder},
            {"leaseDurationSeconds", 15},
            {"acquireTime", "2026-01-01T00:00:00.000000Z"},
            {"renewTime", "2026-01-01T00:00:10.000000Z"},
            {"leaseTransitions", 3}}}};
}

TEST(NextLeaseTest, RenewKeepsAcquireTimeAndResourceVersion) {
  auto lease = NextLease(Held("a"), "kube-system", "tessera", "a", 15, /*expired=*/false, At(5000000));
  ASSERT_TRUE(lease);
  EXPECT_EQ((*lease)["metadata"]["resourceVersion"], "42");  // optimistic concurrency
  EXPECT_EQ((*lease)["spec"]["acquireTime"], "2026-01-01T00:00:00.000000Z");
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 3);
  EXPECT_EQ((*lease)["spec"]["renewTime"], "1970-01-01T00:00:05.000000Z");
}

TEST(NextLeaseTest, OthersLeaseOnlyWhenExpiredOrReleased) {
  EXPECT_FALSE(NextLease(Held("b"), "kube-system", "tessera", "a", 15, /*expired=*/false, At(0)));
  for (const auto& current : {Held("b"), Held("")}) {
    auto lease = NextLease(current, "kube-system", "tessera", "a", 15, /*expired=*/true, At(7000000));
    ASSERT_TRUE(lease);
    EXPECT_EQ((*lease)["spec"]["holderIdentity"], "a");
    EXPECT_EQ((*lease)["spec"]["acquireTime"], "1970-01-01T00:00:07.000000Z");
    EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 4);
    EXPECT_EQ((*lease)["metadata"]["resourceVersion"], "42");
  }
  // A released lease (holder "") may be taken even if not yet timed out.
  EXPECT_TRUE(NextLease(Held(""), "kube-system", "tessera", "a", 15, /*expired=*/false, At(0)));
}

TEST(LeaderElectorTest, StartValidatesConfig) {
  ClientConfig cc;
  cc.server = "https://127.0.0.1:1";
  Client client(cc);
  LeaderElector missing(client, {});
  EXPECT_EQ(missing.Start().code(), StatusCode::kInvalidArgument);
  LeaderElectionConfig bad;
  bad.lease_namespace = "ns";
  bad.name = "n";
  bad.identity = "a";
  bad.renew_deadline = bad.lease_duration;
  LeaderElector wrong_order(client, bad);
  EXPECT_EQ(wrong_order.Start().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(wrong_order.IsLeader());
}

}  // namespace
}  // namespace tessera::kube
