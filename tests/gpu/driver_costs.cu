// What the launch gate's building blocks cost on a real GPU, without the
// library: the numbers its design rests on. Reports, never fails (exit 0
// unless CUDA itself fails).
//   gpu_driver_costs
// Three parts, one RESULT line each:
//   calls    host time of one call, median of 51 batches of 2000 calls:
//            cuCtxGetCurrent, cuStreamIsCapturing, a pair of
//            cuThreadExchangeStreamCaptureMode, cuEventQuery of a completed
//            event, cuEventRecord of a timing and of a DISABLE_TIMING event
//            on an idle stream, and an empty kernel's launch (the baseline)
//   events   wall time of a burst of 32 ~20 us kernels and the synchronize
//            after it (median of 101 bursts), with nothing between the
//            kernels, with a timing event after each, with one after every
//            8th, and with a DISABLE_TIMING event after each: what events
//            cost the GPU
//   slicing  two processes at once on GPU 0, each timing its own ~1 ms
//            fixed-work kernels with events (start and end recorded around each
//            kernel, or `chained`: the previous kernel's end as the next
//            one's start while it is still queued), unpaced or paced by a
//            host-side token bucket to 30 % and 70 % of the GPU. Per
//            process: the GPU time its kernels really took (kernels x the
//            kernel's time alone) and the time its events measured, as
//            fractions of the wall time. Measured above real is another
//            context's time-slices inside this one's event spans: what a
//            gate charging by events over-charges under time-slicing.
//            Also per process, from each kernel's span: the slices. A span
//            within 1.2x the kernel's time alone ran in one piece; the
//            excess of the others is a neighbour's slice inside it (median
//            and 90th percentile reported), and the mean count of
//            consecutive one-piece kernels times the kernel's time is this
//            process's slice: what the gate's correction assumes about a
//            run that starts on an idle stream (docs/interception.md).
// The parent re-runs itself for each slicing process (TESSERA_GPU_CHILD).
#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "result_line.h"
#include "test_kernels.cuh"

namespace {

using Clock = std::chrono::steady_clock;

__global__ void Empty() {}

#define CU_OK(expr)                                                          \
  do {                                                                       \
    CUresult r_ = (expr);                                                    \
    if (r_ != CUDA_SUCCESS) {                                                \
      std::fprintf(stderr, "%s:%d: %s: error %d\n", __FILE__, __LINE__, #expr, \
                   static_cast<int>(r_));                                    \
      std::exit(2);                                                          \
    }                                                                        \
  } while (0)

// Median over 51 batches of `n` calls of `f`, in microseconds per call;
// `between` runs after each batch, untimed.
template <typename F, typename G>
double PerCall(int n, F f, G between) {
  std::vector<double> batches;
  for (int b = 0; b < 51; ++b) {
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) f();
    batches.push_back(Us(Clock::now() - t0) / n);
    between();
  }
  return Median(batches);
}

