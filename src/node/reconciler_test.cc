// One reconciliation pass at a time against a fake API server and a fake
// kubelet pod-resources service on a socket in a temporary folder: what is
// counted, what is raised as an Event, and when a pass is skipped.
#include "node/reconciler.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "kube/fake_api.h"
#include "kube/paths.h"
#include "node/test_fixtures.h"
#include "podresources/v1/api.grpc.pb.h"

namespace tessera::node {
namespace {

using nlohmann::json;
using testing::AssignedPod;

// The kubelet's pod-resources List: one record per (pod, container, device IDs).
class FakePodResources final : public v1::PodResourcesLister::Service {
 public:
  void Add(const std::string& pod, const std::string& container, const std::vector<std::string>& ids) {
    auto* p = response_.add_pod_resources();
    p->set_namespace_("ns");
    p->set_name(pod);
    auto* c = p->add_containers();
    c->set_name(container);
    auto* d = c->add_devices();
    d->set_resource_name("tessera.io/gpu");
    for (const auto& id : ids) d->add_device_ids(id);
  }
  // Serves on `socket`; Add before, as List reads without a lock.
  bool Serve(const std::string& socket) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket, grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    return server_ != nullptr;
  }
  ~FakePodResources() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* response) override {
    *response = response_;
    return grpc::Status::OK;
  }

 private:
  v1::ListPodResourcesResponse response_;
  std::unique_ptr<grpc::Server> server_;
};

class ReconcilerTest : public ::testing::Test {
 protected:
  ReconcilerTest()
      : events_([this](const std::string& path, const json& body) { return api_.Create(path, body).status(); }, {},
                testing::Quiet()) {
    metrics_.mismatches = &mismatches_;
    metrics_.reconcile_runs = &runs_;
  }

  Reconciler Make() {
    ReconcilerOptions options;
    options.node = "n1";
    options.resource = "tessera.io/gpu";
    options.socket = dir_.path() + "/kubelet.sock";
    options.timeout = std::chrono::seconds(5);
    return Reconciler(options, api_, events_, metrics_, testing::Quiet());
  }
  std::vector<json> Events() {
    events_.FlushForTest();
    return api_.List(kube::EventsPath("ns")).value()["items"].get<std::vector<json>>();
  }

  kube::FakeApi api_;
  testing::TempDir dir_;
  EventRecorder events_;
  metrics::Counter mismatches_, runs_;
  NodeMetrics metrics_;
  FakePodResources kubelet_;
};

TEST_F(ReconcilerTest, AWrongGpuIsCountedAndRaisedOnce) {
  ASSERT_TRUE(api_.Upsert(kube::PodsPath("ns"), AssignedPod("right", "t", {{"main", 0, 4096, 30}})).ok());
  const std::string wrong_uid =
      api_.Upsert(kube::PodsPath("ns"), AssignedPod("wrong", "t", {{"main", 1, 4096, 30}})).value()["metadata"]["uid"];
  kubelet_.Add("right", "main", {"GPU-0-0"});
  kubelet_.Add("wrong", "main", {"GPU-0-1"});  // assigned GPU-1
  ASSERT_TRUE(kubelet_.Serve(dir_.path() + "/kubelet.sock"));
  Reconciler reconciler = Make();
  reconciler.Pass();
  EXPECT_EQ(runs_.Value(), 1u);
  EXPECT_EQ(mismatches_.Value(), 1u);
  std::vector<json> events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["reason"], kMismatchReason);
  EXPECT_EQ(events[0]["involvedObject"]["name"], "wrong");
  EXPECT_EQ(events[0]["involvedObject"]["uid"], wrong_uid);
  EXPECT_NE(events[0]["message"].get<std::string>().find("GPU-1"), std::string::npos) << events[0]["message"];

  // The same mismatch next pass: neither counted nor raised again.
  reconciler.Pass();
  EXPECT_EQ(runs_.Value(), 2u);
  EXPECT_EQ(mismatches_.Value(), 1u);
  EXPECT_EQ(Events().size(), 1u);
}

TEST_F(ReconcilerTest, APassIsSkippedWithoutTheKubeletOrTheApiServer) {
  Reconciler reconciler = Make();
  reconciler.Pass();  // no socket yet
  EXPECT_EQ(runs_.Value(), 0u);
  EXPECT_EQ(api_.CountCalls("LIST"), 0) << "the API server is not asked without a kubelet record";

  kubelet_.Add("p", "main", {"GPU-0-0"});
  ASSERT_TRUE(kubelet_.Serve(dir_.path() + "/kubelet.sock"));
  api_.SetHook([](const kube::FakeApi::Call&) { return Status(StatusCode::kUnavailable, "away"); });
  reconciler.Pass();
  EXPECT_EQ(runs_.Value(), 0u);
  EXPECT_EQ(mismatches_.Value(), 0u);
  api_.SetHook(nullptr);
  reconciler.Pass();  // the record's pod is not listed (deleted meanwhile): skipped, no mismatch
  EXPECT_EQ(runs_.Value(), 1u);
  EXPECT_EQ(mismatches_.Value(), 0u);
}

}  // namespace
}  // namespace tessera::node
