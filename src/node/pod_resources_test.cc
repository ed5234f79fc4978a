#include "node/pod_resources.h"

#include <gtest/gtest.h>

namespace tessera::node {
namespace {

TEST(PodResourcesTest, KeepsOurResourceOnly) {
  v1::ListPodResourcesResponse response;
  auto* pod = response.add_pod_resources();
  pod->set_name("p");
  pod->set_namespace_("ns");
  auto* main = pod->add_containers();
  main->set_name("main");
  auto* ours = main->add_devices();
  ours->set_resource_name("tessera.io/gpu");
  ours->add_device_ids("GPU-a-0");
  ours->add_device_ids("GPU-b-1");
  auto* theirs = main->add_devices();
  theirs->set_resource_name("nvidia.com/gpu");
  theirs->add_device_ids("GPU-x");
  auto* sidecar = pod->add_containers();
  sidecar->set_name("sidecar");
  sidecar->add_devices()->set_resource_name("example.com/nic");

  auto records = RecordsFromResponse(response, "tessera.io/gpu");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0], (KubeletRecord{"ns", "p", "main", {"GPU-a-0", "GPU-b-1"}}));
}

TEST(PodResourcesTest, AnAbsentKubeletIsAnError) {
  auto records = ListKubeletRecords("/nonexistent/pod-resources.sock", "tessera.io/gpu", std::chrono::milliseconds(200));
  ASSERT_FALSE(records.ok());
  EXPECT_NE(records.status().message().find("/nonexistent/pod-resources.sock"), std::string::npos);
}

}  // namespace
}  // namespace tessera::node
