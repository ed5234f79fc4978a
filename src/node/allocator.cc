#include "node/allocator.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "kube/paths.h"
#include "node/arbiter_loop.h"
#include "node/handout.h"
#include "node/slots.h"

namespace tessera::node {
namespace {

// The pod cache reads requests with the names the agent serves.
NodePodsOptions WithResources(NodePodsOptions options, const core::ResourceNames& names) {
  options.resources = names;
  return options;
}

}  // namespace

Allocator::Allocator(kube::Api& api, std::string node, MountPaths paths, std::shared_ptr<spdlog::logger> log,
                     NodePodsOptions pods)
    : api_(api),
      node_(std::move(node)),
      paths_(std::move(paths)),
      log_(std::move(log)),
      pods_(api, node_, log_, WithResources(std::move(pods), paths_.resources)) {}

Status Allocator::Start() { return pods_.Start(); }

void Allocator::DropRefused(NodePods::Snapshot& read) {
  if (refused_uids_.empty()) return;
  std::erase_if(read.pending, [this](const PendingPod& p) {
    mu_.AssertHeld();  // runs inside this call
    return refused_uids_.count(p.uid) != 0;
  });
  std::set<std::string> present;
  for (const auto& p : read.pods) present.insert(p->uid);
  std::erase_if(refused_uids_, [&present](const std::string& uid) { return present.count(uid) == 0; });
}

Result<NodePods::Snapshot> Allocator::ReadFor(const std::string& resource, bool fresh) {
  TESSERA_ASSIGN_OR_RETURN(NodePods::Snapshot read, pods_.Read(fresh));
  DropRefused(read);
  KeepPendingFor(read.pending, resource);
  return read;
}

Result<ContainerEnv> Allocator::Allocate(const std::string& resource, const std::vector<std::string>& device_ids,
                                         const std::vector<core::GpuInfo>& gpus, std::vector<PodRef>* named) {
  std::vector<PodRef> ignored;
  std::vector<PodRef>& concerned = named ? *named : ignored;
  concerned.clear();
  MutexLock lock(mu_);
  Result<ContainerEnv> env = AllocateLocked(resource, device_ids, gpus, concerned);
  if (observer_) observer_(env.status(), concerned);
  return env;
}

Result<ContainerEnv> Allocator::AllocateLocked(const std::string& resource, const std::vector<std::string>& device_ids,
                                               const std::vector<core::GpuInfo>& gpus,
                                               std::vector<PodRef>& concerned) {
  std::vector<std::string> slot_gpus;
  for (const auto& id : device_ids) {
    TESSERA_ASSIGN_OR_RETURN(std::string uuid, SlotGpu(id));
    slot_gpus.push_back(std::move(uuid));
  }
  std::vector<std::string> sorted_ids = device_ids;
  std::sort(sorted_ids.begin(), sorted_ids.end());
  std::optional<ContainerRef> steered;
  if (auto steer = steered_.find(resource); steer != steered_.end() && steer->second.ids == sorted_ids) {
    steered = steer->second.container;
  }
  uint64_t before = book_.Generation();
  TESSERA_ASSIGN_OR_RETURN(NodePods::Snapshot read, ReadFor(resource, false));
  std::vector<size_t> candidates;
  Result<Identified> identified = IdentifyContainer(slot_gpus, read.pending, steered, &candidates);
  if (!identified.ok() && !read.listed) {
    // The cache may lag behind a pod bound a moment ago: decide on a LIST.
    log_->debug("Allocate of {} [{}]: no single match in the pod cache; listing: {}", resource,
                JoinUuids(device_ids), identified.status().message());
    before = book_.Generation();
    TESSERA_ASSIGN_OR_RETURN(read, ReadFor(resource, true));
    identified = IdentifyContainer(slot_gpus, read.pending, steered, &candidates);
  }
  // The pods' side of the book as this read shows it (pods handed out by an
  // agent before this one; finished ones dropped, gone ones on a LIST).
  book_.SyncPods(read.pods, node_, read.listed ? std::optional<uint64_t>(before) : std::nullopt);
  const std::vector<PendingPod>& pending = read.pending;
  if (!identified.ok()) {
    for (size_t i : candidates) concerned.push_back({pending[i].ns, pending[i].name, pending[i].uid});
    return identified.status();
  }
  const PendingPod& pod = pending[identified->pod];
  const PendingContainer& container = pod.containers[identified->container];
  concerned.push_back({pod.ns, pod.name, pod.uid});  // kept only if a step below fails
  // The pod booked by this call: released again unless the pod is marked allocated.
  std::string booked_now;
  struct ReleaseOnFailure {
    GpuBook& book;
    const std::string& uid;
    bool kept = false;
    ~ReleaseOnFailure() {
      if (!kept && !uid.empty()) book.Release(uid);
    }
  } release{book_, booked_now};
  if (pod.allocated.empty()) {
    // The pod's first container: its whole assignment must be what it asks
    // for (handout.h) and fit what this node has not handed out, to other
    // pods or to DRA claims (the book, gpu_book.h).
    auto self = std::find_if(read.pods.begin(), read.pods.end(), [&pod](const auto& p) { return p->uid == pod.uid; });
    if (self == read.pods.end()) return Internal("pod " + pod.Key() + " is gone from the pod list just read");
    if (Status st = CheckHandOut(**self, gpus); !st.ok()) {
      log_->warn("Allocate of {} [{}]: {}", resource, JoinUuids(device_ids), st.message());
      refused_uids_.insert(pod.uid);
      return st;
    }
    // Booked in one step with its check, so a NodePrepareResources running
    // now sees this pod.
    Result<GpuHolder> holder = HolderOfPod(**self, node_);
    if (!holder.ok()) return Internal("pod " + pod.Key() + ": " + holder.status().message());
    Status st = book_.Book(*holder, gpus);
    if (!st.ok() && !read.listed) {
      // The book may hold pods deleted since its last LIST (a watch cache
      // cannot tell gone from not yet seen): a refusal rests on a LIST.
      const uint64_t at = book_.Generation();
      TESSERA_ASSIGN_OR_RETURN(NodePods::Snapshot fresh, pods_.Read(true));
      book_.SyncPods(fresh.pods, node_, at);
      st = book_.Book(*holder, gpus);
    }
    if (!st.ok()) {
      log_->warn("Allocate of {} [{}]: {}", resource, JoinUuids(device_ids), st.message());
      refused_uids_.insert(pod.uid);
      return st;
    }
    booked_now = pod.uid;
  }
  std::vector<core::GpuInfo> now = gpus;
  if (pod.isolation == core::Isolation::kMps && mps_probe_) {
    for (core::GpuInfo& g : now) g.mps = mps_probe_(g.uuid);
  }
  TESSERA_ASSIGN_OR_RETURN(ContainerEnv env, BuildContainerEnv(pod, container, now, paths_));
  const bool enforced = pod.isolation != core::Isolation::kNone;  // none: no region, board or arbiter record
  if (enforced) {
    std::error_code ec;
    std::filesystem::create_directories(env.region_host_dir, ec);
    if (ec) return Internal("creating region directory " + env.region_host_dir + ": " + ec.message());
    // Without its GPUs' boards the container's launches are charged as measured: Allocate goes on.
    std::vector<std::string> uuids;
    for (const core::GpuShare& g : container.gpus) uuids.push_back(g.uuid);
    if (Status boards = PrepareBoards(BoardHostDir(paths_), uuids); !boards.ok()) {
      log_->warn("Allocate of {}: {} (its launches are charged as measured beside other contexts)", pod.Key(),
                 boards.message());
    }
  }
  // What the compute arbiter needs, beside the region (not in it: the
  // container must not rewrite its own priority). Without it the container
  // keeps its static share; Allocate goes on. An MPS container has none: MPS
  // limits its compute, the launch gate does not; nor has an unenforced one.
  if (enforced && pod.isolation != core::Isolation::kMps) WriteArbiterFor(pod, container, env.region_host_dir);
  TESSERA_RETURN_IF_ERROR(MarkAllocated(pod, container.name));
  release.kept = true;
  concerned.clear();
  steered_.erase(resource);
  log_->info("Allocate of {} [{}]: {} container {} (the one match among {} pending pod(s) asking for it, {}); "
             "NVIDIA_VISIBLE_DEVICES={}{}",
             resource, JoinUuids(device_ids), pod.Key(), container.name, pending.size(),
             read.listed ? "listed" : "from the watch cache", env.envs["NVIDIA_VISIBLE_DEVICES"],
             pod.isolation == core::Isolation::kMps    ? ", MPS"
             : pod.isolation == core::Isolation::kNone ? ", unenforced (tessera.io/isolation: none)"
                                                       : "");
  return env;
}

void Allocator::WriteArbiterFor(const PendingPod& pod, const PendingContainer& container,
                                const std::string& region_dir) {
  ArbiterContainer record;
  record.key = pod.uid + "/" + container.name;
  record.region_dir = region_dir;
  record.policy = pod.core_hard ? CorePolicy::kHard : CorePolicy::kShare;
  record.priority = pod.priority;
  for (const core::GpuShare& g : container.gpus) {
    ArbiterSlot slot;
    slot.gpu = g.index;
    slot.share_ppm = static_cast<uint32_t>(std::clamp<int64_t>(g.core_milli, 0, 1000) * 1000);
    slot.limit_ppm = static_cast<uint32_t>(std::clamp<int64_t>(pod.core_limit_milli, 0, 1000) * 1000);
    record.slots.push_back(slot);
  }
  if (Status st = WriteArbiterRecord(region_dir, record); !st.ok()) {
    log_->warn("Allocate {}: {}; its compute share stays static", pod.Key(), st.message());
  }
}

Status Allocator::MarkAllocated(const PendingPod& pod, const std::string& container) {
  std::vector<std::string> done = pod.allocated;
  std::string rv = pod.resource_version;
  const std::string path = kube::PodPath(pod.ns, pod.name);
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (std::find(done.begin(), done.end(), container) == done.end()) done.push_back(container);
    std::string value;
    for (const auto& c : done) value += (value.empty() ? "" : ",") + c;
    nlohmann::json patch = {{"metadata", {{"resourceVersion", rv}, {"annotations", {{kAllocatedAnnotation, value}}}}}};
    auto patched = api_.Patch(path, kube::PatchType::kMerge, patch);
    if (patched.ok()) {
      // The next identification must see this pod allocated: the cache waits for this version.
      pods_.NoteWrite(*patched);
      return Status::Ok();
    }
    if (patched.status().code() != StatusCode::kFailedPrecondition) {
      return patched.status().WithContext("marking " + pod.Key() + " allocated");
    }
    log_->info("marking {} allocated: the pod changed since it was read (409); re-reading", pod.Key());
    TESSERA_ASSIGN_OR_RETURN(nlohmann::json fresh_json, api_.Get(path));
    TESSERA_ASSIGN_OR_RETURN(core::PodView fresh, core::DecodePod(fresh_json, paths_.resources));
    if (fresh.uid != pod.uid) return FailedPrecondition("pod " + pod.Key() + " was replaced while being allocated");
    rv = fresh.resource_version;
    done = AllocatedContainers(fresh);
  }
  return FailedPrecondition("marking " + pod.Key() + " allocated: still conflicting after 5 attempts");
}

