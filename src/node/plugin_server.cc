#include "node/plugin_server.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace tessera::node {
namespace {

constexpr const char* kKubeletSocketName = "kubelet.sock";

}  // namespace

bool IsExtendedResourceName(const std::string& name) {
  const auto slash = name.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < name.size() &&
         name.find('/', slash + 1) == std::string::npos;
}

PluginServer::PluginServer(PluginServerOptions options, std::shared_ptr<spdlog::logger> log)
    : options_(std::move(options)), log_(std::move(log)) {}

PluginServer::~PluginServer() { Stop(); }

Status PluginServer::Add(PluginEndpoint endpoint) {
  if (started_) return FailedPrecondition("cannot add " + endpoint.resource + ": the plugin server has started");
  if (!IsExtendedResourceName(endpoint.resource)) {
    return InvalidArgument("resource \"" + endpoint.resource + "\" must look like domain/name");
  }
  const std::string& socket = endpoint.socket_name;
  if (socket.empty() || socket.find('/') != std::string::npos || socket == "." || socket == "..") {
    return InvalidArgument("the socket of " + endpoint.resource + " must be a file name, got \"" + socket + "\"");
  }
  if (socket == kKubeletSocketName) {
    return InvalidArgument("the socket of " + endpoint.resource + " cannot be kubelet.sock, the kubelet's own");
  }
  if (endpoint.service == nullptr) return InvalidArgument(endpoint.resource + " has no service to serve");
  for (const Entry& e : entries_) {
    if (e.endpoint.resource == endpoint.resource) {
      return InvalidArgument("resource " + endpoint.resource + " is served already");
    }
    if (e.endpoint.socket_name == socket) {
      return InvalidArgument("socket " + socket + " of " + endpoint.resource + " is " + e.endpoint.resource +
                             "'s already");
    }
  }
  entries_.push_back(Entry{std::move(endpoint), nullptr, false});
  return Status::Ok();
}

std::string PluginServer::SocketPath(const Entry& e) const { return options_.dir + "/" + e.endpoint.socket_name; }
std::string PluginServer::KubeletSocket() const { return options_.dir + "/" + kKubeletSocketName; }

PluginServer::SocketId PluginServer::Identify(const std::string& path) {
  struct stat st {};
  SocketId id;
  if (::stat(path.c_str(), &st) != 0) return id;
  id.present = true;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.ctime = st.st_ctim;
  return id;
}

Status PluginServer::Serve(Entry& e) {
  std::error_code ec;
  std::filesystem::remove(SocketPath(e), ec);  // a stale socket from a previous run
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + SocketPath(e), grpc::InsecureServerCredentials());
  builder.RegisterService(e.endpoint.service);
  e.server = builder.BuildAndStart();
  if (!e.server) return Internal("cannot serve the " + e.endpoint.resource + " device plugin on " + SocketPath(e));
  log_->info("serving the {} device plugin on {}", e.endpoint.resource, SocketPath(e));
  return Status::Ok();
}

void PluginServer::StopServing(Entry& e) {
  if (!e.server) return;
  if (e.endpoint.end_streams) e.endpoint.end_streams();
  e.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  e.server->Wait();
  e.server.reset();
}

Status PluginServer::Register(const Entry& e) {
  auto channel = grpc::CreateChannel("unix://" + KubeletSocket(), grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version("v1beta1");
  request.set_endpoint(e.endpoint.socket_name);
  request.set_resource_name(e.endpoint.resource);
  request.mutable_options()->set_pre_start_required(false);
  request.mutable_options()->set_get_preferred_allocation_available(true);
  v1beta1::Empty reply;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options_.register_timeout);
  grpc::Status st = stub->Register(&context, request, &reply);
  if (!st.ok()) {
    return Status(static_cast<StatusCode>(st.error_code()),
                  "Register " + e.endpoint.resource + " with " + KubeletSocket() + ": " + st.error_message());
  }
  return Status::Ok();
}

