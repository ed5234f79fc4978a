#include "node/plugin_server.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <map>
#include <thread>

#include "core/thread_annotations.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace tessera::node {
namespace {

using std::chrono::milliseconds;

std::shared_ptr<spdlog::logger> Quiet() {
  return std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
}

// The kubelet's Registration service on <dir>/kubelet.sock, counting
// registrations per resource and remembering each one's endpoint.
class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  explicit FakeKubelet(std::string dir) : dir_(std::move(dir)) {}
  ~FakeKubelet() override { Stop(); }

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request, v1beta1::Empty*) override {
    MutexLock lock(mu_);
    ++count_[request->resource_name()];
    endpoint_[request->resource_name()] = request->endpoint();
    options_ok_ = options_ok_ && request->version() == "v1beta1" && !request->options().pre_start_required() &&
                  request->options().get_preferred_allocation_available();
    return grpc::Status::OK;
  }

  bool Start() {
    std::error_code ec;
    std::filesystem::remove(dir_ + "/kubelet.sock", ec);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + dir_ + "/kubelet.sock", grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    return server_ != nullptr;
  }
  void Stop() {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
  }
  // As a starting kubelet: kubelet.sock deleted and created anew (the
  // plugins' sockets too when `wipe`).
  bool Restart(bool wipe) {
    Stop();
    std::error_code ec;
    std::filesystem::remove(dir_ + "/kubelet.sock", ec);
    if (wipe) {  // as the kubelet does: the names listed first, then removed
      std::vector<std::filesystem::path> names;
      for (const auto& entry : std::filesystem::directory_iterator(dir_)) names.push_back(entry.path());
      for (const auto& name : names) std::filesystem::remove(name, ec);
    }
    return Start();
  }

  int Count(const std::string& resource) {
    MutexLock lock(mu_);
    return count_[resource];
  }
  std::string Endpoint(const std::string& resource) {
    MutexLock lock(mu_);
    return endpoint_[resource];
  }
  bool OptionsOk() {
    MutexLock lock(mu_);
    return options_ok_;
  }

 private:
  const std::string dir_;
  std::unique_ptr<grpc::Server> server_;
  Mutex mu_;
  std::map<std::string, int> count_ TESSERA_GUARDED_BY(mu_);
  std::map<std::string, std::string> endpoint_ TESSERA_GUARDED_BY(mu_);
  bool options_ok_ TESSERA_GUARDED_BY(mu_) = true;
};

// A device plugin that answers GetDevicePluginOptions, so a test can tell
// its socket is served; counts EndStreams calls.
class StubPlugin final : public v1beta1::DevicePlugin::Service {
 public:
  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* response) override {
    response->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }
  std::atomic<int> ended{0};
};

bool Answers(const std::string& socket) {
  auto stub = v1beta1::DevicePlugin::NewStub(grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  v1beta1::Empty request;
  v1beta1::DevicePluginOptions response;
  return stub->GetDevicePluginOptions(&context, request, &response).ok() &&
         response.get_preferred_allocation_available();
}

bool Eventually(const std::function<bool()>& done, milliseconds timeout = milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return done();
}

class PluginServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "plugin-server-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    kubelet_ = std::make_unique<FakeKubelet>(dir_);
  }
  void TearDown() override {
    server_.reset();
    kubelet_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A server with endpoints gpu.example/a on a.sock and gpu.example/b on b.sock.
  void Make(bool inotify = true) {
    PluginServerOptions options;
    options.dir = dir_;
    options.resync = milliseconds(100);
    options.inotify = inotify;
    server_ = std::make_unique<PluginServer>(options, Quiet());
    ASSERT_TRUE(server_->Add({"gpu.example/a", "a.sock", &a_, [this] { ++a_.ended; }}).ok());
    ASSERT_TRUE(server_->Add({"gpu.example/b", "b.sock", &b_, [this] { ++b_.ended; }}).ok());
  }

  std::string dir_;
  std::unique_ptr<FakeKubelet> kubelet_;
  StubPlugin a_, b_;
  std::unique_ptr<PluginServer> server_;
};

TEST_F(PluginServerTest, ServesEachResourceOnItsSocketAndRegistersIt) {
  ASSERT_TRUE(kubelet_->Start());
  Make();
  ASSERT_TRUE(server_->Start().ok());
  EXPECT_TRUE(Eventually([&] { return kubelet_->Count("gpu.example/a") == 1 && kubelet_->Count("gpu.example/b") == 1; }));
  EXPECT_EQ(kubelet_->Endpoint("gpu.example/a"), "a.sock");
  EXPECT_EQ(kubelet_->Endpoint("gpu.example/b"), "b.sock");
  EXPECT_TRUE(kubelet_->OptionsOk());
  EXPECT_TRUE(Answers(dir_ + "/a.sock"));
  EXPECT_TRUE(Answers(dir_ + "/b.sock"));
  server_->Stop();
  EXPECT_FALSE(Answers(dir_ + "/a.sock"));
  EXPECT_EQ(a_.ended.load(), 1);  // its streams were ended before its server went down
}

TEST_F(PluginServerTest, RetriesRegistrationUntilTheKubeletAnswers) {
  Make();
  ASSERT_TRUE(server_->Start().ok());  // no kubelet.sock yet
  std::this_thread::sleep_for(milliseconds(250));
  EXPECT_TRUE(Answers(dir_ + "/a.sock"));
  ASSERT_TRUE(kubelet_->Start());
  EXPECT_TRUE(Eventually([&] { return kubelet_->Count("gpu.example/a") == 1 && kubelet_->Count("gpu.example/b") == 1; }));
}