void Calls(CUstream s, ResultLine& r) {
  CUcontext ctx = nullptr;
  CUevent done, timing, untimed;
  CU_OK(cuEventCreate(&done, CU_EVENT_DEFAULT));
  CU_OK(cuEventCreate(&timing, CU_EVENT_DEFAULT));
  CU_OK(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
  CU_OK(cuEventRecord(done, s));
  CU_OK(cuStreamSynchronize(s));
  auto sync = [&] { cuStreamSynchronize(s); };
  auto none = [] {};
  const double ctx_us = PerCall(2000, [&] { cuCtxGetCurrent(&ctx); }, none);
  const double capturing_us = PerCall(2000, [&] {
    CUstreamCaptureStatus st;
    cuStreamIsCapturing(s, &st);
  }, none);
  const double exchange_us = PerCall(2000, [&] {
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    cuThreadExchangeStreamCaptureMode(&m);
    cuThreadExchangeStreamCaptureMode(&m);
  }, none);
  const double query_us = PerCall(2000, [&] { cuEventQuery(done); }, none);
  const double record_us = PerCall(2000, [&] { cuEventRecord(timing, s); }, sync);
  const double record_untimed_us = PerCall(2000, [&] { cuEventRecord(untimed, s); }, sync);
  const double launch_us = PerCall(2000, [&] { Empty<<<1, 32, 0, s>>>(); }, sync);
  std::printf("calls (us each): cuCtxGetCurrent %.3f  cuStreamIsCapturing %.3f  "
              "capture-mode exchange pair %.3f  cuEventQuery (done) %.3f  cuEventRecord %.3f  "
              "cuEventRecord (no timing) %.3f  empty launch %.3f\n",
              ctx_us, capturing_us, exchange_us, query_us, record_us, record_untimed_us, launch_us);
  r.Add("ctx_get_current_us", ctx_us);
  r.Add("stream_is_capturing_us", capturing_us);
  r.Add("capture_mode_exchange_pair_us", exchange_us);
  r.Add("event_query_done_us", query_us);
  r.Add("event_record_us", record_us);
  r.Add("event_record_untimed_us", record_untimed_us);
  r.Add("empty_launch_us", launch_us);
  r.Print();
  cuEventDestroy(done);
  cuEventDestroy(timing);
  cuEventDestroy(untimed);
}

void Events(CUstream s, long long cycles20us, ResultLine& r) {
  constexpr int kEvents = 32;
  std::vector<CUevent> timed(kEvents), untimed(kEvents);
  for (int i = 0; i < kEvents; ++i) {
    CU_OK(cuEventCreate(&timed[i], CU_EVENT_DEFAULT));
    CU_OK(cuEventCreate(&untimed[i], CU_EVENT_DISABLE_TIMING));
  }
  // every: an event after every `every`-th kernel (0: none).
  auto burst = [&](int every, std::vector<CUevent>& ev) {
    std::vector<double> t;
    for (int b = 0; b < 101; ++b) {
      const auto t0 = Clock::now();
      for (int i = 0; i < 32; ++i) {
        Spin<<<1, 32, 0, s>>>(cycles20us, nullptr);
        if (every > 0 && i % every == every - 1) cuEventRecord(ev[i], s);
      }
      cuStreamSynchronize(s);
      t.push_back(Us(Clock::now() - t0));
      std::this_thread::sleep_for(std::chrono::microseconds(1000));
    }
    return Median(t);
  };
  burst(0, timed);  // warm up
  const double plain = burst(0, timed);
  const double each = burst(1, timed);
  const double eighth = burst(8, timed);
  const double each_untimed = burst(1, untimed);
  std::printf("bursts of 32 x 20 us kernels (us): plain %.1f  timing event after each %.1f (%+.2f %%)  "
              "after every 8th %.1f (%+.2f %%)  untimed event after each %.1f (%+.2f %%)\n",
              plain, each, (each / plain - 1) * 100, eighth, (eighth / plain - 1) * 100, each_untimed,
              (each_untimed / plain - 1) * 100);
  r.Add("burst_plain_us", plain);
  r.Add("burst_event_each_us", each);
  r.Add("burst_event_every8_us", eighth);
  r.Add("burst_untimed_event_each_us", each_untimed);
  r.Print();
  for (int i = 0; i < kEvents; ++i) {
    cuEventDestroy(timed[i]);
    cuEventDestroy(untimed[i]);
  }
}

// One slicing process: ~1 ms kernels for `seconds`, each timed by events,
// at most 4 queued; paced to `pace` of the GPU (0: unpaced) given the
// kernel's time alone `alone_ms`. Prints "kernels N wall_ms W span_ms S".
int SliceChild(bool chained, double pace, double alone_ms, double seconds, double start_at) {
  int khz = 0;
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  CUstream s;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* sink = nullptr;
  CUDA_OK(cudaMalloc(&sink, sizeof(*sink)));
  const long long iters = khz / 4;  // ~1 ms: a multiply-add's latency is ~4 cycles
  for (int i = 0; i < 5; ++i) Chain<<<sms, 128, 0, s>>>(iters, nullptr, sink);
  CU_OK(cuStreamSynchronize(s));
  struct Launch {
    CUevent start;  // may be the previous launch's end
    CUevent end;
  };
  std::vector<CUevent> pool;
  auto take = [&] {
    CUevent e;
    if (!pool.empty()) {
      e = pool.back();
      pool.pop_back();
    } else {
      CU_OK(cuEventCreate(&e, CU_EVENT_DEFAULT));
    }
    return e;
  };
  if (start_at > 0) {
    std::this_thread::sleep_until(std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double>(start_at))));
  }
  std::deque<Launch> q;
  double span_ms = 0;
  long kernels = 0;
  std::vector<float> spans;
  auto settle = [&] {
    Launch l = q.front();
    q.pop_front();
    CU_OK(cuEventSynchronize(l.end));
    float ms = 0;
    CU_OK(cuEventElapsedTime(&ms, l.start, l.end));
    span_ms += ms;
    ++kernels;
    spans.push_back(ms);
    // Its start is its own, or the previous launch's end, which that launch's
    // settling left for this one. Its end goes back unless the next queued
    // launch starts with it.
    pool.push_back(l.start);
    if (q.empty() || q.front().start != l.end) pool.push_back(l.end);
  };
  const auto t0 = Clock::now();
  long launched = 0;
  for (;;) {
    const double wall_ms = Us(Clock::now() - t0) / 1000;
    if (wall_ms >= seconds * 1000) break;
    if (pace > 0 && launched * alone_ms > pace * wall_ms + alone_ms) {
      if (!q.empty()) {
        settle();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      continue;
    }
    if (q.size() >= 4) settle();
    Launch l{};
    if (chained && !q.empty() && cuEventQuery(q.back().end) == CUDA_ERROR_NOT_READY) {
      l.start = q.back().end;
    } else {
      l.start = take();
      CU_OK(cuEventRecord(l.start, s));
    }
    Chain<<<sms, 128, 0, s>>>(iters, nullptr, sink);
    l.end = take();
    CU_OK(cuEventRecord(l.end, s));
    q.push_back(l);
    ++launched;
  }
  while (!q.empty()) settle();
  const double wall_ms = Us(Clock::now() - t0) / 1000;
  // Kernels that ran in one piece (span within 1.2x alone), in streaks; the
  // excess of the others.
  std::vector<double> excess;
  long streaks = 0, in_streak = 0, one_piece = 0;
  for (float ms : spans) {
    if (ms <= 1.2 * alone_ms) {
      ++one_piece;
      if (in_streak++ == 0) ++streaks;
    } else {
      in_streak = 0;
      excess.push_back(ms - alone_ms);
    }
  }
  std::sort(excess.begin(), excess.end());
  auto at = [&](double q) { return excess.empty() ? 0.0 : excess[static_cast<size_t>(q * (excess.size() - 1))]; };
  std::printf("kernels %ld wall_ms %.3f span_ms %.3f one_piece %ld streaks %ld excess_p50_ms %.3f excess_p90_ms %.3f\n",
              kernels, wall_ms, span_ms, one_piece, streaks, at(0.5), at(0.9));
  return 0;
}