Status PluginServer::Start() {
  if (started_) return FailedPrecondition("the plugin server has started already");
  if (entries_.empty()) return FailedPrecondition("the plugin server has nothing to serve");
  for (Entry& e : entries_) {
    if (Status st = Serve(e); !st.ok()) {
      for (Entry& served : entries_) StopServing(served);
      return st;
    }
  }
  started_ = true;
  stopping_.store(false);
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void PluginServer::Stop() {
  stopping_.store(true);
  if (thread_.joinable()) thread_.join();
  for (Entry& e : entries_) {
    StopServing(e);
    e.registered = false;
  }
}

void PluginServer::Loop() {
  std::optional<DirWatch> watch;
  if (options_.inotify) {
    if (auto opened = DirWatch::Open(options_.dir); opened.ok()) {
      watch.emplace(std::move(opened).value());
    } else {
      log_->warn("{}; checking the sockets every {} ms instead", opened.status().message(), options_.resync.count());
    }
  }
  while (!stopping_.load()) {
    Pass(watch);
    WaitForWork(watch);
  }
}

bool PluginServer::Wakes(const std::vector<DirEvent>& events) const {
  bool woken = false;
  for (const DirEvent& e : events) {
    if (e.name == kKubeletSocketName) {
      woken = woken || e.created;
      continue;
    }
    const bool ours = std::any_of(entries_.begin(), entries_.end(),
                                  [&e](const Entry& entry) { return entry.endpoint.socket_name == e.name; });
    woken = woken || (ours && !e.created);
  }
  return woken;
}

void PluginServer::Pass(std::optional<DirWatch>& watch) {
  // What the events queued so far report is what this pass checks.
  if (watch) (void)watch->Wait(std::chrono::milliseconds(0));
  for (Entry& e : entries_) {
    std::error_code ec;
    if (e.server && std::filesystem::exists(SocketPath(e), ec)) continue;
    if (e.server) log_->warn("{} is gone (kubelet restart?): serving again and re-registering", SocketPath(e));
    StopServing(e);
    e.registered = false;
    if (Status st = Serve(e); !st.ok()) log_->warn("{} (retrying every {} ms)", st.message(), options_.resync.count());
  }
  // A kubelet that starts creates kubelet.sock anew and knows no plugin.
  // Looked at just before registering: a kubelet.sock created after this
  // look is a change the next pass registers for.
  const SocketId kubelet_now = Identify(KubeletSocket());
  const bool again = !(kubelet_now == kubelet_) && kubelet_now.present;
  kubelet_ = kubelet_now;
  if (again) {
    const bool any = std::any_of(entries_.begin(), entries_.end(), [](const Entry& e) { return e.registered; });
    if (any) log_->info("kubelet.sock was created again (kubelet restart): registering every resource again");
    for (Entry& e : entries_) e.registered = false;
  }
  for (Entry& e : entries_) {
    if (!e.server || e.registered) continue;
    std::error_code ec;
    if (!std::filesystem::exists(SocketPath(e), ec)) continue;  // gone meanwhile: served again first, next pass
    if (Status st = Register(e); st.ok()) {
      e.registered = true;
      log_->info("registered {} with the kubelet at {} (endpoint {})", e.endpoint.resource, KubeletSocket(),
                 e.endpoint.socket_name);
    } else {
      log_->warn("{} (retrying every {} ms)", st.message(), options_.resync.count());
    }
  }
}

void PluginServer::WaitForWork(std::optional<DirWatch>& watch) {
  const auto until = std::chrono::steady_clock::now() + options_.resync;
  while (!stopping_.load() && std::chrono::steady_clock::now() < until) {
    if (!watch) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(50, options_.resync.count())));
      continue;
    }
    auto events = watch->Wait(std::chrono::milliseconds(100));
    if (!events.ok()) {
      log_->warn("{}; falling back to checking the sockets every {} ms", events.status().message(),
                 options_.resync.count());
      watch.reset();
      continue;
    }
    if (Wakes(*events)) return;
  }
}

}  // namespace tessera::node
