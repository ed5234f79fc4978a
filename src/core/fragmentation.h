// The FGD fragmentation measure (Weng et al., USENIX ATC '23): how much of a
// node's idle GPU capacity the cluster's typical tasks could not use.
//
// A target workload is a set of task classes with popularity weights summing
// to 1. For one node, idle GPU milli counts as fragmented for a class unless
// the class fits there (model allowed, enough CPU, enough GPUs with enough
// free share); when it fits, only the GPUs too small for it count. The node's
// fragmentation is the weighted sum over classes. Pure functions; no I/O.
//
//   TargetWorkload w = TypicalWorkload(pods, 0.95);
//   double frag = NodeFragAmount(w, "T4", cpu_left, gpu_left);
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/model.h"

namespace tessera::core {

// One class of tasks: the shape the fragmentation measure asks about.
struct TaskClass {
  int64_t cpu_milli = 0;
  int64_t gpu_milli = 0;     // per GPU; 0 for CPU-only tasks
  int num_gpu = 0;
  ModelSelector models;      // allowed models; empty = any
  double weight = 0;         // popularity, sums to 1 over a workload
};

struct TargetWorkload {
  std::vector<TaskClass> classes;
};

// The class key of a pod (its first GPU container's shape; CPU-only pods have
// gpu_milli = num_gpu = 0).
TaskClass ClassOf(const PodRequest& pod);

// Groups pods by (cpu, gpu milli, GPU count, models), most popular first (ties:
// larger key first), and keeps classes until they cover `coverage` of the
// pods; weights are renormalised over the kept classes. Same rule as the FGD
// artifact's typical-pod selection.
TargetWorkload TypicalWorkload(const std::vector<PodRequest>& pods, double coverage = 0.95);

// Per-class fragmentation breakdown of one node, FGD's buckets. Sums are in
// GPU milli, weighted by class popularity.
struct FragBreakdown {
  double satisfied = 0;   // idle milli usable by the class (Q3 in FGD)
  double fragmented = 0;  // everything else, CPU-only classes included
  double idle() const { return satisfied + fragmented; }
};

// How one task class sees a node's free GPUs, the test at the heart of FGD's
// measure. `fits`: the class is a GPU class (num_gpu > 0, gpu_milli > 0), the
// node has its CPU (`cpu_left`), `model_allowed` (the caller's answer to
// c.models.Allows(model), so callers that cache it need not ask again), and
// at least num_gpu GPUs have gpu_milli or more free. `small`: when it fits,
// the free milli on the GPUs too small for it; 0 when it does not. CPU-only
// classes never fit: FGD counts all of a node's idle GPU milli as
// fragmented for them. Shared by NodeFragBreakdown and the tessera policy.
struct ClassFit {
  bool fits = false;
  int64_t small = 0;
};
inline ClassFit FitClass(const TaskClass& c, bool model_allowed, int64_t cpu_left,
                         std::span<const int64_t> gpu_left) {
  ClassFit out;
  if (c.num_gpu <= 0 || c.gpu_milli <= 0 || cpu_left < c.cpu_milli || !model_allowed) return out;
  int enough = 0;
  for (int64_t l : gpu_left) {
    if (l >= c.gpu_milli) ++enough; else out.small += l;
  }
  out.fits = enough >= c.num_gpu;
  if (!out.fits) out.small = 0;
  return out;
}

// Fragmented GPU milli of a node in the given state. `gpu_left` holds each
// GPU's free core milli (0..1000); all GPUs are of `model`.
double NodeFragAmount(const TargetWorkload& workload, const std::string& model,
                      int64_t cpu_left, std::span<const int64_t> gpu_left);
FragBreakdown NodeFragBreakdown(const TargetWorkload& workload, const std::string& model,
                                int64_t cpu_left, std::span<const int64_t> gpu_left);

}  // namespace tessera::core
