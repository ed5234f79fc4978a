#include "node/periodic.h"

namespace tessera::node {

PeriodicLoop::PeriodicLoop(std::chrono::milliseconds interval, std::function<void()> pass)
    : interval_(interval), pass_(std::move(pass)) {}

PeriodicLoop::~PeriodicLoop() { Stop(); }

void PeriodicLoop::Start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void PeriodicLoop::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeriodicLoop::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (wake_.wait_for(lock, interval_, [this] { return stopping_; })) return;
    lock.unlock();
    pass_();
    lock.lock();
  }
}

}  // namespace tessera::node
