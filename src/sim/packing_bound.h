// A lower bound on the GPU time any placement of a given set of GPU shares
// must leave free: how well the shares a replay placed could have been packed
// with hindsight, to tell what a better online policy could still gain from
// what is forced by the shares' sizes (470 + 470 leaves 60 whatever the
// policy; an 810 leaves 190 unless one of the rare shares of <= 190 joins it).
//
// The bound is the linear relaxation of packing the shares onto GPUs of 1000
// milli each (the cutting-stock LP: choose how often to use each "pattern",
// a multiset of shares that fits one GPU, to cover every share), solved by
// column generation: GLPK's simplex solves the LP over the patterns found so
// far, and a knapsack over the share sizes, priced by the LP's duals, finds
// the pattern that would lower the count most, until none would. Its optimum
// rounded up is at most the number of GPUs any packing needs, so
//   free milli >= gpus * 1000 - (the shares' total milli)
// for every placement of exactly these shares, whatever the nodes, CPU and
// memory (which only constrain placements further). It says nothing about a
// policy that would have placed other pods.
//
// Thread-safety: each call builds and frees its own GLPK problem, but GLPK's
// environment (its memory accounting, terminal settings) is shared unless
// GLPK was built reentrant; tessera-sim computes bounds on one thread, after
// the replays, and nothing here relies on more.
//
//   TESSERA_ASSIGN_OR_RETURN(PackingBound b, SharePackingBound({{470, 2}, {810, 1}}));
//   // b.gpus == 2, b.free_milli == 60 + 190
#pragma once

#include <cstdint>
#include <map>

#include "core/status.h"

namespace tessera::sim {

struct PackingBound {
  double lp_gpus = 0;      // the LP optimum (fractional GPUs)
  int64_t gpus = 0;        // lp_gpus rounded up: no packing uses fewer
  int64_t free_milli = 0;  // gpus * 1000 - the shares' total: no packing leaves less free
  // A packing that exists, for how close the bound is: best fit decreasing
  // with hindsight (largest share first, each onto the GPU it fills best).
  // The best packing lies between the two.
  int64_t fit_gpus = 0;
  int64_t fit_free_milli = 0;
};

// `shares`: share milli (1..999) -> how many (> 0). Empty: all zero.
// INVALID_ARGUMENT for a size or count outside those ranges; INTERNAL when
// GLPK fails or the generation does not settle within its iteration cap.
Result<PackingBound> SharePackingBound(const std::map<int64_t, int64_t>& shares);

}  // namespace tessera::sim