struct Slice {
  long kernels = -1;
  double wall_ms = 0, span_ms = 0;
  long one_piece = 0, streaks = 0;
  double excess_p50_ms = 0, excess_p90_ms = 0;
  // Mean consecutive one-piece kernels x the kernel's time: this process's slice.
  double SliceMs(double alone_ms) const { return streaks > 0 ? alone_ms * one_piece / streaks : 0; }
};

FILE* StartSlice(bool chained, double pace, double alone_ms, double seconds, double start_at) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n < 0 ? 0 : n] = '\0';
  char cmd[8192];
  std::snprintf(cmd, sizeof cmd, "env TESSERA_GPU_CHILD=1 %s slice %d %.3f %.6f %.3f %.6f", self,
                chained ? 1 : 0, pace, alone_ms, seconds, start_at);
  return popen(cmd, "r");
}

Slice FinishSlice(FILE* p) {
  Slice s;
  std::array<char, 256> buf{};
  while (p != nullptr && fgets(buf.data(), buf.size(), p) != nullptr) {
    std::sscanf(buf.data(),
                "kernels %ld wall_ms %lf span_ms %lf one_piece %ld streaks %ld excess_p50_ms %lf excess_p90_ms %lf",
                &s.kernels, &s.wall_ms, &s.span_ms, &s.one_piece, &s.streaks, &s.excess_p50_ms, &s.excess_p90_ms);
  }
  if (p == nullptr || pclose(p) != 0) s.kernels = -1;
  return s;
}

