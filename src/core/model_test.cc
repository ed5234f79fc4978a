#include "core/model.h"

#include <gtest/gtest.h>

namespace tessera::core {
namespace {

PodRequest OneGpu(int64_t mem, int64_t core, int count = 1) {
  PodRequest p;
  p.key = "default/p";
  p.containers.push_back({"main", count, mem, core, {}});
  return p;
}

TEST(ModelSelector, AllowsAndAvoids) {
  ModelSelector any;
  EXPECT_TRUE(any.Allows("T4"));
  ModelSelector only{{"A100", "H100"}, {}};
  EXPECT_TRUE(only.Allows("H100"));
  EXPECT_FALSE(only.Allows("T4"));
  ModelSelector avoid{{}, {"T4"}};
  EXPECT_FALSE(avoid.Allows("T4"));
  EXPECT_TRUE(avoid.Allows("A10"));
}

TEST(ValidateRequest, AcceptsSensibleShares) {
  EXPECT_TRUE(ValidateRequest(OneGpu(8192, 300)).ok());
  EXPECT_TRUE(ValidateRequest(OneGpu(0, 1000, 4)).ok());
  EXPECT_TRUE(ValidateRequest(OneGpu(1024, 0)).ok());
}

TEST(ValidateRequest, RejectsWithActionableMessages) {
  auto over = ValidateRequest(OneGpu(0, 1500));
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.message().find("over 100 percent"), std::string::npos) << over.message();
  EXPECT_FALSE(ValidateRequest(OneGpu(-1, 100)).ok());
  EXPECT_FALSE(ValidateRequest(OneGpu(0, 500, 2)).ok());
  EXPECT_FALSE(ValidateRequest(OneGpu(0, 0, 1)).ok());
  auto both = OneGpu(0, 100);
  both.containers[0].models = {{"T4"}, {"T4"}};
  EXPECT_FALSE(ValidateRequest(both).ok());
}

TEST(ValidateRequest, MpsGivesAContainerOneGpu) {
  auto pod = OneGpu(0, 1000, 2);
  pod.isolation = Isolation::kMps;
  auto st = ValidateRequest(pod);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("one GPU (one MPS daemon per GPU)"), std::string::npos) << st.message();
  auto one = OneGpu(4096, 300);
  one.isolation = Isolation::kMps;
  EXPECT_TRUE(ValidateRequest(one).ok());
  EXPECT_EQ(IsolationName(Isolation::kMps), "mps");
}

TEST(PodRequest, Totals) {
  auto p = OneGpu(0, 1000, 4);
  p.containers.push_back({"side", 1, 0, 250, {}});
  EXPECT_EQ(p.TotalGpuCount(), 5);
  EXPECT_EQ(p.TotalCoreMilli(), 4250);
}

}  // namespace
}  // namespace tessera::core
