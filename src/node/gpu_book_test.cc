// The node's one book of GPU shares: device-plugin pods checked against each
// other (memory, compute, slots) and against DRA claims, repeats, releases,
// and the pods' side kept current from pod lists without losing a pod booked
// a moment ago.
#include "node/gpu_book.h"

#include <gtest/gtest.h>

#include "node/test_fixtures.h"

namespace tessera::node {
namespace {

using testing::AssignedPod;
using testing::TwoGpus;  // GPU-0 and GPU-1, 16384 MiB each

GpuHolder Claim(const std::string& uid, int gpu, int64_t mem_mib, int64_t core_milli) {
  return {GpuHolder::Kind::kClaim, uid, "ns/" + uid, {{gpu, "GPU-" + std::to_string(gpu), mem_mib, core_milli}}};
}
GpuHolder Pod(const std::string& uid, int gpu, int64_t mem_mib, int64_t core_milli) {
  return {GpuHolder::Kind::kPod, uid, "ns/" + uid, {{gpu, "GPU-" + std::to_string(gpu), mem_mib, core_milli}}};
}

// AssignedPod `name` with uid `uid`, namespace ns, its containers allocated when `allocated`.
nlohmann::json PodJson(const std::string& name, const std::string& uid, int gpu, int64_t mem_mib, int core_percent,
                       bool allocated, const std::string& phase = "Running") {
  nlohmann::json pod = AssignedPod(name, "2024-01-01T00:00:01Z", {{"main", gpu, mem_mib, core_percent}});
  pod["metadata"]["namespace"] = "ns";
  pod["metadata"]["uid"] = uid;
  if (allocated) pod["metadata"]["annotations"]["tessera.io/allocated"] = "main";
  pod["status"]["phase"] = phase;
  return pod;
}
std::shared_ptr<const core::PodView> View(const std::string& name, const std::string& uid, int gpu, int64_t mem_mib,
                                          int core_percent, bool allocated, const std::string& phase = "Running") {
  return testing::Decoded(PodJson(name, uid, gpu, mem_mib, core_percent, allocated, phase));
}

// What the Allocator does at `pod`'s first Allocate: the book brought up to
// the node's pods (`others` and `pod`, as one read), then `pod` booked.
Status BookBeside(const nlohmann::json& pod, const std::vector<nlohmann::json>& others, GpuBook& book) {
  PodViews all;
  for (const nlohmann::json& p : others) all.push_back(testing::Decoded(p));
  auto view = testing::Decoded(pod);
  all.push_back(view);
  book.SyncPods(all, "n1", std::nullopt);
  TESSERA_ASSIGN_OR_RETURN(GpuHolder holder, HolderOfPod(*view, "n1"));
  return book.Book(holder, TwoGpus());
}
Status BookBeside(const nlohmann::json& pod, const std::vector<nlohmann::json>& others) {
  GpuBook book;
  return BookBeside(pod, others, book);
}

TEST(GpuBookTest, AClaimDoesNotGetTheMemoryADevicePluginPodHolds) {
  GpuBook book;
  ASSERT_TRUE(book.Book(Pod("a", 0, 12288, 300), TwoGpus()).ok());
  Status st = book.Book(Claim("c", 0, 8192, 200), TwoGpus());
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "claim ns/c cannot have 8192 MiB and 20 percent of GPU 0 (GPU-0): 12288 MiB of its 16384 MiB are held "
            "by pod ns/a (12288 MiB and 30 percent); together over its memory");
  EXPECT_EQ(book.Holders().size(), 1u);  // nothing booked
  EXPECT_TRUE(book.Book(Claim("c", 0, 4096, 200), TwoGpus()).ok());   // what is left fits
  EXPECT_TRUE(book.Book(Claim("d", 1, 16384, 1000), TwoGpus()).ok());  // another GPU is apart
}

TEST(GpuBookTest, APodDoesNotGetTheComputeClaimsHoldAndTheReasonNamesThemAll) {
  GpuBook book;
  ASSERT_TRUE(book.Book(Claim("c1", 1, 1024, 500), TwoGpus()).ok());
  ASSERT_TRUE(book.Book(Claim("c2", 1, 1024, 400), TwoGpus()).ok());
  Status st = book.Book(Pod("p", 1, 1024, 200), TwoGpus());
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "pod ns/p cannot have 1024 MiB and 20 percent of GPU 1 (GPU-1): 90 percent of its compute is held by "
            "claim ns/c1 (1024 MiB and 50 percent), claim ns/c2 (1024 MiB and 40 percent); together over 100 "
            "percent");
  EXPECT_TRUE(book.Book(Pod("p", 1, 1024, 100), TwoGpus()).ok());
}

