#include "core/thread_annotations.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <type_traits>
#include <vector>

namespace tessera {
namespace {

using namespace std::chrono_literals;

// libtessera-cuda.so keeps Mutexes in objects that are never destroyed and
// must not need a static constructor or destructor.
static_assert(std::is_trivially_destructible_v<Mutex>);
static_assert(std::is_nothrow_default_constructible_v<Mutex>);

// True when another thread finds `mu` taken.
bool HeldElsewhere(Mutex& mu) {
  bool taken = false;
  std::thread([&] {
    if (mu.TryLock()) {
      mu.Unlock();
    } else {
      taken = true;
    }
  }).join();
  return taken;
}

struct Counter {
  Mutex mu;
  int64_t total TESSERA_GUARDED_BY(mu) = 0;
  void Add() TESSERA_EXCLUDES(mu) {
    MutexLock lock(mu);
    ++total;
  }
  int64_t Total() TESSERA_EXCLUDES(mu) {
    MutexLock lock(mu);
    return total;
  }
};

TEST(MutexTest, MutexLockExcludesOtherThreads) {
  Counter c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < 20000; ++i) c.Add();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.Total(), 80000);
}

TEST(MutexTest, TryLockFailsWhileHeldAndSucceedsWhenFree) {
  Mutex mu;
  if (!mu.TryLock()) FAIL() << "a free mutex was not taken";
  EXPECT_TRUE(HeldElsewhere(mu));
  mu.Unlock();
  EXPECT_FALSE(HeldElsewhere(mu));
}

TEST(MutexLockTest, UnlockAndLockWithinTheScope) {
  Mutex mu;
  {
    MutexLock lock(mu);
    EXPECT_TRUE(HeldElsewhere(mu));
    lock.Unlock();
    EXPECT_FALSE(HeldElsewhere(mu));
    lock.Lock();
    EXPECT_TRUE(HeldElsewhere(mu));
  }
  EXPECT_FALSE(HeldElsewhere(mu));
}

TEST(MutexLockTest, DestructorLeavesAReleasedMutexAlone) {
  Mutex mu;
  std::atomic<bool> taken{false}, leave{false};
  std::thread other;
  {
    MutexLock lock(mu);
    lock.Unlock();
    other = std::thread([&] {
      mu.Lock();
      taken = true;
      while (!leave) std::this_thread::sleep_for(1ms);
      mu.Unlock();
    });
    while (!taken) std::this_thread::sleep_for(1ms);
  }  // must not unlock the other thread's hold
  EXPECT_FALSE(mu.TryLock());
  leave = true;
  other.join();
  EXPECT_FALSE(HeldElsewhere(mu));
}

struct Flag {
  Mutex mu;
  CondVar cv;
  bool set TESSERA_GUARDED_BY(mu) = false;
  void Set() TESSERA_EXCLUDES(mu) {
    {
      MutexLock lock(mu);
      set = true;
    }
    cv.NotifyAll();
  }
};

TEST(CondVarTest, PredicateWaitReturnsOnceNotifiedWithTheMutexHeld) {
  Flag f;
  std::thread setter([&f] {
    std::this_thread::sleep_for(10ms);
    f.Set();
  });
  {
    MutexLock lock(f.mu);
    f.cv.Wait(f.mu, [&f] {
      f.mu.AssertHeld();
      return f.set;
    });
    EXPECT_TRUE(f.set);
    EXPECT_TRUE(HeldElsewhere(f.mu));
  }
  setter.join();
}

TEST(CondVarTest, WaitForReturnsPredicateValue) {
  Flag f;
  MutexLock lock(f.mu);
  auto is_set = [&f] {
    f.mu.AssertHeld();
    return f.set;
  };
  EXPECT_FALSE(f.cv.WaitFor(f.mu, 5ms, is_set));
  EXPECT_TRUE(HeldElsewhere(f.mu));
  f.set = true;
  EXPECT_TRUE(f.cv.WaitFor(f.mu, 0ms, is_set));
  EXPECT_TRUE(f.cv.WaitUntil(f.mu, std::chrono::steady_clock::now(), is_set));
}

TEST(CondVarTest, TimedWaitsReportTimeoutWithTheMutexHeld) {
  Mutex mu;
  CondVar cv;
  MutexLock lock(mu);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(cv.WaitUntil(mu, start + 5ms), std::cv_status::timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 5ms);
  EXPECT_EQ(cv.WaitFor(mu, 1ms), std::cv_status::timeout);
  EXPECT_TRUE(HeldElsewhere(mu));
}

TEST(CondVarTest, PlainWaitWakesOnNotify) {
  Flag f;
  std::thread setter([&f] {
    std::this_thread::sleep_for(5ms);
    f.Set();
  });
  {
    MutexLock lock(f.mu);
    while (!f.set) f.cv.Wait(f.mu);
  }
  setter.join();
}

}  // namespace
}  // namespace tessera
