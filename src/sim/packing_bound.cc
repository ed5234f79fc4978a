#include "sim/packing_bound.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/model.h"

namespace tessera::sim {
namespace {

constexpr int64_t kGpu = core::kCoreMilliPerGpu;
// Patterns added before giving up; the openb traces settle within about 60.
constexpr int kMaxPatterns = 5000;
// A pattern enters only when its dual value beats its cost (1) by this much.
constexpr double kEpsilon = 1e-9;

struct DeleteProblem {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};

// The shares as the knapsack sees them: sizes in units of their greatest
// common divisor with 1000, and how many of each one GPU can hold.
struct Items {
  std::vector<int64_t> size;   // per share type, in units
  std::vector<int64_t> limit;  // per share type: min(count, what fits one GPU)
  int64_t capacity = 0;        // one GPU, in units
};

Items MakeItems(const std::map<int64_t, int64_t>& shares) {
  int64_t unit = kGpu;
  for (const auto& [milli, count] : shares) unit = std::gcd(unit, milli);
  Items items;
  items.capacity = kGpu / unit;
  for (const auto& [milli, count] : shares) {
    items.size.push_back(milli / unit);
    items.limit.push_back(std::min(count, kGpu / milli));
  }
  return items;
}

// The multiset of shares that fits one GPU with the largest total dual
// value (a bounded knapsack, each type split into 1, 2, 4, ... copies).
std::vector<int64_t> BestPattern(const Items& items, const std::vector<double>& dual, double* value) {
  struct Piece {
    size_t type;
    int64_t copies;
  };
  std::vector<Piece> pieces;
  for (size_t i = 0; i < items.size.size(); ++i) {
    if (dual[i] <= 0) continue;  // adds nothing to the value
    for (int64_t left = items.limit[i], copies = 1; left > 0; copies *= 2) {
      const int64_t take = std::min(copies, left);
      pieces.push_back({i, take});
      left -= take;
    }
  }
  const size_t cap = static_cast<size_t>(items.capacity);
  std::vector<double> best(cap + 1, 0.0);
  std::vector<std::vector<bool>> taken(pieces.size(), std::vector<bool>(cap + 1, false));
  for (size_t k = 0; k < pieces.size(); ++k) {
    const size_t weight = static_cast<size_t>(items.size[pieces[k].type] * pieces[k].copies);
    const double gain = dual[pieces[k].type] * static_cast<double>(pieces[k].copies);
    for (size_t c = cap; c >= weight && weight > 0; --c) {
      if (best[c - weight] + gain > best[c]) {
        best[c] = best[c - weight] + gain;
        taken[k][c] = true;
      }
      if (c == weight) break;
    }
  }
  std::vector<int64_t> pattern(items.size.size(), 0);
  size_t c = cap;
  for (size_t k = pieces.size(); k-- > 0;) {
    if (!taken[k][c]) continue;
    pattern[pieces[k].type] += pieces[k].copies;
    c -= static_cast<size_t>(items.size[pieces[k].type] * pieces[k].copies);
  }
  *value = best[cap];
  return pattern;
}

void AddPattern(glp_prob* lp, const std::vector<int64_t>& pattern) {
  const int col = glp_add_cols(lp, 1);
  glp_set_col_bnds(lp, col, GLP_LO, 0.0, 0.0);
  glp_set_obj_coef(lp, col, 1.0);
  std::vector<int> rows = {0};  // GLPK's arrays start at index 1
  std::vector<double> counts = {0.0};
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == 0) continue;
    rows.push_back(static_cast<int>(i) + 1);
    counts.push_back(static_cast<double>(pattern[i]));
  }
  glp_set_mat_col(lp, col, static_cast<int>(rows.size()) - 1, rows.data(), counts.data());
}

// GPUs used by best fit decreasing: each share, largest first, onto the
// GPU whose free share it fits most tightly, or a new GPU.
int64_t BestFitDecreasingGpus(const std::map<int64_t, int64_t>& shares) {
  std::multiset<int64_t> free;  // per GPU opened
  for (auto it = shares.rbegin(); it != shares.rend(); ++it) {
    for (int64_t k = 0; k < it->second; ++k) {
      auto tightest = free.lower_bound(it->first);
      if (tightest == free.end()) {
        free.insert(kGpu - it->first);
      } else {
        const int64_t left = *tightest - it->first;
        free.erase(tightest);
        free.insert(left);
      }
    }
  }
  return static_cast<int64_t>(free.size());
}

}  // namespace

Result<PackingBound> SharePackingBound(const std::map<int64_t, int64_t>& shares) {
  int64_t total = 0;
  for (const auto& [milli, count] : shares) {
    if (milli <= 0 || milli >= kGpu) {
      return InvalidArgument("share of " + std::to_string(milli) + " milli: a share is 1..999 milli of one GPU");
    }
    if (count <= 0) return InvalidArgument("share of " + std::to_string(milli) + " milli: count " +
                                           std::to_string(count) + " is not positive");
    total += milli * count;
  }
  if (shares.empty()) return PackingBound{};

  const Items items = MakeItems(shares);
  std::unique_ptr<glp_prob, DeleteProblem> lp(glp_create_prob());
  glp_set_obj_dir(lp.get(), GLP_MIN);
  // One row per share size: the patterns used must hold all its shares.
  glp_add_rows(lp.get(), static_cast<int>(shares.size()));
  int row = 1;
  for (const auto& [milli, count] : shares) glp_set_row_bnds(lp.get(), row++, GLP_LO, static_cast<double>(count), 0.0);
  // Start from one pattern per size: as many of it as one GPU holds.
  for (size_t i = 0; i < items.size.size(); ++i) {
    std::vector<int64_t> pattern(items.size.size(), 0);
    pattern[i] = items.limit[i];
    AddPattern(lp.get(), pattern);
  }

  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  std::vector<double> dual(items.size.size());
  double best_value = 1.0;  // the last pricing's best pattern value, in units of its cost
  for (int added = 0;; ++added) {
    if (const int rc = glp_simplex(lp.get(), &parm); rc != 0 || glp_get_status(lp.get()) != GLP_OPT) {
      return Internal("packing bound: GLPK's simplex failed (code " + std::to_string(rc) + ", status " +
                      std::to_string(glp_get_status(lp.get())) + ")");
    }
    for (size_t i = 0; i < dual.size(); ++i) dual[i] = glp_get_row_dual(lp.get(), static_cast<int>(i) + 1);
    double value = 0;
    std::vector<int64_t> pattern = BestPattern(items, dual, &value);
    best_value = std::max(1.0, value);
    if (value <= 1.0 + kEpsilon) break;  // no pattern lowers the count: optimal
    if (added == kMaxPatterns) {
      return Internal("packing bound: no optimum after " + std::to_string(kMaxPatterns) + " patterns");
    }
    AddPattern(lp.get(), pattern);
  }
  PackingBound bound;
  // The patterns found so far may miss one worth up to kEpsilon more than
  // its cost; dividing by the best value found keeps this a lower bound
  // (Farley's bound), and the rounding up leaves room for the simplex's
  // rounding error, so it errs low by at most one GPU, never high.
  bound.lp_gpus = glp_get_obj_val(lp.get()) / best_value;
  bound.gpus = static_cast<int64_t>(std::ceil(bound.lp_gpus - 1e-4));
  bound.free_milli = bound.gpus * kGpu - total;
  bound.fit_gpus = BestFitDecreasingGpus(shares);
  bound.fit_free_milli = bound.fit_gpus * kGpu - total;
  return bound;
}

}  // namespace tessera::sim