TEST(GpuBookTest, AWholeGpuAskedWithoutASizeHoldsAllItsMemory) {
  GpuBook book;
  ASSERT_TRUE(book.Book(Pod("whole", 0, 0, 1000), TwoGpus()).ok());
  Status st = book.Book(Claim("c", 0, 1, 0), TwoGpus());  // a memory-only claim, no compute
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
}

TEST(GpuBookTest, ARepeatReplacesItsOwnEntryAndReleaseFreesIt) {
  GpuBook book;
  ASSERT_TRUE(book.Book(Claim("c", 0, 16384, 1000), TwoGpus()).ok());
  EXPECT_TRUE(book.Book(Claim("c", 0, 16384, 1000), TwoGpus()).ok());  // a repeated prepare: not against itself
  EXPECT_EQ(book.Holders().size(), 1u);
  EXPECT_FALSE(book.Book(Pod("p", 0, 1, 0), TwoGpus()).ok());
  book.Release("c");
  book.Release("never-booked");
  EXPECT_TRUE(book.Book(Pod("p", 0, 1, 0), TwoGpus()).ok());
}

// A pod against the other pods alone: the checks the node made in
// CheckHandOut before the book was its one check, with the same code and
// words (a copied or forged assignment; the agent's Events and metrics count
// PERMISSION_DENIED as refused).
TEST(GpuBookTest, APodBesideOtherPodsThatLeaveRoomIsBooked) {
  EXPECT_TRUE(BookBeside(PodJson("p", "uid-p", 0, 4096, 30, false), {PodJson("a", "uid-a", 0, 8192, 70, true)}).ok());
}

