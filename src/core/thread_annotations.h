// Lock annotations that clang's thread-safety analysis (-Wthread-safety)
// checks at compile time, and the lock types they are written for: Mutex (a
// std::mutex the analysis knows), MutexLock (its scoped holder) and CondVar (a
// condition variable that waits with a Mutex held).
//
// Shared state names its lock, and functions name what they need held or
// must not hold; `make check-thread-safety` (a clang build of the annotated
// libraries with -Werror=thread-safety) fails on an access without the lock.
// Under other compilers the macros expand to nothing and the types are thin
// wrappers with the cost of std::mutex and std::condition_variable.
//
// The macros carry a TESSERA_ prefix: gRPC's headers pull in Abseil's
// unprefixed GUARDED_BY and NO_THREAD_SAFETY_ANALYSIS, which ours would
// otherwise redefine. Their meaning is clang's ("Thread Safety Analysis" in
// the clang documentation):
//   TESSERA_GUARDED_BY(mu)        data: read and written only with mu held
//   TESSERA_PT_GUARDED_BY(mu)     pointer: what it points to needs mu held
//   TESSERA_REQUIRES(mu)          function: the caller holds mu
//   TESSERA_EXCLUDES(mu)          function: the caller does not hold mu (it
//                                 takes mu itself, or must not call with it held)
//   TESSERA_ACQUIRE / RELEASE(mu) function: returns with mu held / released
//   TESSERA_TRY_ACQUIRE(ok, mu)   function: holds mu when it returns `ok`
//   TESSERA_ASSERT_CAPABILITY(mu) function: the analysis may assume mu is held
//                                 after the call (nothing is checked at run time)
//   TESSERA_RETURN_CAPABILITY(mu) function: returns a reference to mu
//   TESSERA_ACQUIRED_BEFORE / AFTER(mu)  a mutex: the order two are taken in
//   TESSERA_*_SHARED              the same for a shared (reader) hold
//   TESSERA_NO_THREAD_SAFETY_ANALYSIS  function: not analysed; say why beside it
//
// A lambda is analysed as a function of its own, without the locks of the
// scope that made it. One that runs with a lock held (under
// ClusterState::Read, or as a CondVar predicate) and reads guarded data
// starts with mu.AssertHeld().
//
// Thread-safety: Mutex and CondVar are what threads share; a MutexLock belongs
// to the thread that made it.
//
//   class Counter {
//    public:
//     void Add(int n) TESSERA_EXCLUDES(mu_) { MutexLock lock(mu_); total_ += n; }
//    private:
//     Mutex mu_;
//     int total_ TESSERA_GUARDED_BY(mu_) = 0;
//   };
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define TESSERA_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TESSERA_THREAD_ANNOTATION(x)
#endif

#define TESSERA_CAPABILITY(name) TESSERA_THREAD_ANNOTATION(capability(name))
#define TESSERA_SCOPED_CAPABILITY TESSERA_THREAD_ANNOTATION(scoped_lockable)
#define TESSERA_GUARDED_BY(x) TESSERA_THREAD_ANNOTATION(guarded_by(x))
#define TESSERA_PT_GUARDED_BY(x) TESSERA_THREAD_ANNOTATION(pt_guarded_by(x))
#define TESSERA_ACQUIRED_BEFORE(...) TESSERA_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define TESSERA_ACQUIRED_AFTER(...) TESSERA_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define TESSERA_REQUIRES(...) TESSERA_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define TESSERA_REQUIRES_SHARED(...) TESSERA_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define TESSERA_ACQUIRE(...) TESSERA_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define TESSERA_ACQUIRE_SHARED(...) TESSERA_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define TESSERA_RELEASE(...) TESSERA_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TESSERA_RELEASE_SHARED(...) TESSERA_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TESSERA_TRY_ACQUIRE(...) TESSERA_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define TESSERA_EXCLUDES(...) TESSERA_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define TESSERA_ASSERT_CAPABILITY(x) TESSERA_THREAD_ANNOTATION(assert_capability(x))
#define TESSERA_RETURN_CAPABILITY(x) TESSERA_THREAD_ANNOTATION(lock_returned(x))
#define TESSERA_NO_THREAD_SAFETY_ANALYSIS TESSERA_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace tessera {

