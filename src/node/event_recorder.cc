#include "node/event_recorder.h"

namespace tessera::node {
namespace {

std::string Key(const kube::EventSpec& e) {
  const char sep = '\x1f';  // cannot occur in names or reasons
  return e.object.ns + sep + e.object.name + sep + e.object.uid + sep + e.type + sep + e.reason + sep + e.message;
}

}  // namespace

kube::EventSpec PodWarning(const PodRef& pod, const std::string& reason, const std::string& message,
                           const std::string& node) {
  kube::EventSpec spec;
  spec.object.ns = pod.ns;
  spec.object.name = pod.name;
  spec.object.uid = pod.uid;
  spec.reason = reason;
  spec.message = message;
  spec.component = "tessera-node";
  spec.host = node;
  return spec;
}

EventRecorder::EventRecorder(Poster post, EventRecorderOptions options, std::shared_ptr<spdlog::logger> log)
    : post_(std::move(post)), options_(options), log_(std::move(log)), thread_([this] { Loop(); }) {}

EventRecorder::~EventRecorder() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

bool EventRecorder::Record(const kube::EventSpec& spec) {
  const auto now = std::chrono::steady_clock::now();
  std::string key = Key(spec);
  {
    MutexLock lock(mu_);
    for (auto it = recent_.begin(); it != recent_.end();) {
      it = now - it->second >= options_.dedupe_window ? recent_.erase(it) : std::next(it);
    }
    if (recent_.count(key)) return false;
    if (queue_.size() >= options_.max_queued) {
      log_->warn("dropping event {} on {}/{}: {} events already wait to be posted", spec.reason, spec.object.ns,
                 spec.object.name, queue_.size());
      return false;
    }
    recent_.emplace(std::move(key), now);
    queue_.push_back(spec);
  }
  cv_.NotifyAll();
  return true;
}

void EventRecorder::FlushForTest() {
  MutexLock lock(mu_);
  cv_.Wait(mu_, [this] {
    mu_.AssertHeld();
    return stopping_ || (queue_.empty() && !busy_);
  });
}

void EventRecorder::Loop() {
  MutexLock lock(mu_);
  while (true) {
    cv_.Wait(mu_, [this] {
      mu_.AssertHeld();
      return stopping_ || !queue_.empty();
    });
    if (stopping_) return;
    kube::EventSpec spec = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.Unlock();
    const nlohmann::json body = kube::BuildEvent(spec, std::chrono::system_clock::now());
    const Status st = post_(kube::EventsPath(spec.object.ns), body);
    if (!st.ok()) {
      log_->warn("posting event {} on {}/{} failed: {}", spec.reason, spec.object.ns, spec.object.name,
                 st.message());
    } else {
      log_->debug("posted event {} on {}/{}", spec.reason, spec.object.ns, spec.object.name);
    }
    lock.Lock();
    busy_ = false;
    cv_.NotifyAll();
  }
}

}  // namespace tessera::node