int Slicing(ResultLine& r) {
  constexpr double kSeconds = 2.0;
  // The kernel's time alone: one unpaced, unchained process by itself.
  const Slice alone = FinishSlice(StartSlice(false, 0, 1, kSeconds, 0));
  if (alone.kernels <= 0) return 1;
  const double alone_ms = alone.span_ms / static_cast<double>(alone.kernels);
  std::printf("slicing: one ~1 ms kernel alone takes %.4f ms (events), %.4f ms (wall / kernels)\n", alone_ms,
              alone.wall_ms / static_cast<double>(alone.kernels));
  r.Add("alone_kernel_ms", alone_ms);
  struct Case {
    const char* tag;
    bool chained;
    double pace_a, pace_b;
  };
  const Case cases[] = {{"free", false, 0, 0},
                        {"free_chained", true, 0, 0},
                        {"paced_30_70", false, 0.3, 0.7},
                        {"paced_30_70_chained", true, 0.3, 0.7}};
  for (const Case& c : cases) {
    const double at =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() + 2.0;
    FILE* pa = StartSlice(c.chained, c.pace_a, alone_ms, kSeconds, at);
    FILE* pb = StartSlice(c.chained, c.pace_b, alone_ms, kSeconds, at);
    const Slice a = FinishSlice(pa), b = FinishSlice(pb);
    if (a.kernels < 0 || b.kernels < 0) return 1;
    const double a_real = static_cast<double>(a.kernels) * alone_ms / a.wall_ms;
    const double b_real = static_cast<double>(b.kernels) * alone_ms / b.wall_ms;
    const double a_measured = a.span_ms / a.wall_ms, b_measured = b.span_ms / b.wall_ms;
    std::printf("slicing %-20s A real %.3f measured %.3f (x%.2f)   B real %.3f measured %.3f (x%.2f)\n", c.tag,
                a_real, a_measured, a_measured / a_real, b_real, b_measured, b_measured / b_real);
    std::printf("slicing %-20s A: %ld of %ld kernels in one piece, slice ~%.2f ms, neighbour inside a span p50 %.2f "
                "p90 %.2f ms;  B: %ld of %ld, slice ~%.2f ms, p50 %.2f p90 %.2f ms\n",
                c.tag, a.one_piece, a.kernels, a.SliceMs(alone_ms), a.excess_p50_ms, a.excess_p90_ms, b.one_piece,
                b.kernels, b.SliceMs(alone_ms), b.excess_p50_ms, b.excess_p90_ms);
    const std::string t = c.tag;
    r.Add(t + "_a_one_piece_frac", a.kernels > 0 ? static_cast<double>(a.one_piece) / a.kernels : 0);
    r.Add(t + "_a_slice_ms", a.SliceMs(alone_ms));
    r.Add(t + "_a_excess_p50_ms", a.excess_p50_ms);
    r.Add(t + "_b_slice_ms", b.SliceMs(alone_ms));
    r.Add(t + "_b_excess_p50_ms", b.excess_p50_ms);
    r.Add(t + "_a_real", a_real);
    r.Add(t + "_a_measured", a_measured);
    r.Add(t + "_b_real", b_real);
    r.Add(t + "_b_measured", b_measured);
  }
  r.Print();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("TESSERA_GPU_CHILD") != nullptr) {
    if (argc != 7 || std::strcmp(argv[1], "slice") != 0) return 2;
    return SliceChild(std::atoi(argv[2]) != 0, std::atof(argv[3]), std::atof(argv[4]), std::atof(argv[5]),
                      std::atof(argv[6]));
  }
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(nullptr));
  int khz = 0;
  CUDA_OK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  CUstream s;
  CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ResultLine r;
  Calls(s, r);
  Events(s, khz / 50, r);
  cuStreamDestroy(s);
  return Slicing(r) == 0 ? 0 : 1;
}
