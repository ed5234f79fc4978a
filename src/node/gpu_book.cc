#include "node/gpu_book.h"

#include <set>

#include "core/codec.h"
#include "node/identify.h"

namespace tessera::node {
namespace {

std::string Percent(int64_t core_milli) {
  const int64_t whole = core_milli / 10, tenth = core_milli % 10;
  return std::to_string(whole) + (tenth != 0 ? "." + std::to_string(tenth) : "") + " percent";
}

std::string ShareText(int64_t mem_mib, int64_t core_milli) {
  return std::to_string(mem_mib) + " MiB and " + Percent(core_milli);
}

// A holder's shares summed per GPU index.
std::map<int, core::GpuShare> PerGpu(const GpuHolder& holder) {
  std::map<int, core::GpuShare> out;
  for (const core::GpuShare& s : holder.shares) {
    core::GpuShare& sum = out[s.index];
    sum.index = s.index;
    sum.mem_mib += s.mem_mib;
    sum.core_milli += s.core_milli;
  }
  return out;
}

// The memory `s` holds of `gpu`: a whole GPU asked for without a size (100 %
// compute, no MiB in the assignment) holds all of it, as core::ShareMemMiB says.
int64_t HeldMiB(const core::GpuShare& s, const core::GpuInfo& gpu) {
  return s.mem_mib == 0 && s.core_milli >= core::kCoreMilliPerGpu ? gpu.memory_mib : s.mem_mib;
}

// The GPU of `gpus` with `index`, or nullptr.
const core::GpuInfo* FindGpu(const std::vector<core::GpuInfo>& gpus, int index) {
  for (const core::GpuInfo& g : gpus) {
    if (g.index == index) return &g;
  }
  return nullptr;
}

}  // namespace

std::string GpuHolder::Describe() const { return (kind == Kind::kPod ? "pod " : "claim ") + key; }

Result<GpuHolder> HolderOfPod(const core::PodView& pod, const std::string& node) {
  if (!pod.assignment.has_value()) return NotFound("pod " + pod.key + " has no tessera.io/assignment");
  Result<core::Assignment> a = core::DecodeAssignment(*pod.assignment);
  if (!a.ok()) return NotFound("pod " + pod.key + ": its assignment cannot be read: " + a.status().message());
  if (a->node != node) return NotFound("pod " + pod.key + " is assigned to node " + a->node + ", not " + node);
  GpuHolder holder{GpuHolder::Kind::kPod, pod.uid, pod.key, {}};
  for (const core::ContainerAssignment& c : a->containers) {
    holder.shares.insert(holder.shares.end(), c.gpus.begin(), c.gpus.end());
  }
  return holder;
}

Status GpuBook::Book(const GpuHolder& holder, const std::vector<core::GpuInfo>& gpus) {
  const std::map<int, core::GpuShare> adding = PerGpu(holder);
  std::map<int, const core::GpuInfo*> info;
  for (const auto& [index, add] : adding) {
    const core::GpuInfo* gpu = FindGpu(gpus, index);
    if (gpu == nullptr) {
      return NotFound(holder.Describe() + ": GPU " + std::to_string(index) + " is not one of this node's " +
                      std::to_string(gpus.size()) + " GPU(s)");
    }
    info[index] = gpu;
  }
  MutexLock lock(mu_);
  // A pod first against the other pods alone, on every GPU: room this node
  // handed out to pods already is a copied or forged assignment's refusal.
  if (holder.kind == GpuHolder::Kind::kPod) {
    for (const auto& [index, add] : adding) TESSERA_RETURN_IF_ERROR(FitsBesidePods(holder, add, *info[index]));
  }
  for (const auto& [index, add] : adding) TESSERA_RETURN_IF_ERROR(FitsBesideAll(holder, add, *info[index]));
  Put(holder);
  lock.Unlock();
  if (holder.kind == GpuHolder::Kind::kPod) PodsChanged();
  return Status::Ok();
}

Status GpuBook::FitsBesidePods(const GpuHolder& pod, const core::GpuShare& add, const core::GpuInfo& gpu) const {
  int64_t mem = 0, core = 0;
  int sharers = 0;  // the other pods' containers on `gpu`: one slot each
  for (const auto& [uid, entry] : entries_) {
    if (uid == pod.uid || entry.holder.kind != GpuHolder::Kind::kPod) continue;
    for (const core::GpuShare& s : entry.holder.shares) {
      if (s.index != gpu.index) continue;
      mem += HeldMiB(s, gpu);
      core += s.core_milli;
      ++sharers;
    }
  }
  int adding = 0;  // this pod's containers on `gpu`
  for (const core::GpuShare& s : pod.shares) adding += s.index == gpu.index ? 1 : 0;
  const int64_t add_mib = HeldMiB(add, gpu);
  // The words CheckHandOut used when it made this check (Events, logs and tests read them).
  const std::string refused = "pod " + pod.key + ": its tessera.io/assignment is not handed out: ";
  const std::string name = "GPU " + std::to_string(gpu.index) + " (" + gpu.uuid + ")";
  const std::string already = " already handed to " + std::to_string(sharers) + " container(s)";
  if (core + add.core_milli > core::kCoreMilliPerGpu) {
    return PermissionDenied(refused + "it wants " + Percent(add.core_milli) + " of " + name + "'s compute, " +
                            Percent(core) + " of it" + already + ": together over 100 percent");
  }
  if (gpu.memory_mib > 0 && mem + add_mib > gpu.memory_mib) {
    return PermissionDenied(refused + "it wants " + std::to_string(add_mib) + " MiB of " + name + ", " +
                            std::to_string(mem) + " MiB of its " + std::to_string(gpu.memory_mib) + " MiB" + already);
  }
  if (gpu.max_sharers > 0 && sharers + adding > gpu.max_sharers) {
    return PermissionDenied(refused + name + " is" + already + ", its limit is " + std::to_string(gpu.max_sharers) +
                            " at once");
  }
  return Status::Ok();
}

Status GpuBook::FitsBesideAll(const GpuHolder& holder, const core::GpuShare& add, const core::GpuInfo& gpu) const {
  int64_t mem = 0, core = 0;
  std::string others;
  for (const auto& [uid, entry] : entries_) {
    if (uid == holder.uid) continue;
    for (const core::GpuShare& s : entry.holder.shares) {
      if (s.index != gpu.index) continue;
      mem += HeldMiB(s, gpu);
      core += s.core_milli;
      others += (others.empty() ? "" : ", ") + entry.holder.Describe() + " (" +
                ShareText(HeldMiB(s, gpu), s.core_milli) + ")";
    }
  }
  if (others.empty()) others = "no other holder";
  const std::string name = "GPU " + std::to_string(gpu.index) + " (" + gpu.uuid + ")";
  const int64_t add_mib = HeldMiB(add, gpu);
  const std::string refused = holder.Describe() + " cannot have " + ShareText(add_mib, add.core_milli) + " of " + name +
                              ": ";
  if (gpu.memory_mib > 0 && mem + add_mib > gpu.memory_mib) {
    return ResourceExhausted(refused + std::to_string(mem) + " MiB of its " + std::to_string(gpu.memory_mib) +
                             " MiB are held by " + others + "; together over its memory");
  }
  if (core + add.core_milli > core::kCoreMilliPerGpu) {
    return ResourceExhausted(refused + Percent(core) + " of its compute is held by " + others +
                             "; together over 100 percent");
  }
  return Status::Ok();
}

void GpuBook::Put(const GpuHolder& holder) {
  entries_[holder.uid] = Entry{holder, ++generation_};
}

void GpuBook::Restore(const GpuHolder& holder) {
  {
    MutexLock lock(mu_);
    Put(holder);
  }
  if (holder.kind == GpuHolder::Kind::kPod) PodsChanged();
}

void GpuBook::Release(const std::string& uid) {
  bool pod = false;
  {
    MutexLock lock(mu_);
    auto it = entries_.find(uid);
    if (it == entries_.end()) return;
    pod = it->second.holder.kind == GpuHolder::Kind::kPod;
    entries_.erase(it);
  }
  if (pod) PodsChanged();
}

void GpuBook::SetPodsObserver(std::function<void()> observer) {
  MutexLock lock(observer_mu_);
  observer_ = std::move(observer);
}

void GpuBook::PodsChanged() {
  MutexLock lock(observer_mu_);
  if (observer_) observer_();
}

std::map<int, core::GpuShare> GpuBook::PodHeld(const std::vector<core::GpuInfo>& gpus) const {
  std::map<int, int64_t> card;
  for (const core::GpuInfo& g : gpus) card[g.index] = g.memory_mib;
  MutexLock lock(mu_);
  std::map<int, core::GpuShare> out;
  for (const auto& [uid, entry] : entries_) {
    if (entry.holder.kind != GpuHolder::Kind::kPod) continue;
    for (const core::GpuShare& s : entry.holder.shares) {
      core::GpuShare& sum = out[s.index];
      sum.index = s.index;
      sum.uuid = s.uuid;
      core::GpuInfo info;
      info.memory_mib = card.count(s.index) != 0 ? card[s.index] : 0;
      sum.mem_mib += HeldMiB(s, info);
      sum.core_milli += s.core_milli;
    }
  }
  return out;
}

uint64_t GpuBook::Generation() const {
  MutexLock lock(mu_);
  return generation_;
}

void GpuBook::SyncPods(const PodViews& pods, const std::string& node, std::optional<uint64_t> listed_after) {
  bool changed = false;
  {
    MutexLock lock(mu_);
    std::set<std::string> listed;
    for (const auto& p : pods) {
      listed.insert(p->uid);
      auto it = entries_.find(p->uid);
      if (p->terminal()) {
        if (it != entries_.end() && it->second.holder.kind == GpuHolder::Kind::kPod) {
          entries_.erase(it);
          changed = true;
        }
        continue;
      }
      if (it != entries_.end() || p->node != node || AllocatedContainers(*p).empty()) continue;
      Result<GpuHolder> holder = HolderOfPod(*p, node);
      if (holder.ok() && !holder->shares.empty()) {
        Put(*holder);
        changed = true;
      }
    }
    if (listed_after) {
      changed |= std::erase_if(entries_, [&](const auto& kv) {
                   const Entry& e = kv.second;
                   return e.holder.kind == GpuHolder::Kind::kPod && e.booked_at <= *listed_after &&
                          listed.count(kv.first) == 0;
                 }) > 0;
    }
  }
  if (changed) PodsChanged();
}

std::vector<GpuHolder> GpuBook::Holders() const {
  MutexLock lock(mu_);
  std::vector<GpuHolder> out;
  for (const auto& [uid, entry] : entries_) out.push_back(entry.holder);
  return out;
}

}  // namespace tessera::node
