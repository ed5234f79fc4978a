#include "kube/paths.h"

#include <gtest/gtest.h>

namespace tessera::kube {
namespace {

TEST(EscapeComponentTest, KeepsUnreservedEscapesTheRest) {
  EXPECT_EQ(EscapeComponent("abc-XYZ_0.9~"), "abc-XYZ_0.9~");
  EXPECT_EQ(EscapeComponent("a b/c?d&e=f%"), "a%20b%2Fc%3Fd%26e%3Df%25");
  EXPECT_EQ(EscapeComponent("app in (a,b)"), "app%20in%20%28a%2Cb%29");
  EXPECT_EQ(EscapeComponent("\xc3\xa9"), "%C3%A9");
  EXPECT_EQ(EscapeComponent(""), "");
}

TEST(AppendQueryTest, ChoosesSeparator) {
  std::string p = AppendQuery("/api/v1/pods", "labelSelector", "app=x,tier!=db");
  EXPECT_EQ(p, "/api/v1/pods?labelSelector=app%3Dx%2Ctier%21%3Ddb");
  EXPECT_EQ(AppendQuery(p, "limit", "7"), p + "&limit=7");
  EXPECT_EQ(AppendQuery("/x", "continue", ""), "/x?continue=");
}

TEST(PathsTest, ResourcePaths) {
  EXPECT_EQ(PodPath("default", "p1"), "/api/v1/namespaces/default/pods/p1");
  EXPECT_EQ(PodsPath(""), "/api/v1/pods");
  EXPECT_EQ(PodsPath("ns"), "/api/v1/namespaces/ns/pods");
  EXPECT_EQ(NodePath("gpu-node/1"), "/api/v1/nodes/gpu-node%2F1");
  EXPECT_EQ(NamespacePath("t"), "/api/v1/namespaces/t");
  EXPECT_EQ(LeasePath("kube-system", "tessera"), "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/tessera");
  EXPECT_EQ(LeasesPath(""), "/apis/coordination.k8s.io/v1/leases");
}

}  // namespace
}  // namespace tessera::kube
