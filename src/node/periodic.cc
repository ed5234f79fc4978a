#include "node/periodic.h"

namespace tessera::node {

PeriodicLoop::PeriodicLoop(std::chrono::milliseconds interval, std::function<void()> pass)
    : interval_(interval), pass_(std::move(pass)) {}

PeriodicLoop::~PeriodicLoop() { Stop(); }

void PeriodicLoop::Start() {
  if (thread_.joinable()) return;
  {
    MutexLock lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void PeriodicLoop::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void PeriodicLoop::Loop() {
  MutexLock lock(mu_);
  while (true) {
    if (wake_.WaitFor(mu_, interval_, [this] {
          mu_.AssertHeld();
          return stopping_;
        })) {
      return;
    }
    lock.Unlock();
    pass_();
    lock.Lock();
  }
}

}  // namespace tessera::node