class CondVar;

// A non-recursive mutex: std::mutex, known to the analysis. Constant-
// initialised and trivially destructible like std::mutex, so it may live in
// static storage without a static constructor (libtessera-cuda.so relies on
// this). Lock() on a mutex this thread holds is undefined, as for std::mutex.
class TESSERA_CAPABILITY("mutex") Mutex {
 public:
  constexpr Mutex() noexcept = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() TESSERA_ACQUIRE() { mu_.lock(); }
  void Unlock() TESSERA_RELEASE() { mu_.unlock(); }
  // Takes the mutex if it is free; never blocks. True when taken.
  [[nodiscard]] bool TryLock() TESSERA_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis this thread holds the mutex here, where it cannot see
  // why (a lambda run under the lock). Checks nothing at run time.
  void AssertHeld() const TESSERA_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope. Unlock() and Lock() let go of it and take it
// back within the scope (a wait, a call that must run without it); the
// destructor unlocks only while held.
//
//   MutexLock lock(mu_);
//   Item item = TakeFirst();  // with mu_
//   lock.Unlock();
//   Process(item);            // without it
//   lock.Lock();
class TESSERA_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) TESSERA_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() TESSERA_RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Precondition: held. Releases the mutex before the scope ends.
  void Unlock() TESSERA_RELEASE() {
    held_ = false;
    mu_.Unlock();
  }
  // Precondition: released by Unlock(). Takes the mutex again.
  void Lock() TESSERA_ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// A condition variable whose waits take the Mutex the caller holds (held on
// return, as with std::condition_variable). Waits may wake spuriously;
// the predicate forms loop until `pred()` is true, and `pred` runs with the
// mutex held (start it with mu.AssertHeld() when it reads guarded data).
//
//   MutexLock lock(mu_);
//   if (!ready_cv_.WaitFor(mu_, std::chrono::seconds(1), [this] { mu_.AssertHeld(); return ready_; })) {
//     return TimedOut();
//   }
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void NotifyOne() noexcept { cv_.notify_one(); }
  void NotifyAll() noexcept { cv_.notify_all(); }

  // Blocks until notified (or spuriously woken).
  void Wait(Mutex& mu) TESSERA_REQUIRES(mu) {
    Adopted held(mu);
    cv_.wait(held.lock);
  }
  // Blocks until notified, spuriously woken or `deadline`:
  // std::cv_status::timeout when the deadline passed.
  template <typename Clock, typename Duration>
  std::cv_status WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      TESSERA_REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_until(held.lock, deadline);
  }
  template <typename Rep, typename Period>
  std::cv_status WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout) TESSERA_REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_for(held.lock, timeout);
  }

  // Until pred() holds.
  template <typename Pred>
  void Wait(Mutex& mu, Pred pred) TESSERA_REQUIRES(mu) {
    Adopted held(mu);
    cv_.wait(held.lock, std::move(pred));
  }
  // Until pred() holds or `deadline` / `timeout` passes; returns pred()'s
  // last value (false: timed out with it still false).
  template <typename Clock, typename Duration, typename Pred>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline, Pred pred)
      TESSERA_REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_until(held.lock, deadline, std::move(pred));
  }
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout, Pred pred) TESSERA_REQUIRES(mu) {
    Adopted held(mu);
    return cv_.wait_for(held.lock, timeout, std::move(pred));
  }

 private:
  // The caller's hold on `mu` lent to std::condition_variable for one wait:
  // the unique_lock adopts the held mutex and gives it back un-released, so
  // the caller holds it afterwards, also when the wait throws.
  struct Adopted {
    explicit Adopted(Mutex& mu) : lock(mu.mu_, std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    Adopted(const Adopted&) = delete;
    Adopted& operator=(const Adopted&) = delete;
    std::unique_lock<std::mutex> lock;
  };

  std::condition_variable cv_;
};

}  // namespace tessera
