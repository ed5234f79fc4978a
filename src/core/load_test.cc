#include "core/load.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tessera::core {
namespace {

PodRequest SharePod(const std::string& key, int gpus, int64_t core) {
  PodRequest p;
  p.key = key;
  p.cpu_milli = 1000;
  ContainerRequest c;
  c.name = "main";
  c.gpu_count = gpus;
  c.core_milli_per_gpu = core;
  p.containers.push_back(c);
  return p;
}

TEST(WorkloadKey, LabelWinsOverOwnerAndNeitherMeansNoHistory) {
  EXPECT_EQ(WorkloadKey("ml", "trainer", "Job", "train-7"), "label/ml/trainer");
  EXPECT_EQ(WorkloadKey("ml", "", "Deployment", "web"), "Deployment/ml/web");
  EXPECT_EQ(WorkloadKey("ml", "", "", ""), "");
}

TEST(WorkloadHistory, UnknownEmptyAndStaleKeysPredictNothing) {
  WorkloadHistoryOptions o;
  o.max_age_s = 100;
  WorkloadHistory h(o);
  EXPECT_FALSE(h.Predict("a", 0));
  h.Observe("", 0.5, 0);
  EXPECT_EQ(h.size(), 0u);
  h.Observe("a", 0.4, 10);
  ASSERT_TRUE(h.Predict("a", 110));
  EXPECT_FALSE(h.Predict("a", 111));  // older than max_age_s
}

TEST(WorkloadHistory, FirstObservationIsThePredictionThenEwmaWithSpread) {
  WorkloadHistoryOptions o;
  o.alpha = 0.5;
  o.spread_weight = 1.0;
  WorkloadHistory h(o);
  h.Observe("w", 0.2, 0);
  EXPECT_DOUBLE_EQ(*h.Predict("w", 0), 0.2);
  h.Observe("w", 0.6, 1);
  // deviation = 0.5 * |0.6 - 0.2| = 0.2; mean = 0.4; prediction 0.6
  EXPECT_NEAR(*h.Predict("w", 1), 0.6, 1e-12);
  // A steady workload's spread decays towards its mean.
  for (int i = 0; i < 40; ++i) h.Observe("w", 0.4, 2 + i);
  EXPECT_NEAR(*h.Predict("w", 50), 0.4, 1e-6);
  o.spread_weight = 0;
  WorkloadHistory plain(o);
  plain.Observe("w", 0.2, 0);
  plain.Observe("w", 0.6, 1);
  EXPECT_NEAR(*plain.Predict("w", 1), 0.4, 1e-12);
}

TEST(WorkloadHistory, ClampsIgnoresNanAndEvictsTheLeastRecentlyObserved) {
  WorkloadHistoryOptions o;
  o.max_keys = 2;
  WorkloadHistory h(o);
  h.Observe("a", 1.7, 5);
  EXPECT_DOUBLE_EQ(*h.Predict("a", 5), 1.0);
  h.Observe("a", std::nan(""), 6);
  EXPECT_DOUBLE_EQ(*h.Predict("a", 6), 1.0);
  h.Observe("b", -0.3, 1);
  EXPECT_DOUBLE_EQ(*h.Predict("b", 6), 0.0);
  h.Observe("c", 0.5, 7);  // evicts b (observed at 1), keeps a (5)
  EXPECT_EQ(h.size(), 2u);
  EXPECT_TRUE(h.Predict("a", 7));
  EXPECT_FALSE(h.Predict("b", 7));
  EXPECT_TRUE(h.Predict("c", 7));
}

TEST(PredictBusy, HistoryCappedAtTheRequestElseFactorTimesRequest) {
  PodRequest p = SharePod("p", 1, 400);
  ContainerRequest side;
  side.name = "side";
  p.containers.push_back(side);  // no GPU
  EXPECT_EQ(PredictBusy(p, std::nullopt, 1.0), (std::vector<int64_t>{400, 0}));
  EXPECT_EQ(PredictBusy(p, std::nullopt, 0.5), (std::vector<int64_t>{200, 0}));
  EXPECT_EQ(PredictBusy(p, 0.25, 1.0), (std::vector<int64_t>{250, 0}));
  EXPECT_EQ(PredictBusy(p, 0.9, 1.0), (std::vector<int64_t>{400, 0}));  // throttled to its share
  PodRequest mem_only = SharePod("m", 1, 0);
  mem_only.containers[0].mem_mib_per_gpu = 1024;
  EXPECT_EQ(PredictBusy(mem_only, std::nullopt, 0.6), (std::vector<int64_t>{600}));
  EXPECT_EQ(PredictBusy(SharePod("w", 2, 1000), std::nullopt, 1.5), (std::vector<int64_t>{1000}));
}

TEST(GpuLoadBook, BooksExpectedBusyOnTheAssignedGpusAndReleases) {
  GpuLoadBook book;
  PodRequest a = SharePod("a", 1, 500);
  PodRequest b = SharePod("b", 2, 1000);
  Assignment aa;
  aa.node = "n";
  aa.containers.push_back({"main", {{1, "", 0, 500}}});
  Assignment ba;
  ba.node = "n";
  ba.containers.push_back({"main", {{0, "", 0, 1000}, {1, "", 0, 1000}}});
  book.Expect("a", {200});
  ASSERT_NE(book.Expected("a"), nullptr);
  book.Place(a, aa);
  book.Place(b, ba);  // no Expect: its full request
  EXPECT_EQ(book.GpuBusy("n", 0), 1000);
  EXPECT_EQ(book.GpuBusy("n", 1), 1200);
  EXPECT_EQ(book.GpuBusy("n", 2), 0);
  EXPECT_EQ(book.GpuBusy("other", 0), 0);
  book.Place(a, aa);  // placing again replaces, not doubles
  EXPECT_EQ(book.GpuBusy("n", 1), 1200);
  book.Release("a");
  EXPECT_EQ(book.GpuBusy("n", 1), 1000);
  EXPECT_EQ(book.Expected("a"), nullptr);
  book.Release("a");  // unknown: ignored
  book.Release("b");
  EXPECT_EQ(book.GpuBusy("n", 0), 0);
  EXPECT_EQ(book.GpuBusy("n", 1), 0);
}

}  // namespace
}  // namespace tessera::core