TEST(GpuBookTest, ACopiedAssignmentThatOverbooksTheGpuIsRefused) {
  // Three pods of 12 GiB / 40 % copied onto one 16 GiB GPU: the first fits,
  // the second goes over the memory and the third over the compute.
  const nlohmann::json first = PodJson("first", "uid-first", 1, 12288, 40, true);
  const Status mem = BookBeside(PodJson("copy", "uid-copy", 1, 12288, 40, false), {first});
  EXPECT_EQ(mem.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(mem.message(),
            "pod ns/copy: its tessera.io/assignment is not handed out: it wants 12288 MiB of GPU 1 (GPU-1), 12288 "
            "MiB of its 16384 MiB already handed to 1 container(s)");
  const Status core = BookBeside(PodJson("copy", "uid-copy", 1, 1024, 40, false),
                                 {first, PodJson("second", "uid-second", 1, 1024, 40, true)});
  EXPECT_EQ(core.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(core.message().find("40 percent of GPU 1 (GPU-1)'s compute, 80 percent of it already handed"),
            std::string::npos)
      << core.message();
}

TEST(GpuBookTest, PodsContainersTakeSlotsAndClaimsTakeNone) {
  std::vector<nlohmann::json> four;
  for (int i = 0; i < 4; ++i) {
    four.push_back(PodJson("s" + std::to_string(i), "uid-s" + std::to_string(i), 0, 1024, 10, true));
  }
  const Status st = BookBeside(PodJson("fifth", "uid-fifth", 0, 1024, 10, false), four);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("GPU 0 (GPU-0) is already handed to 4 container(s), its limit is 4 at once"),
            std::string::npos)
      << st.message();
  // Three pods and two claims: the fourth pod still has a slot.
  GpuBook book;
  ASSERT_TRUE(book.Book(Claim("c1", 0, 1024, 100), TwoGpus()).ok());
  ASSERT_TRUE(book.Book(Claim("c2", 0, 1024, 100), TwoGpus()).ok());
  four.pop_back();
  EXPECT_TRUE(BookBeside(PodJson("fourth", "uid-fourth", 0, 1024, 10, false), four, book).ok());
  EXPECT_EQ(book.Book(Pod("uid-fifth", 0, 1024, 100), TwoGpus()).code(), StatusCode::kPermissionDenied);
}

TEST(GpuBookTest, OnlyHandedOutLivePodsOfThisNodeCountAgainstAPod) {
  const nlohmann::json pod = PodJson("p", "uid-p", 0, 4096, 30, false);
  const nlohmann::json finished = PodJson("full", "uid-full", 0, 16384, 100, true, "Succeeded");
  const nlohmann::json failed = PodJson("failed", "uid-failed", 0, 16384, 100, true, "Failed");
  const nlohmann::json not_yet = PodJson("bound", "uid-bound", 0, 16384, 100, false);  // nothing handed out yet
  nlohmann::json elsewhere = PodJson("elsewhere", "uid-elsewhere", 0, 16384, 100, true);
  elsewhere["spec"]["nodeName"] = "n2";
  EXPECT_TRUE(BookBeside(pod, {finished, failed, not_yet, elsewhere}).ok());
  // Being deleted still counts: its containers may still run.
  nlohmann::json deleting = PodJson("deleting", "uid-deleting", 0, 16384, 100, true);
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  EXPECT_EQ(BookBeside(pod, {deleting}).code(), StatusCode::kPermissionDenied);
  // The pod itself is never counted twice (its later containers).
  GpuBook book;
  EXPECT_TRUE(BookBeside(PodJson("p", "uid-p", 0, 4096, 30, true), {}, book).ok());
  EXPECT_TRUE(BookBeside(pod, {}, book).ok());
}

// Over the pods alone is a refused assignment; over the pods and the claims
// together, the other path took the room.
TEST(GpuBookTest, APodOverThePodsIsRefusedAndOverTheClaimsExhausted) {
  GpuBook book;
  ASSERT_TRUE(book.Book(Claim("c", 0, 1024, 300), TwoGpus()).ok());
  const nlohmann::json a = PodJson("a", "uid-a", 0, 1024, 60, true);
  Status st = BookBeside(PodJson("b", "uid-b", 0, 1024, 50, false), {a}, book);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  st = BookBeside(PodJson("b", "uid-b", 0, 1024, 20, false), {a}, book);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "pod ns/b cannot have 1024 MiB and 20 percent of GPU 0 (GPU-0): 90 percent of its compute is held by "
            "claim ns/c (1024 MiB and 30 percent), pod ns/a (1024 MiB and 60 percent); together over 100 percent");
  EXPECT_TRUE(BookBeside(PodJson("b", "uid-b", 0, 1024, 10, false), {a}, book).ok());
  // A whole GPU asked without a size holds its memory against pods too.
  GpuBook whole;
  ASSERT_TRUE(whole.Book(Pod("uid-whole", 1, 0, 1000), TwoGpus()).ok());
  EXPECT_EQ(whole.Book(Pod("uid-small", 1, 1, 0), TwoGpus()).code(), StatusCode::kPermissionDenied);
}

TEST(GpuBookTest, AShareOnAGpuTheNodeLacksIsNotFound) {
  GpuBook book;
  EXPECT_EQ(book.Book(Claim("c", 5, 1, 0), TwoGpus()).code(), StatusCode::kNotFound);
}

TEST(GpuBookTest, SyncBooksAllocatedPodsAndDropsFinishedOnes) {
  GpuBook book;
  PodViews pods = {View("a", "uid-a", 0, 8192, 30, /*allocated=*/true),
                   View("pending", "uid-p", 0, 8192, 30, /*allocated=*/false),
                   View("done", "uid-d", 0, 8192, 30, /*allocated=*/true, "Succeeded")};
  book.SyncPods(pods, "n1", std::nullopt);
  std::vector<GpuHolder> holders = book.Holders();
  ASSERT_EQ(holders.size(), 1u);  // only the allocated, unfinished pod
  EXPECT_EQ(holders[0].Describe(), "pod ns/a");
  EXPECT_EQ(holders[0].shares, (std::vector<core::GpuShare>{{0, "GPU-0", 8192, 300}}));
  // Another node's pods are not this node's.
  GpuBook other;
  other.SyncPods(pods, "n2", std::nullopt);
  EXPECT_TRUE(other.Holders().empty());

  // The pod finishes: its share is free for a claim.
  EXPECT_FALSE(book.Book(Claim("c", 0, 12288, 0), TwoGpus()).ok());
  book.SyncPods({View("a", "uid-a", 0, 8192, 30, true, "Failed")}, "n1", std::nullopt);
  EXPECT_TRUE(book.Book(Claim("c", 0, 12288, 0), TwoGpus()).ok());
  // Claims are never dropped by a pod list.
  book.SyncPods({}, "n1", book.Generation());
  ASSERT_EQ(book.Holders().size(), 1u);
  EXPECT_EQ(book.Holders()[0].Describe(), "claim ns/c");
}