TEST_F(PluginServerTest, ServesAndRegistersAgainOnlyTheSocketThatIsGone) {
  ASSERT_TRUE(kubelet_->Start());
  Make();
  ASSERT_TRUE(server_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return kubelet_->Count("gpu.example/a") == 1 && kubelet_->Count("gpu.example/b") == 1; }));
  std::filesystem::remove(dir_ + "/a.sock");
  EXPECT_TRUE(Eventually([&] { return kubelet_->Count("gpu.example/a") == 2; }));
  EXPECT_TRUE(Answers(dir_ + "/a.sock"));
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(kubelet_->Count("gpu.example/a"), 2);
  EXPECT_EQ(kubelet_->Count("gpu.example/b"), 1);
}

// A restarting kubelet wipes the folder: every socket served and registered
// again. (A pass may come while the kubelet is still removing the names it
// listed, and register a socket it removes a moment later, which is then
// served and registered again: how many registrations that takes depends on
// timing, so this counts at least.)
TEST_F(PluginServerTest, ServesAndRegistersEverythingAgainAfterAKubeletRestart) {
  ASSERT_TRUE(kubelet_->Start());
  Make();
  ASSERT_TRUE(server_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return kubelet_->Count("gpu.example/a") == 1 && kubelet_->Count("gpu.example/b") == 1; }));
  const auto restarted = std::chrono::steady_clock::now();
  ASSERT_TRUE(kubelet_->Restart(/*wipe=*/true));
  EXPECT_TRUE(Eventually([&] { return kubelet_->Count("gpu.example/a") >= 2 && kubelet_->Count("gpu.example/b") >= 2; }));
  EXPECT_LT(std::chrono::steady_clock::now() - restarted, milliseconds(1000));
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_TRUE(Answers(dir_ + "/a.sock"));
  EXPECT_TRUE(Answers(dir_ + "/b.sock"));
}

// Only kubelet.sock is created anew (the plugins' sockets stay): every
// resource registered again, through inotify and through the periodic check.
TEST_F(PluginServerTest, RegistersEverythingAgainWhenKubeletSockIsCreatedAgain) {
  for (bool inotify : {true, false}) {
    SCOPED_TRACE(inotify ? "inotify" : "periodic check");
    ASSERT_TRUE(kubelet_->Start());
    Make(inotify);
    ASSERT_TRUE(server_->Start().ok());
    const int a = kubelet_->Count("gpu.example/a") + 1, b = kubelet_->Count("gpu.example/b") + 1;
    ASSERT_TRUE(Eventually([&] { return kubelet_->Count("gpu.example/a") == a && kubelet_->Count("gpu.example/b") == b; }));
    ASSERT_TRUE(kubelet_->Restart(/*wipe=*/false));
    EXPECT_TRUE(
        Eventually([&] { return kubelet_->Count("gpu.example/a") == a + 1 && kubelet_->Count("gpu.example/b") == b + 1; }));
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_EQ(kubelet_->Count("gpu.example/a"), a + 1);
    server_.reset();
    kubelet_->Stop();
  }
}

TEST_F(PluginServerTest, AddSaysWhatToFix) {
  PluginServer server({.dir = dir_}, Quiet());
  StubPlugin p;
  ASSERT_TRUE(server.Add({"gpu.example/a", "a.sock", &p, {}}).ok());
  EXPECT_NE(server.Add({"gpu.example/a", "other.sock", &p, {}}).message().find("served already"), std::string::npos);
  EXPECT_NE(server.Add({"gpu.example/b", "a.sock", &p, {}}).message().find("gpu.example/a's already"),
            std::string::npos);
  EXPECT_NE(server.Add({"gpu.example/b", "kubelet.sock", &p, {}}).message().find("kubelet.sock"), std::string::npos);
  EXPECT_NE(server.Add({"gpu.example/b", "x/b.sock", &p, {}}).message().find("file name"), std::string::npos);
  EXPECT_NE(server.Add({"gpu", "b.sock", &p, {}}).message().find("domain/name"), std::string::npos);
  EXPECT_NE(server.Add({"gpu.example/b", "b.sock", nullptr, {}}).message().find("no service"), std::string::npos);
  EXPECT_EQ(server.Add({"gpu.example/b", "x/b.sock", &p, {}}).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(server.Add({"gpu.example/b", "b.sock", &p, {}}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(server.Start().code(), StatusCode::kFailedPrecondition);
}

TEST_F(PluginServerTest, StartFailsWhenASocketCannotBeServed) {
  PluginServer empty({.dir = dir_}, Quiet());
  EXPECT_EQ(empty.Start().code(), StatusCode::kFailedPrecondition);
  PluginServer server({.dir = dir_ + "/missing"}, Quiet());
  StubPlugin p;
  ASSERT_TRUE(server.Add({"gpu.example/a", "a.sock", &p, {}}).ok());
  Status st = server.Start();
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find(dir_ + "/missing/a.sock"), std::string::npos) << st.ToString();
}

TEST(ExtendedResourceNameTest, DomainSlashName) {
  EXPECT_TRUE(IsExtendedResourceName("tessera.io/gpu"));
  for (const char* bad : {"gpu", "/gpu", "tessera.io/", "a/b/c", ""}) EXPECT_FALSE(IsExtendedResourceName(bad)) << bad;
}

}  // namespace
}  // namespace tessera::node
