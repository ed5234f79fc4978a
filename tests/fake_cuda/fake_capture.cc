// Fake stream capture, after CUDA's documented rules: between
// cuStreamBeginCapture and cuStreamEndCapture a stream records its work
// (kernels, graphs, memory nodes, events) into a graph instead of running
// it; cuStreamEndCapture hands the graph over, or fails with
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED when something broke the capture.
// What breaks it:
//   - using an event last recorded in the capture (cuEventQuery,
//     cuEventSynchronize, cuEventElapsedTime): CUDA_ERROR_CAPTURED_EVENT;
//   - a potentially unsafe call (synchronize, query, cuMemAlloc) by a thread
//     whose capture-interaction mode (cuThreadExchangeStreamCaptureMode) is
//     not relaxed, while a global-mode capture runs in any thread, or a
//     global or thread-local one in this thread:
//     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
//   - synchronizing or querying the capturing stream itself;
//   - work on the legacy default stream while a blocking stream of its
//     device captures: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT.
// Once invalidated, more work on the stream fails with
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED until the capture is ended.
// Streams joining a capture through events are not modelled.
#include <atomic>
#include <map>

#include "fake_cuda/fake_state.h"

namespace fake {
namespace {

// Guarded by S().mu.
struct Captures {
  uint64_t next_id = 1;
  std::map<void*, Capture> by_stream;
};
Captures& C() {
  static Captures* c = new Captures();  // leaked: outlives every caller
  return *c;
}

thread_local CUstreamCaptureMode t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

bool ValidMode(CUstreamCaptureMode m) {
  return m == CU_STREAM_CAPTURE_MODE_GLOBAL || m == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ||
         m == CU_STREAM_CAPTURE_MODE_RELAXED;
}

// A blocking stream of the legacy stream's device captures.
bool LegacyBlockedLocked(void* legacy) {
  const int dev = InfoLocked(legacy).dev;
  for (const auto& [stream, c] : C().by_stream) {
    const StreamInfo i = InfoLocked(stream);
    if (i.dev == dev && i.blocking) return true;
  }
  return false;
}

CUresult Begin(CUstream s, CUstreamCaptureMode mode, bool ptsz) {
  std::lock_guard<std::mutex> l(S().mu);
  if (!ValidMode(mode)) return CUDA_ERROR_INVALID_VALUE;
  void* st = ResolveStreamLocked(s, ptsz);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (InfoLocked(st).legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (C().by_stream.count(st) != 0) return CUDA_ERROR_ILLEGAL_STATE;
  C().by_stream.emplace(st, Capture{C().next_id++, mode, ThreadId(), st, false, new Graph()});
  return CUDA_SUCCESS;
}

CUresult Info(CUstream s, bool ptsz, CUstreamCaptureStatus* status, cuuint64_t* id,
              CUgraph* graph, const CUgraphNode** deps, size_t* num_deps) {
  std::lock_guard<std::mutex> l(S().mu);
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  void* st = ResolveStreamLocked(s, ptsz);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  // The legacy stream while a blocking stream captures: unusable, not
  // invalidating (cuStreamIsCapturing's documented exception).
  if (InfoLocked(st).legacy && LegacyBlockedLocked(st)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  const Capture* c = CaptureOfLocked(st);
  *status = c == nullptr        ? CU_STREAM_CAPTURE_STATUS_NONE
            : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                             : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  if (c != nullptr && id != nullptr) *id = c->id;
  if (graph != nullptr) {
    *graph = c != nullptr && !c->invalidated ? reinterpret_cast<CUgraph>(c->graph) : nullptr;
  }
  if (deps != nullptr) *deps = nullptr;
  if (num_deps != nullptr) *num_deps = 0;
  return CUDA_SUCCESS;
}

}  // namespace

uint64_t ThreadId() {
  static std::atomic<uint64_t> next{1};
  thread_local uint64_t id = next.fetch_add(1);
  return id;
}

Capture* CaptureOfLocked(void* stream) {
  auto it = C().by_stream.find(stream);
  return it != C().by_stream.end() ? &it->second : nullptr;
}

CUresult CaptureUsableLocked(const Capture* c) {
  return c->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
}

CUresult ImplicitLocked(void* stream) {
  if (!InfoLocked(stream).legacy || !LegacyBlockedLocked(stream)) return CUDA_SUCCESS;
  const int dev = InfoLocked(stream).dev;
  for (auto& [st, c] : C().by_stream) {
    const StreamInfo i = InfoLocked(st);
    if (i.dev == dev && i.blocking) c.invalidated = true;
  }
  return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
}

CUresult UnsafeCallLocked() {
  if (t_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  const uint64_t me = ThreadId();
  bool prohibited = false;
  for (auto& [st, c] : C().by_stream) {
    const bool global = c.mode == CU_STREAM_CAPTURE_MODE_GLOBAL && t_mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    const bool own = c.thread == me && c.mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    if (global || own) {
      c.invalidated = true;
      prohibited = true;
    }
  }
  return prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult CapturedEventLocked(uint64_t capture_id) {
  for (auto& [st, c] : C().by_stream) {
    if (c.id == capture_id) c.invalidated = true;
  }
  return CUDA_ERROR_CAPTURED_EVENT;
}

void ForgetStreamLocked(void* stream) {
  auto it = C().by_stream.find(stream);
  if (it == C().by_stream.end()) return;
  delete it->second.graph;
  C().by_stream.erase(it);
}

}  // namespace fake

using namespace fake;

extern "C" {

CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  return Begin(s, mode, false);
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  return Begin(s, mode, true);
}
// The first ABI, before capture modes: global mode.
CUresult cuStreamBeginCapture(CUstream s) { return Begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL, false); }
CUresult cuStreamBeginCapture_ptsz(CUstream s) {
  return Begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL, true);
}

CUresult cuStreamEndCapture(CUstream s, CUgraph* graph) {
  std::lock_guard<std::mutex> l(S().mu);
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  void* st = ResolveStreamLocked(s, false);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  auto it = C().by_stream.find(st);
  if (it == C().by_stream.end()) return CUDA_ERROR_ILLEGAL_STATE;
  const Capture c = it->second;
  if (c.mode != CU_STREAM_CAPTURE_MODE_RELAXED && c.thread != ThreadId())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  C().by_stream.erase(it);
  if (c.invalidated) {
    delete c.graph;
    *graph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *graph = reinterpret_cast<CUgraph>(c.graph);
  return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  CountCall("cuStreamIsCapturing");
  return Info(s, false, status, nullptr, nullptr, nullptr, nullptr);
}
CUresult cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id) {
  return Info(s, false, status, id, nullptr, nullptr, nullptr);
}
CUresult cuStreamGetCaptureInfo_ptsz(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id) {
  return Info(s, true, status, id, nullptr, nullptr, nullptr);
}
CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id,
                                   CUgraph* graph, const CUgraphNode** deps, size_t* num_deps) {
  return Info(s, false, status, id, graph, deps, num_deps);
}
CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id,
                                   CUgraph* graph, const CUgraphNode** deps,
                                   const CUgraphEdgeData** edges, size_t* num_deps) {
  if (edges != nullptr) *edges = nullptr;
  return Info(s, false, status, id, graph, deps, num_deps);
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  CountCall("cuThreadExchangeStreamCaptureMode");
  if (mode == nullptr || !ValidMode(*mode)) return CUDA_ERROR_INVALID_VALUE;
  const CUstreamCaptureMode was = t_mode;
  t_mode = *mode;
  *mode = was;
  return CUDA_SUCCESS;
}

}  // extern "C"