TEST(GpuBookTest, APodMissingFromAListIsDroppedOnlyWhenTheListBeganAfterItsBooking) {
  GpuBook book;
  const uint64_t before = book.Generation();
  ASSERT_TRUE(book.Book(Pod("uid-a", 0, 8192, 300), TwoGpus()).ok());  // Allocate booked it; not yet marked
  // A watch cache that lags, and a LIST begun before the booking: it stays.
  book.SyncPods({}, "n1", std::nullopt);
  book.SyncPods({}, "n1", before);
  EXPECT_EQ(book.Holders().size(), 1u);
  // A list that shows it pending (not yet marked allocated) keeps it too.
  book.SyncPods({View("a", "uid-a", 0, 8192, 30, false)}, "n1", book.Generation());
  EXPECT_EQ(book.Holders().size(), 1u);
  // A LIST begun after the booking without the pod: it is gone.
  book.SyncPods({}, "n1", book.Generation());
  EXPECT_TRUE(book.Holders().empty());
}

// What the DRA driver's slice subtracts: the pods' shares per GPU, a whole
// GPU asked without a size as its card; claims left out.
TEST(GpuBookTest, PodHeldSumsThePodsPerGpuAndLeavesClaimsOut) {
  GpuBook book;
  ASSERT_TRUE(book.Book(Pod("a", 0, 4096, 300), TwoGpus()).ok());
  ASSERT_TRUE(book.Book(Pod("b", 0, 2048, 105), TwoGpus()).ok());
  ASSERT_TRUE(book.Book(Pod("whole", 1, 0, 1000), TwoGpus()).ok());
  book.Release("whole");
  ASSERT_TRUE(book.Book(Claim("c", 0, 1024, 100), TwoGpus()).ok());
  EXPECT_EQ(book.PodHeld(TwoGpus()), (std::map<int, core::GpuShare>{{0, {0, "GPU-0", 6144, 405}}}));
  ASSERT_TRUE(book.Book(Pod("whole", 1, 0, 1000), TwoGpus()).ok());
  EXPECT_EQ(book.PodHeld(TwoGpus()).at(1), (core::GpuShare{1, "GPU-1", 16384, 1000}));
}

// The observer hears of every change to the pods' side, and only of those.
TEST(GpuBookTest, TheObserverIsToldOfPodChangesNotOfClaims) {
  GpuBook book;
  int told = 0;
  book.SetPodsObserver([&] {
    ++told;
    book.Holders();  // may read the book: no lock of it is held
  });
  ASSERT_TRUE(book.Book(Pod("uid-a", 0, 4096, 300), TwoGpus()).ok());
  EXPECT_EQ(told, 1);
  ASSERT_TRUE(book.Book(Claim("c", 0, 1024, 100), TwoGpus()).ok());
  book.Release("c");
  book.Release("nobody");
  EXPECT_FALSE(book.Book(Pod("too-big", 0, 16384, 0), TwoGpus()).ok());  // refused: nothing changed
  EXPECT_EQ(told, 1);
  book.SyncPods({View("b", "uid-b", 1, 1024, 10, true)}, "n1", std::nullopt);  // booked from the list
  EXPECT_EQ(told, 2);
  book.SyncPods({View("b", "uid-b", 1, 1024, 10, true)}, "n1", std::nullopt);  // nothing new
  EXPECT_EQ(told, 2);
  book.SyncPods({}, "n1", book.Generation());  // both gone: one call
  EXPECT_EQ(told, 3);
  book.Restore(Pod("uid-a", 0, 4096, 300));
  book.Release("uid-a");
  EXPECT_EQ(told, 5);
  book.SetPodsObserver({});
  book.Restore(Pod("uid-a", 0, 4096, 300));
  EXPECT_EQ(told, 5);
}

}  // namespace
}  // namespace tessera::node
