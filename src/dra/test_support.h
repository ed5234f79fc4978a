// What the DRA unit and integration tests share beside test_gpus.h's GPUs
// and claims (test code only): the claims collection of namespace "ns" in
// the fake API server, plugin options for node-1 under a temporary folder,
// and a fixture holding both.
//
//   class MyTest : public dra::testing::PluginTest {};
//   TEST_F(MyTest, X) { AddClaim(testing::Claim("ns", "c", "uid", {...})); DraService s(api_, options_, Quiet()); }
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "dra/kubelet_plugin.h"
#include "dra/test_gpus.h"
#include "kube/fake_api.h"
#include "node/test_fixtures.h"

namespace tessera::dra::testing {

using node::testing::Quiet;
using node::testing::TempDir;

// Where the tests' ResourceClaims (namespace "ns") live in kube::FakeApi.
inline const std::string kClaims = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims";

// Options of node-1's plugin with every folder under `dir`: the kubelet's
// plugin registry and plugins folders, the CDI folder and the region root.
inline KubeletPluginOptions NodeOneOptions(const std::string& dir) {
  KubeletPluginOptions options;
  options.node = "node-1";
  options.registry_dir = dir + "/registry";
  options.plugins_dir = dir + "/plugins";
  options.cdi_dir = dir + "/cdi";
  options.paths.region_root_host = dir + "/regions";
  return options;
}

// A temporary folder, a fake API server and node-1's options in that folder.
class PluginTest : public ::testing::Test {
 protected:
  // Stores `claim` (a ResourceClaim of namespace "ns") in the fake API server.
  void AddClaim(const nlohmann::json& claim) { ASSERT_TRUE(api_.Upsert(kClaims, claim).ok()); }

  TempDir dir_;
  kube::FakeApi api_;
  KubeletPluginOptions options_ = NodeOneOptions(dir_.path());
};

}  // namespace tessera::dra::testing
