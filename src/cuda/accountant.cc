#include "cuda/accountant.h"

#include <new>

namespace tessera::cuda {

Accountant::Accountant(region::Layout* layout, int slot) : layout_(layout), slot_(slot) {}

bool Accountant::Reserve(int gpu, uint64_t bytes, region::Refusal refusal) {
  return region::Charge(*layout_, slot(), gpu, bytes, refusal);
}

void Accountant::ForceReserve(int gpu, uint64_t bytes) {
  region::ForceCharge(*layout_, slot(), gpu, bytes);
}

void Accountant::Unreserve(int gpu, uint64_t bytes) {
  region::Uncharge(*layout_, slot(), gpu, bytes);
}

bool Accountant::Track(Space space, uint64_t key, int gpu, uint64_t bytes, uint64_t pool) {
  MutexLock lock(mu_);
  try {
    auto [it, inserted] = table_.try_emplace(Key{space, key}, Record{gpu, bytes, pool, 1});
    if (!inserted) {
      // The driver handed out a key we still hold: we missed its free (for
      // example a free through a path we do not hook). Replace the record,
      // and forget where the old one was mapped.
      Unreserve(it->second.gpu, it->second.bytes);
      it->second = Record{gpu, bytes, pool, 1};
      if (space == Space::kVmmHandle) {
        std::erase_if(mappings_, [key](const auto& m) { return m.second.handle == key; });
      }
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

bool Accountant::Release(Space space, uint64_t key) {
  MutexLock lock(mu_);
  auto it = table_.find(Key{space, key});
  if (it == table_.end()) return false;
  if (it->second.refs > 0) --it->second.refs;
  DropIfUnusedLocked(it);
  return true;
}

void Accountant::DropIfUnusedLocked(std::unordered_map<Key, Record, KeyHash>::iterator it) {
  if (it->second.refs > 0 || it->second.maps > 0) return;
  Unreserve(it->second.gpu, it->second.bytes);
  table_.erase(it);
}

bool Accountant::Map(uint64_t addr, uint64_t bytes, uint64_t handle) {
  MutexLock lock(mu_);
  auto it = table_.find(Key{Space::kVmmHandle, handle});
  if (it == table_.end()) return false;
  try {
    auto [m, inserted] = mappings_.try_emplace(addr, Mapping{bytes, handle});
    if (!inserted) {
      // A mapping we missed the unmap of (the driver maps only free ranges).
      if (auto old = table_.find(Key{Space::kVmmHandle, m->second.handle});
          old != table_.end() && old->second.maps > 0) {
        --old->second.maps;
        if (old != it) DropIfUnusedLocked(old);
      }
      m->second = Mapping{bytes, handle};
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
  ++it->second.maps;
  return true;
}

int Accountant::Unmap(uint64_t addr, uint64_t bytes) {
  MutexLock lock(mu_);
  const uint64_t end = bytes > ~addr ? ~0ull : addr + bytes;
  auto first = mappings_.lower_bound(addr), last = mappings_.lower_bound(end);
  int n = 0;
  for (auto m = first; m != last; ++m, ++n) {
    auto it = table_.find(Key{Space::kVmmHandle, m->second.handle});
    if (it == table_.end() || it->second.maps == 0) continue;
    --it->second.maps;
    DropIfUnusedLocked(it);
  }
  mappings_.erase(first, last);
  return n;
}

size_t Accountant::Mappings() const {
  MutexLock lock(mu_);
  return mappings_.size();
}

bool Accountant::OpenContext(int gpu, uint64_t bytes, region::Refusal refusal) {
  MutexLock lock(mu_);
  if (context_refs_[gpu] == 0) {
    if (bytes != 0 && !Reserve(gpu, bytes, refusal)) return false;
    context_charge_[gpu] = bytes;
  }
  ++context_refs_[gpu];
  return true;
}

void Accountant::CloseContext(int gpu) {
  MutexLock lock(mu_);
  CloseContextLocked(gpu);
}

void Accountant::CloseContextLocked(int gpu) {
  if (context_refs_[gpu] == 0) return;
  if (--context_refs_[gpu] == 0) {
    Unreserve(gpu, context_charge_[gpu]);
    context_charge_[gpu] = 0;
  }
}

void Accountant::PrimaryRetained(int gpu) {
  MutexLock lock(mu_);
  ++primary_refs_[gpu];
}

bool Accountant::ContextCreated(uint64_t ctx, int gpu) {
  MutexLock lock(mu_);
  try {
    auto [it, inserted] = table_.try_emplace(Key{Space::kContext, ctx}, Record{gpu, 0, 0, 1});
    if (!inserted) {
      // A handle we still hold: we missed its destruction. The new context
      // takes over the old one's reference.
      CloseContextLocked(it->second.gpu);
      it->second = Record{gpu, 0, 0, 1};
    }
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

bool Accountant::PrimaryReleased(int gpu) {
  MutexLock lock(mu_);
  if (primary_refs_[gpu] == 0) return false;
  --primary_refs_[gpu];
  CloseContextLocked(gpu);
  return true;
}

bool Accountant::ContextDestroyed(uint64_t ctx) {
  MutexLock lock(mu_);
  auto it = table_.find(Key{Space::kContext, ctx});
  if (it == table_.end()) return false;
  const int gpu = it->second.gpu;
  table_.erase(it);
  CloseContextLocked(gpu);
  return true;
}

uint32_t Accountant::Contexts(int gpu) const {
  MutexLock lock(mu_);
  return context_refs_[gpu];
}

bool Accountant::Retain(Space space, uint64_t key) {
  MutexLock lock(mu_);
  auto it = table_.find(Key{space, key});
  if (it == table_.end()) return false;
  ++it->second.refs;
  return true;
}

bool Accountant::Contains(Space space, uint64_t key) const {
  MutexLock lock(mu_);
  return table_.count(Key{space, key}) != 0;
}

uint64_t Accountant::PoolOf(uint64_t async_ptr) {
  MutexLock lock(mu_);
  auto it = table_.find(Key{Space::kAsyncPtr, async_ptr});
  return it == table_.end() ? 0 : it->second.pool;
}

bool Accountant::SetPoolReserved(uint64_t pool, int gpu, uint64_t reserved, bool force,
                                 uint64_t prepaid) {
  MutexLock lock(mu_);
  auto it = table_.find(Key{Space::kPool, pool});
  const uint64_t charged = (it == table_.end() ? 0 : it->second.bytes) + prepaid;
  if (reserved > charged) {
    const uint64_t grow = reserved - charged;
    if (force) {
      ForceReserve(gpu, grow);
    } else if (!Reserve(gpu, grow)) {
      if (prepaid != 0) Unreserve(gpu, prepaid);
      return false;
    }
  } else if (reserved < charged) {
    Unreserve(gpu, charged - reserved);
  }
  if (it != table_.end()) {
    it->second.bytes = reserved;
    return true;
  }
  try {
    table_.emplace(Key{Space::kPool, pool}, Record{gpu, reserved, 0, 1});
  } catch (const std::bad_alloc&) {
    Unreserve(gpu, reserved);
    return false;
  }
  return true;
}

int Accountant::PoolGpu(uint64_t pool) {
  MutexLock lock(mu_);
  auto it = table_.find(Key{Space::kPool, pool});
  return it == table_.end() ? -1 : it->second.gpu;
}

void Accountant::DropPool(uint64_t pool) {
  MutexLock lock(mu_);
  for (auto it = table_.begin(); it != table_.end();) {
    const bool is_pool = (it->first.space == Space::kPool || it->first.space == Space::kHostPool) &&
                         it->first.value == pool;
    const bool of_pool = is_pool ||
                         (it->first.space == Space::kAsyncPtr && it->second.pool == pool);
    if (of_pool) {
      if (it->first.space == Space::kPool) Unreserve(it->second.gpu, it->second.bytes);
      it = table_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<uint64_t> Accountant::Pools() {
  std::vector<uint64_t> out;
  MutexLock lock(mu_);
  for (const auto& [k, r] : table_) {
    if (k.space == Space::kPool) out.push_back(k.value);
  }
  return out;
}

void Accountant::SetGraphReserved(int gpu, uint64_t reserved) {
  MutexLock lock(mu_);
  uint64_t& charged = graph_reserved_[gpu];
  if (reserved > charged) {
    ForceReserve(gpu, reserved - charged);
  } else if (reserved < charged) {
    Unreserve(gpu, charged - reserved);
  }
  charged = reserved;
}

uint64_t Accountant::Limit(int gpu) const {
  return layout_->gpus[gpu].limit_bytes.load(std::memory_order_relaxed);
}

uint64_t Accountant::Used(int gpu) const {
  return layout_->gpus[gpu].used_bytes.load(std::memory_order_relaxed);
}

uint64_t Accountant::Held(int gpu) const {
  return layout_->procs[slot()].used_bytes[gpu].load(std::memory_order_relaxed);
}

void Accountant::PrepareFork() { mu_.Lock(); }
void Accountant::AfterFork() { mu_.Unlock(); }

void Accountant::ResetForNewProcess(int slot) {
  // After fork the lock is free (PrepareFork held it across the fork); after
  // a raw clone, which runs no fork handlers, the child shares nothing with
  // a thread of the parent that could hold it: clone() without CLONE_VM
  // copies memory as the parent's thread left it, so a clone made while
  // another thread held the lock would inherit it held (documented limit).
  MutexLock lock(mu_);
  table_.clear();
  mappings_.clear();
  for (uint64_t& g : graph_reserved_) g = 0;
  for (int g = 0; g < region::kMaxGpus; ++g) {
    context_refs_[g] = primary_refs_[g] = 0;
    context_charge_[g] = 0;
  }
  slot_.store(slot, std::memory_order_relaxed);
}

}  // namespace tessera::cuda