Result<std::vector<std::string>> Allocator::Prefer(const std::string& resource,
                                                   const std::vector<std::string>& available,
                                                   const std::vector<std::string>& must_include, size_t size) {
  MutexLock lock(mu_);
  std::vector<std::string> available_gpus;
  for (const auto& id : available) {
    TESSERA_ASSIGN_OR_RETURN(std::string uuid, SlotGpu(id));
    available_gpus.push_back(std::move(uuid));
  }
  TESSERA_ASSIGN_OR_RETURN(NodePods::Snapshot read, ReadFor(resource, false));
  std::optional<Identified> next = NextToSteer(read.pending, size, available_gpus);
  if (!next && !read.listed) {
    // The cache may lag behind a pod bound a moment ago: decide on a LIST.
    TESSERA_ASSIGN_OR_RETURN(read, ReadFor(resource, true));
    next = NextToSteer(read.pending, size, available_gpus);
  }
  const std::vector<PendingPod>& pending = read.pending;
  if (!next) {
    log_->info("GetPreferredAllocation of {} slot(s) of {}: no pending container of that size asking for it fits "
               "the {} available slots; no preference", size, resource, available.size());
    steered_.erase(resource);
    return std::vector<std::string>{};
  }
  const PendingPod& pod = pending[next->pod];
  const PendingContainer& container = pod.containers[next->container];
  // Take must_include first when it lies on a wanted GPU, then the lowest free slot per GPU.
  std::vector<std::string> chosen;
  std::set<std::string> covered;
  for (const auto& id : must_include) {
    auto uuid = SlotGpu(id);
    if (uuid.ok() && !covered.count(*uuid)) {
      chosen.push_back(id);
      covered.insert(*uuid);
    }
  }
  for (const auto& share : container.gpus) {
    if (covered.count(share.uuid)) continue;
    for (size_t i = 0; i < available.size(); ++i) {
      if (available_gpus[i] == share.uuid) {
        chosen.push_back(available[i]);
        covered.insert(share.uuid);
        break;
      }
    }
  }
  Steer& steer = steered_[resource];
  steer.container = ContainerRef{pod.Key(), container.name};
  steer.ids = chosen;
  std::sort(steer.ids.begin(), steer.ids.end());
  log_->info("GetPreferredAllocation of {} slot(s) of {}: steering to [{}] for {} container {}, the oldest pending "
             "container of that size asking for it", size, resource, JoinUuids(chosen), pod.Key(), container.name);
  return chosen;
}

}  // namespace tessera::node
