// Not built: core_thread_annotations_misuse_test (CMakeLists.txt) hands this
// file to clang and passes only when the analysis rejects the write below,
// which forgets the lock. It guards the macros themselves: were they to
// expand to nothing under clang, every annotation would check nothing.
#include "core/thread_annotations.h"

namespace tessera {

class Account {
 public:
  void Deposit(int amount) { balance_ += amount; }  // no MutexLock: rejected

 private:
  Mutex mu_;
  int balance_ TESSERA_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera
