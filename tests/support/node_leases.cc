#include "tests/support/node_leases.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "kube/leader_elector.h"
#include "kube/paths.h"

namespace tessera::testing {
namespace {

constexpr const char* kLeaseNamespace = "kube-node-lease";
constexpr std::chrono::seconds kRenewInterval{10};  // the kubelet's: a quarter of its 40 s lease
constexpr int kLeaseDurationSeconds = 40;

// Renews node `name`'s Lease, creating it (owned by the Node) when missing.
// NOT_FOUND when the Node itself is gone.
Status Renew(kube::Client& client, const std::string& name) {
  const std::string now = kube::FormatMicroTime(std::chrono::system_clock::now());
  auto renewed = client.Patch(kube::LeasePath(kLeaseNamespace, name), kube::PatchType::kMerge,
                              {{"spec", {{"renewTime", now}, {"holderIdentity", name}}}});
  if (renewed.ok() || renewed.status().code() != StatusCode::kNotFound) return renewed.status();
  TESSERA_ASSIGN_OR_RETURN(nlohmann::json node, client.Get("/api/v1/nodes/" + name));
  nlohmann::json lease = {
      {"apiVersion", "coordination.k8s.io/v1"},
      {"kind", "Lease"},
      {"metadata",
       {{"name", name},
        {"namespace", kLeaseNamespace},
        {"ownerReferences",
         {{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", name}, {"uid", node["metadata"].value("uid", "")}}}}}},
      {"spec", {{"holderIdentity", name}, {"leaseDurationSeconds", kLeaseDurationSeconds}, {"renewTime", now}}},
  };
  auto created = client.Create(kube::LeasesPath(kLeaseNamespace), lease);
  if (created.status().code() == StatusCode::kAlreadyExists) return Status::Ok();  // raced with another renewer
  return created.status();
}

class Heartbeat {
 public:
  static Heartbeat& Get() {
    // Never destroyed: the thread is stopped and joined by the atexit handler
    // registered here, before the statics it uses (libcurl's) are torn down.
    static Heartbeat* const instance = [] {
      auto* h = new Heartbeat();
      std::atexit([] { Get().Stop(); });
      return h;
    }();
    return *instance;
  }

  void Add(const kube::Client& client, const std::string& name) {
    std::lock_guard lock(mu_);
    nodes_.insert_or_assign(name, client);
    if (!thread_.joinable() && !stop_) thread_ = std::thread([this] { Loop(); });
  }
  void Remove(const std::string& name) {
    std::lock_guard lock(mu_);
    nodes_.erase(name);
  }

 private:
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void Loop() {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, kRenewInterval, [this] { return stop_; })) {
      const auto nodes = nodes_;  // renew without the lock: Add/Remove never wait on the API server
      lock.unlock();
      for (auto [name, client] : nodes) {
        // Skip a node forgotten since the copy: its cluster may be gone, and
        // each renewal against a stopped API server waits out the client's
        // retries (for a thousand nodes, minutes after the cluster went down).
        lock.lock();
        const bool wanted = !stop_ && nodes_.count(name) > 0;
        lock.unlock();
        if (wanted && Renew(client, name).code() == StatusCode::kNotFound) ForgetNode(name);
      }
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, kube::Client> nodes_;  // guarded by mu_
  bool stop_ = false;                           // guarded by mu_
  std::thread thread_;
};

}  // namespace

Status KeepNodeAlive(const kube::Client& client, const std::string& name) {
  kube::Client copy = client;
  TESSERA_RETURN_IF_ERROR(Renew(copy, name));
  Heartbeat::Get().Add(client, name);
  return Status::Ok();
}

void ForgetNode(const std::string& name) { Heartbeat::Get().Remove(name); }

}  // namespace tessera::testing
