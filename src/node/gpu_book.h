// tessera-node's one book of what each GPU of its node has handed out,
// through both ways of asking for a share: device-plugin pods (their
// tessera.io/assignment) and prepared DRA claims (their allocation's
// consumedCapacity). kube-scheduler's DRA allocator counts only claims
// against a GPU's published capacity and Tessera's extender only
// device-plugin pods, so on a node serving both each may hand out a share the
// other holds; this book is the last line: the device plugin's Allocate
// (Allocator) and the DRA driver's NodePrepareResources (dra::DraService)
// both book a holder here, in one step that checks it against every other
// holder, and refuse what would over-commit a GPU's memory, compute or (for
// pods) slots. It is the node's only such check: CheckHandOut (handout.h)
// checks a pod against its own request and spec, not against other holders.
//
// What it holds, and from where:
//   - pods: booked by Book at a pod's first Allocate (before the pod is
//     marked allocated), and by SyncPods from any list of the node's pods
//     (every pod with an allocated container and this node's assignment,
//     not finished: the ones an agent before this one handed out); dropped
//     by Release (an Allocate that failed after booking), and by SyncPods
//     when the pod finished (Succeeded or Failed) or, in a LIST begun after
//     it was booked, is gone;
//   - claims: booked by Book at NodePrepareResources, restored by Restore
//     from the prepared claims' records after a restart, dropped by Release
//     at NodeUnprepareResources.
// Pure (no I/O). Thread-safe: every method takes one lock, so two Books
// never both see room only one of them fits in.
//
//   node::GpuBook book;
//   TESSERA_RETURN_IF_ERROR(book.Book({GpuHolder::Kind::kClaim, uid, "ns/c", shares}, gpus));
//   ...
//   book.Release(uid);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "node/pod_views.h"

namespace tessera::node {

// One holder of GPU shares: a pod or a claim.
struct GpuHolder {
  enum class Kind { kPod, kClaim };
  Kind kind = Kind::kPod;
  std::string uid;                     // the pod's or the claim's uid: the book's key
  std::string key;                     // namespace/name
  std::vector<core::GpuShare> shares;  // by GPU index; several on one GPU are summed
  // "pod ns/a" or "claim ns/c".
  std::string Describe() const;
  bool operator==(const GpuHolder&) const = default;
};

// The holder a device-plugin pod is for this node: its assignment's shares,
// every container's. NOT_FOUND when it has no assignment for `node` (or one
// that cannot be read): it holds nothing here.
Result<GpuHolder> HolderOfPod(const core::PodView& pod, const std::string& node);

class GpuBook {
 public:
  // Books `holder` when it fits on every GPU of its shares; this is the
  // node's one check of a GPU's room against other holders. A pod must fit
  // first beside the other pods alone: their memory (`gpus`' memory_mib; 0:
  // unchecked), 100 % of compute and max_sharers slots (each container of a
  // pod on a GPU takes one slot; claims take none; 0: unchecked). Then any
  // holder must fit beside every other, both kinds: memory and compute. A
  // whole GPU asked without a size holds all its memory. A holder booked
  // already (the same uid) is checked without its old entry, which the new
  // one replaces (a repeated prepare, a pod's later container). OK and
  // booked; otherwise nothing changes and:
  //   PERMISSION_DENIED: a pod over what the node handed to other pods (the
  //     room was given twice: a copied or forged assignment, which the agent
  //     counts and reports as refused); the message is worded as the agent
  //     always worded it: "pod ns/p: its tessera.io/assignment is not handed
  //     out: it wants 60 percent of GPU 1 (GPU-1)'s compute, 60 percent of
  //     it already handed to 1 container(s): together over 100 percent" (or
  //     "... MiB of its N MiB already handed to ...", or "GPU 1 (GPU-1) is
  //     already handed to 4 container(s), its limit is 4 at once");
  //   RESOURCE_EXHAUSTED: a pod that fits beside the pods but not beside the
  //     claims, or a claim that does not fit (the other path, or a repeated
  //     claim, took the room); the message names the holder, the GPU, the
  //     numbers and every holder already on that GPU;
  //   NOT_FOUND: a share on a GPU index `gpus` does not have.
  Status Book(const GpuHolder& holder, const std::vector<core::GpuInfo>& gpus) TESSERA_EXCLUDES(mu_);

