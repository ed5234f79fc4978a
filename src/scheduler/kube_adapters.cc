#include "scheduler/kube_adapters.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "kube/events.h"
#include "kube/leader_elector.h"
#include "kube/paths.h"

namespace tessera::scheduler {

Status ApiBinder::Bind(const std::string& ns, const std::string& name, const std::string& uid,
                       const std::string& node, const std::map<std::string, std::string>& annotations) {
  {
    MutexLock lock(mu_);
    turn_.Wait(mu_, [this] {
      mu_.AssertHeld();
      return in_flight_ < max_in_flight_;
    });
    ++in_flight_;
  }
  Status done = api_.Bind(ns, name, uid, node, annotations);
  {
    MutexLock lock(mu_);
    --in_flight_;
  }
  turn_.NotifyOne();
  return done;
}

Status ApiPreemption::Evict(const std::string& ns, const std::string& name, const std::string& uid, bool dry_run) {
  return api_.Evict(ns, name, uid, dry_run);
}

void ApiPreemption::RecordEvent(const std::string& ns, const std::string& name, const std::string& uid,
                                const std::string& type, const std::string& reason, const std::string& message) {
  kube::EventSpec spec;
  spec.object.ns = ns;
  spec.object.name = name;
  spec.object.uid = uid;
  spec.type = type;
  spec.reason = reason;
  spec.message = message;
  spec.component = "tessera-scheduler";
  auto done = api_.Create(kube::EventsPath(ns), kube::BuildEvent(spec, std::chrono::system_clock::now()));
  if (!done.ok()) spdlog::warn("event {} on pod {}/{} not recorded: {}", reason, ns, name, done.status().message());
}

int WakeRejected(kube::Api& api, RejectedPods& rejected, RejectedPods::Clock::time_point now,
                 std::chrono::system_clock::time_point wall_now) {
  const auto pods = rejected.TakeSince(now - kWakeWindow, kMaxWakesPerRelease);
  if (pods.empty()) return 0;
  const std::string stamp = kube::FormatMicroTime(wall_now);
  int woken = 0;
  for (const auto& pod : pods) {
    const auto slash = pod.key.find('/');
    if (slash == std::string::npos) continue;  // keys are namespace/name
    nlohmann::json patch = {{"metadata", {{"annotations", {{kRoomFreedAnnotation, stamp}}}}}};
    if (!pod.uid.empty()) patch["metadata"]["uid"] = pod.uid;  // never touch a newer pod of the same name
    auto done = api.Patch(kube::PodPath(pod.key.substr(0, slash), pod.key.substr(slash + 1)), kube::PatchType::kMerge,
                          patch);
    if (done.ok()) {
      ++woken;
      spdlog::info("wake {}: room appeared (a GPU share freed, or a GPU node added or changed) just after it was "
                   "turned away; asking kube-scheduler to retry",
                   pod.key);
    } else {
      spdlog::debug("wake {}: {}", pod.key, done.status().message());
    }
  }
  return woken;
}

}  // namespace tessera::scheduler
