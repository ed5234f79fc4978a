// The informer's relist logic (what a 410 makes it deliver) is the pure
// DiffStore; the informer's threads and watches are exercised against the
// real API server in tests/integration/kube_client_test.cc.
#include "kube/informer.h"

#include <gtest/gtest.h>

#include "kube/client.h"

namespace tessera::kube {
namespace {

nlohmann::json Obj(const std::string& ns, const std::string& name, const std::string& rv) {
  nlohmann::json meta = {{"name", name}, {"resourceVersion", rv}};
  if (!ns.empty()) meta["namespace"] = ns;
  return {{"metadata", meta}};
}

TEST(InformerTest, KeyOfUsesNamespaceWhenPresent) {
  EXPECT_EQ(Informer::KeyOf(Obj("ns", "p", "1")), "ns/p");
  EXPECT_EQ(Informer::KeyOf(Obj("", "node-a", "1")), "node-a");
}

TEST(InformerTest, DiffStoreGivesDeletesUpdatesAndAdds) {
  std::map<std::string, nlohmann::json> store = {
      {"ns/kept", Obj("ns", "kept", "5")}, {"ns/changed", Obj("ns", "changed", "6")}, {"ns/gone", Obj("ns", "gone", "7")}};
  const std::vector<nlohmann::json> fresh = {Obj("ns", "kept", "5"), Obj("ns", "changed", "9"), Obj("ns", "new", "10")};
  const StoreDelta delta = DiffStore(store, fresh);
  ASSERT_EQ(delta.deleted.size(), 1u);
  EXPECT_EQ(delta.deleted[0]["metadata"]["name"], "gone");
  ASSERT_EQ(delta.updated.size(), 1u);
  EXPECT_EQ(delta.updated[0].first["metadata"]["resourceVersion"], "6");
  EXPECT_EQ(delta.updated[0].second["metadata"]["resourceVersion"], "9");
  ASSERT_EQ(delta.added.size(), 1u);
  EXPECT_EQ(delta.added[0]["metadata"]["name"], "new");
}

TEST(InformerTest, DiffStoreOfEqualListsIsEmpty) {
  std::map<std::string, nlohmann::json> store = {{"a", Obj("", "a", "1")}};
  const StoreDelta delta = DiffStore(store, {Obj("", "a", "1")});
  EXPECT_TRUE(delta.added.empty());
  EXPECT_TRUE(delta.updated.empty());
  EXPECT_TRUE(delta.deleted.empty());
}

TEST(InformerTest, TheStoreKeepsObjectsWithoutManagedFields) {
  nlohmann::json pod = Obj("ns", "p", "7");
  pod["metadata"]["labels"] = {{"app", "x"}};
  pod["metadata"]["managedFields"] = nlohmann::json::array(
      {{{"manager", "kubectl"}, {"operation", "Update"}, {"fieldsV1", {{"f:spec", nlohmann::json::object()}}}}});
  pod["spec"] = {{"nodeName", "n1"}};
  nlohmann::json expected = pod;
  expected["metadata"].erase("managedFields");
  DropManagedFields(pod);
  EXPECT_EQ(pod, expected);  // everything else as it was
  // Nothing to drop, or not an object: the same value.
  for (nlohmann::json same : {expected, nlohmann::json("text"), nlohmann::json{{"metadata", "not an object"}}}) {
    const nlohmann::json before = same;
    DropManagedFields(same);
    EXPECT_EQ(same, before);
  }
}

TEST(InformerTest, AddHandlersAfterStartOrTwiceStartedFails) {
  ClientConfig config;
  config.server = "https://127.0.0.1:1";
  Client client(config);
  Informer informer(client, "/api/v1/pods");
  ASSERT_TRUE(informer.AddHandlers({}).ok());
  EXPECT_FALSE(informer.HasSynced());
  informer.Stop();
  EXPECT_FALSE(informer.AddHandlers({}).ok());
}

TEST(InformerTest, ResourceVersionAtLeastComparesDecimalRevisions) {
  EXPECT_TRUE(ResourceVersionAtLeast("10", "9"));
  EXPECT_TRUE(ResourceVersionAtLeast("10", "10"));
  EXPECT_FALSE(ResourceVersionAtLeast("9", "10"));  // numeric, not lexicographic
  EXPECT_TRUE(ResourceVersionAtLeast("18446744073709551615", "18446744073709551614"));
  EXPECT_TRUE(ResourceVersionAtLeast("0", "0"));
}

TEST(InformerTest, ResourceVersionAtLeastEmptyWantIsReachedUnreadableNeverIs) {
  EXPECT_TRUE(ResourceVersionAtLeast("", ""));
  EXPECT_TRUE(ResourceVersionAtLeast("7", ""));
  EXPECT_FALSE(ResourceVersionAtLeast("", "7"));
  EXPECT_FALSE(ResourceVersionAtLeast("abc", "7"));
  EXPECT_FALSE(ResourceVersionAtLeast("7", "abc"));
  EXPECT_FALSE(ResourceVersionAtLeast("-8", "7"));
  EXPECT_FALSE(ResourceVersionAtLeast("08", "7"));  // not how the API server writes one
  EXPECT_FALSE(ResourceVersionAtLeast("123456789012345678901", "7"));  // beyond uint64
}

TEST(InformerTest, WaitForResourceVersionTimesOutUntilReached) {
  ClientConfig config;
  config.server = "https://127.0.0.1:1";
  Client client(config);
  Informer informer(client, "/api/v1/pods");  // never started: its version stays ""
  EXPECT_TRUE(informer.WaitForResourceVersion("", std::chrono::milliseconds(0)));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(informer.WaitForResourceVersion("5", std::chrono::milliseconds(50)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
  informer.Stop();
  EXPECT_FALSE(informer.WaitForResourceVersion("", std::chrono::milliseconds(0)));  // stopped
}

}  // namespace
}  // namespace tessera::kube
