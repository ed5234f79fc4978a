// The claim advisor: which claims no GPU of the driver can ever take, the
// message that says why, and the Events it posts (once per pod, only for
// unschedulable pods, nothing read when no pod needs it).
#include "scheduler/claim_advisor.h"

#include <gtest/gtest.h>

#include <thread>

#include "kube/events.h"
#include "kube/fake_api.h"

namespace tessera::scheduler {
namespace {

using nlohmann::json;

const std::string kApi = "/apis/resource.k8s.io/v1";

json Slice(const std::string& node, const std::vector<std::pair<std::string, std::string>>& devices,
           const std::string& driver = core::kDraDriver) {
  json list = json::array();
  for (const auto& [name, memory] : devices) {
    list.push_back({{"name", name},
                    {"capacity", {{"memory", {{"value", memory}}}, {"compute", {{"value", "100"}}}}}});
  }
  return {{"metadata", {{"name", node + "-" + driver}}},
          {"spec", {{"driver", driver}, {"nodeName", node}, {"pool", {{"name", node}}}, {"devices", list}}}};
}

json DeviceClass(const std::string& name, const std::string& expression) {
  return {{"metadata", {{"name", name}}}, {"spec", {{"selectors", {{{"cel", {{"expression", expression}}}}}}}}};
}

json Request(const std::string& memory, const std::string& compute, int count = 1,
             const std::string& device_class = "gpu.tessera.io") {
  json capacity = json::object();
  if (!memory.empty()) capacity["memory"] = memory;
  if (!compute.empty()) capacity["compute"] = compute;
  return {{"deviceClassName", device_class}, {"count", count}, {"capacity", {{"requests", capacity}}}};
}

json Claim(const std::string& name, const json& requests) {
  return {{"metadata", {{"namespace", "ns"}, {"name", name}}}, {"spec", {{"devices", {{"requests", requests}}}}}};
}

const std::set<std::string> kOurs = {"gpu.tessera.io"};
const std::string kClaims = kApi + "/namespaces/ns/resourceclaims";

json OurClass() { return DeviceClass("gpu.tessera.io", "device.driver == \"gpu.tessera.io\""); }
json OneGpuClaim(const std::string& name, const std::string& memory, const std::string& compute) {
  return Claim(name, {{{"name", "gpu"}, {"exactly", Request(memory, compute)}}});
}

DraGpus TwoNodes() {
  return DraGpusFrom({Slice("n1", {{"gpu-0", "40Gi"}, {"gpu-1", "40Gi"}}), Slice("n2", {{"gpu-0", "80Gi"}}),
                      Slice("n3", {{"gpu-0", "999Gi"}}, "other.example.com")},
                     core::kDraDriver);
}

TEST(ClaimAdvisorTest, ReadsTheDriversGpusFromTheSlices) {
  const DraGpus gpus = TwoNodes();
  EXPECT_EQ(gpus.devices, 3);
  EXPECT_EQ(gpus.largest_memory_mib, 81920);
  EXPECT_EQ(gpus.largest, "gpu-0 on node n2");
  EXPECT_EQ(gpus.compute_percent, 100);
  EXPECT_EQ(gpus.most_on_one_node, 2);
}

TEST(ClaimAdvisorTest, TheClassesOfTheDriverAreThoseWhoseSelectorNamesIt) {
  EXPECT_EQ(DriverClasses({DeviceClass("gpu.tessera.io", "device.driver == \"gpu.tessera.io\""),
                           DeviceClass("big", "device.driver == \"gpu.tessera.io\" && device.capacity[...] > 1"),
                           DeviceClass("nvidia", "device.driver == \"gpu.nvidia.com\"")},
                          core::kDraDriver),
            (std::set<std::string>{"big", "gpu.tessera.io"}));
}

TEST(ClaimAdvisorTest, SaysWhyAClaimCanNeverBeAllocated) {
  const DraGpus gpus = TwoNodes();
  auto reason_with = [&](const json& requests, const DraGpus& with) {
    return UnsatisfiableReason(Claim("c", requests), kOurs, with, core::kDraDriver);
  };
  auto reason = [&](const json& requests) { return reason_with(requests, gpus); };
  EXPECT_EQ(reason({{{"name", "gpu"}, {"exactly", Request("96Gi", "10")}}}),
            "claim ns/c request \"gpu\" asks 98304 MiB of GPU memory (96Gi); the largest GPU of driver gpu.tessera.io "
            "has 81920 MiB (gpu-0 on node n2)");
  EXPECT_EQ(reason({{{"name", "gpu"}, {"exactly", Request("", "150")}}}),
            "claim ns/c request \"gpu\" asks compute 150 (percent of a GPU); a GPU of driver gpu.tessera.io offers at "
            "most 100");
  EXPECT_EQ(reason({{{"name", "gpu"}, {"exactly", Request("1Gi", "", 3)}}}),
            "claim ns/c request \"gpu\" asks 3 GPUs; no node has more than 2 GPU(s) of driver gpu.tessera.io (a "
            "claim's GPUs are on one node)");
  // Fits some GPU (it may wait for room; that is kube-scheduler's to say).
  EXPECT_EQ(reason({{{"name", "gpu"}, {"exactly", Request("80Gi", "100", 2)}}}), "");
  // Another driver's class: not ours to judge.
  EXPECT_EQ(reason({{{"name", "gpu"}, {"exactly", Request("999Gi", "", 1, "nvidia")}}}), "");
  // firstAvailable: impossible only when every alternative is.
  json big = Request("96Gi", "");
  big["name"] = "big";
  json small = Request("8Gi", "");
  small["name"] = "small";
  json huge = Request("1Ti", "");
  huge["name"] = "huge";
  EXPECT_EQ(reason({{{"name", "gpu"}, {"firstAvailable", {big, small}}}}), "");
  EXPECT_EQ(reason({{{"name", "gpu"}, {"firstAvailable", {big, huge}}}}),
            "claim ns/c request \"gpu\": none of its alternatives can be met: \"big\" asks 98304 MiB of GPU memory "
            "(96Gi); the largest GPU of driver gpu.tessera.io has 81920 MiB (gpu-0 on node n2); \"huge\" asks 1048576 "
            "MiB of GPU memory (1Ti); the largest GPU of driver gpu.tessera.io has 81920 MiB (gpu-0 on node n2)");
  // No GPU of the driver anywhere.
  EXPECT_EQ(reason_with({{{"name", "gpu"}, {"exactly", Request("1Gi", "")}}}, DraGpusFrom({}, core::kDraDriver)),
            "claim ns/c request \"gpu\" asks a GPU of driver gpu.tessera.io, but no node publishes one now "
            "(tessera-node runs the driver with --dra; chart value dra.enabled)");
}

TEST(ClaimAdvisorTest, RequiredEqualitiesReadsOnlyTheSimpleForms) {
  const std::string d = core::kDraDriver;
  using E = std::vector<AttributeEquals>;
  EXPECT_EQ(RequiredEqualities(R"(device.attributes["gpu.tessera.io"].model == "H900")", d), (E{{"model", "H900"}}));
  EXPECT_EQ(RequiredEqualities(R"( ( 'A100' == device.attributes['gpu.tessera.io']["model"] ) )", d),
            (E{{"model", "A100"}}));
  EXPECT_EQ(RequiredEqualities(R"(device.attributes["gpu.tessera.io"].model == "A100" && )"
                               R"(device.capacity["gpu.tessera.io"].memory.compareTo(quantity("1Gi")) >= 0 && )"
                               R"((device.attributes["gpu.tessera.io"].uuid == "GPU-x"))",
                               d),
            (E{{"model", "A100"}, {"uuid", "GPU-x"}}));
  // Not required alone, not the driver's, not a literal, or not read: nothing.
  for (const std::string& e :
       {std::string(R"(device.attributes["gpu.tessera.io"].model == "A100" || true)"),
        std::string(R"(device.attributes["gpu.tessera.io"].model == "A100" ? true : false)"),
        std::string(R"(!(device.attributes["gpu.tessera.io"].model == "A100"))"),
        std::string(R"(device.attributes["gpu.nvidia.com"].model == "A100")"),
        std::string(R"(device.attributes["gpu.tessera.io"].model == device.attributes["gpu.tessera.io"].uuid)"),
        std::string(R"(device.attributes["gpu.tessera.io"].model.lowerAscii() == "a100")"),
        std::string(R"(device.attributes["gpu.tessera.io"].model != "A100")"),
        std::string(R"(device.attributes["gpu.tessera.io"].model == "A\"100")"),
        std::string(R"(device.attributes["gpu.tessera.io"].model in ["A100", "H100"])"),
        std::string(R"(device.attributes["gpu.tessera.io"].model == "A100)"),
        std::string("true // && device.attributes[\"gpu.tessera.io\"].model == \"H900\""),
        std::string(R"(device.attributes["gpu.tessera.io"].model == r"A100" && "\\" == "\\")"),
        std::string(R"(device.attributes["gpu.tessera.io"].model == """A100""")"), std::string("")}) {
    EXPECT_EQ(RequiredEqualities(e, d), E{}) << e;
  }
}

json ModelSlice(const std::string& node, const std::vector<std::pair<std::string, std::string>>& models) {
  json slice = Slice(node, {});
  for (const auto& [name, model] : models) {
    slice["spec"]["devices"].push_back(
        {{"name", name},
         {"attributes", {{"model", {{"string", model}}}, {"uuid", {{"string", node + "-" + name}}}, {"index", {{"int", 0}}}}},
         {"capacity", {{"memory", {{"value", "40Gi"}}}, {"compute", {{"value", "100"}}}}}});
  }
  return slice;
}

TEST(ClaimAdvisorTest, SaysWhenTheClaimsOwnSelectorsMatchNoPublishedGpu) {
  const DraGpus gpus =
      DraGpusFrom({ModelSlice("n1", {{"gpu-0", "A100"}, {"gpu-1", "H100"}}), ModelSlice("n2", {{"gpu-0", "A100"}})},
                  core::kDraDriver);
  auto reason = [&](const std::vector<std::string>& expressions) {
    json request = Request("1Gi", "10");
    for (const std::string& e : expressions) request["selectors"].push_back({{"cel", {{"expression", e}}}});
    return UnsatisfiableReason(Claim("c", {{{"name", "gpu"}, {"exactly", request}}}), kOurs, gpus,
                               core::kDraDriver);
  };
  const std::string model = R"(device.attributes["gpu.tessera.io"].model == )";
  EXPECT_EQ(reason({model + "\"H900\""}),
            "claim ns/c request \"gpu\" selects a GPU with model H900, but no GPU of driver gpu.tessera.io has model "
            "H900 (models published: A100, H100)");
  EXPECT_EQ(reason({model + "\"H100\""}), "");
  // Each value exists, never on one GPU: no GPU takes both selectors.
  EXPECT_EQ(reason({model + "\"H100\"", R"(device.attributes["gpu.tessera.io"].uuid == "n2-gpu-0")"}),
            "claim ns/c request \"gpu\" selects a GPU with model H100 and uuid n2-gpu-0, but no GPU of driver "
            "gpu.tessera.io has model H100 and uuid n2-gpu-0 (models published: A100, H100; uuids published: "
            "n1-gpu-0, n1-gpu-1, n2-gpu-0)");
  // What it cannot read, or an attribute no GPU publishes as a string, is left alone.
  EXPECT_EQ(reason({model + "\"H900\" || true"}), "");
  EXPECT_EQ(reason({R"(device.attributes["gpu.tessera.io"].productName == "H900")"}), "");
  EXPECT_EQ(reason({R"(device.attributes["gpu.tessera.io"].index == "7")"}), "");
  // A firstAvailable alternative that selects a published model keeps the claim possible.
  json h900 = Request("1Gi", "");
  h900["name"] = "h900";
  h900["selectors"] = {{{"cel", {{"expression", model + "\"H900\""}}}}};
  json a100 = h900;
  a100["name"] = "a100";
  a100["selectors"][0]["cel"]["expression"] = model + "\"A100\"";
  EXPECT_EQ(UnsatisfiableReason(Claim("c", {{{"name", "gpu"}, {"firstAvailable", {h900, a100}}}}), kOurs, gpus,
                                core::kDraDriver),
            "");
}

json Pod(const std::string& name, const std::string& uid, bool unschedulable, const std::string& claim) {
  json pod = {{"metadata", {{"namespace", "ns"}, {"name", name}, {"uid", uid}}},
              {"spec", {{"resourceClaims", {{{"name", "gpu"}, {"resourceClaimTemplateName", "t"}}}}}},
              {"status", {{"phase", "Pending"}}}};
  if (unschedulable) {
    pod["status"]["conditions"] = {{{"type", "PodScheduled"}, {"status", "False"}, {"reason", "Unschedulable"}}};
  }
  if (!claim.empty()) pod["status"]["resourceClaimStatuses"] = {{{"name", "gpu"}, {"resourceClaimName", claim}}};
  return pod;
}

TEST(ClaimAdvisorTest, PostsOneEventPerUnschedulablePodWhoseClaimCanNeverBeAllocated) {
  kube::FakeApi api;
  ASSERT_TRUE(api.Upsert(kApi + "/resourceslices", Slice("n1", {{"gpu-0", "40Gi"}})).ok());
  ASSERT_TRUE(api.Upsert(kApi + "/deviceclasses", OurClass()).ok());
  ASSERT_TRUE(api.Upsert(kClaims, OneGpuClaim("huge-gpu", "48Gi", "10")).ok());
  ASSERT_TRUE(api.Upsert(kClaims, OneGpuClaim("wait-gpu", "4Gi", "50")).ok());
  ClaimAdvisor advisor(api, {});

  // Nothing unschedulable: nothing read.
  advisor.Observe(Pod("huge", "u1", false, "huge-gpu"));
  ASSERT_TRUE(advisor.RunOnce().ok());
  EXPECT_EQ(api.CountCalls("LIST"), 0);

  advisor.Observe(Pod("huge", "u1", true, "huge-gpu"));
  advisor.Observe(Pod("wait", "u2", true, "wait-gpu"));
  advisor.Observe(Pod("new", "u3", true, ""));  // its claim not made yet
  auto posted = advisor.RunOnce();
  ASSERT_TRUE(posted.ok()) << posted.status().message();
  EXPECT_EQ(*posted, 1);
  const json events = (*api.List(kube::EventsPath("ns")))["items"];
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["involvedObject"]["name"], "huge");
  EXPECT_EQ(events[0]["involvedObject"]["uid"], "u1");
  EXPECT_EQ(events[0]["reason"], kClaimUnsatisfiableReason);
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["message"],
            "claim ns/huge-gpu request \"gpu\" asks 49152 MiB of GPU memory (48Gi); the largest GPU of driver "
            "gpu.tessera.io has 40960 MiB (gpu-0 on node n1)");

  // Again: huge and wait were looked at; new's claim appears now, and fits.
  ASSERT_TRUE(api.Upsert(kClaims, OneGpuClaim("new-gpu", "1Gi", "")).ok());
  advisor.Observe(Pod("new", "u3", true, "new-gpu"));
  posted = advisor.RunOnce();
  ASSERT_TRUE(posted.ok());
  EXPECT_EQ(*posted, 0);
  EXPECT_EQ((*api.List(kube::EventsPath("ns")))["items"].size(), 1u);
  const int gets = api.CountCalls("GET");
  ASSERT_TRUE(advisor.RunOnce().ok());
  EXPECT_EQ(api.CountCalls("GET"), gets) << "every pod was looked at once";

  // Deleted and made again under the same name (a new uid): looked at anew.
  advisor.Forget(Pod("huge", "u1", true, "huge-gpu"));
  advisor.Observe(Pod("huge", "u9", true, "huge-gpu"));
  posted = advisor.RunOnce();
  ASSERT_TRUE(posted.ok());
  EXPECT_EQ(*posted, 1);

  // Not the leader: nothing done.
  ClaimAdvisor standby(api, {.may_act = [] { return FailedPrecondition("not the leader"); }});
  standby.Observe(Pod("huge", "u1", true, "huge-gpu"));
  const int lists = api.CountCalls("LIST");
  ASSERT_TRUE(standby.RunOnce().ok());
  EXPECT_EQ(api.CountCalls("LIST"), lists);
}

TEST(ClaimAdvisorTest, StartRunsPassesUntilStop) {
  kube::FakeApi api;
  ASSERT_TRUE(api.Upsert(kApi + "/deviceclasses", OurClass()).ok());
  ASSERT_TRUE(api.Upsert(kClaims, OneGpuClaim("huge-gpu", "48Gi", "")).ok());
  ClaimAdvisor advisor(api, {.period = std::chrono::milliseconds(10)});
  advisor.Observe(Pod("huge", "u1", true, "huge-gpu"));
  advisor.Start();
  for (int i = 0; i < 500 && (*api.List(kube::EventsPath("ns")))["items"].empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  advisor.Stop();
  const json events = (*api.List(kube::EventsPath("ns")))["items"];
  ASSERT_EQ(events.size(), 1u);
  EXPECT_NE(events[0]["message"].get<std::string>().find("no node publishes one now"), std::string::npos);
}

}  // namespace
}  // namespace tessera::scheduler