  // Books `holder` without a check (what the node already handed out before
  // a restart), replacing an entry of the same uid.
  void Restore(const GpuHolder& holder) TESSERA_EXCLUDES(mu_);

  // Drops the holder `uid`; nothing when it holds nothing.
  void Release(const std::string& uid) TESSERA_EXCLUDES(mu_);

  // A number that grows with every booking. Take it before a LIST and pass
  // it to SyncPods as `listed_after`: a pod booked after it may be missing
  // from that LIST without being gone.
  uint64_t Generation() const TESSERA_EXCLUDES(mu_);

  // Brings the pods' side of the book up to `pods` (the node's pods, a LIST
  // or the watch cache): books every pod HolderOfPod reads, with at least
  // one container allocated and not finished, that the book lacks (Restore);
  // drops pod entries whose pod finished. When `listed_after` is given
  // (`pods` is a LIST begun after Generation() returned it), also drops pod
  // entries booked at or before it whose pod the list lacks. A pod booked
  // but not yet marked allocated stays while the list shows it unfinished.
  void SyncPods(const PodViews& pods, const std::string& node, std::optional<uint64_t> listed_after)
      TESSERA_EXCLUDES(mu_);

  // Every holder, by uid.
  std::vector<GpuHolder> Holders() const TESSERA_EXCLUDES(mu_);

  // What the device-plugin pods hold, summed per GPU index (claims left
  // out): the MiB (a whole GPU asked without a size counts as its card,
  // `gpus`' memory_mib) and compute. The DRA driver publishes each GPU's
  // card minus this (dra::SliceOptions::pod_held). A GPU no pod holds is
  // not named.
  std::map<int, core::GpuShare> PodHeld(const std::vector<core::GpuInfo>& gpus) const TESSERA_EXCLUDES(mu_);

  // `observer` is called after every change to the pods' side of the book
  // (a pod booked, restored, released or dropped by SyncPods; claims are not
  // told), on the thread that made it, with no lock of the book held, so it
  // may read the book; it must return quickly (the Allocator may be waiting)
  // and must not set an observer. Setting another (or an empty one) waits
  // for a call in flight, so after SetPodsObserver({}) returns the old one is
  // never called again.
  void SetPodsObserver(std::function<void()> observer) TESSERA_EXCLUDES(observer_mu_);

 private:
  struct Entry {
    GpuHolder holder;
    uint64_t booked_at = 0;  // generation_ when booked
  };
  void Put(const GpuHolder& holder) TESSERA_REQUIRES(mu_);
  // Book's two checks of `add` (the holder's shares on `gpu`, summed):
  // beside the other pods alone (PERMISSION_DENIED), beside every other
  // holder (RESOURCE_EXHAUSTED).
  Status FitsBesidePods(const GpuHolder& pod, const core::GpuShare& add, const core::GpuInfo& gpu) const
      TESSERA_REQUIRES(mu_);
  Status FitsBesideAll(const GpuHolder& holder, const core::GpuShare& add, const core::GpuInfo& gpu) const
      TESSERA_REQUIRES(mu_);
  // Calls the observer (after a change to the pods' side, mu_ released).
  void PodsChanged() TESSERA_EXCLUDES(mu_, observer_mu_);

  // Held while the observer runs (which may take mu_); never taken under mu_.
  Mutex observer_mu_;
  std::function<void()> observer_ TESSERA_GUARDED_BY(observer_mu_);
  mutable Mutex mu_;
  std::map<std::string, Entry> entries_ TESSERA_GUARDED_BY(mu_);  // by uid
  uint64_t generation_ TESSERA_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::node
