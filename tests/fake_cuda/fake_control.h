// Test controls of the fake driver's simulated GPU time (fake_launch.cc),
// exported by libcuda.so.1 next to the CUDA API. Times are on the fake's
// virtual clock, in microseconds; it starts at 1 s and moves only when a
// caller waits: a synchronize, a launch into a full stream queue, a
// tessera_fake_cuda_sleep_until_us, or tessera_fake_cuda_advance_us.
//
//   tessera_fake_cuda_set_kernel_us(fn, 1000);   // fn runs for 1 ms
//   cuLaunchKernel(fn, ...);
//   uint64_t busy = tessera_fake_cuda_busy_us(0, t0, t1);
#pragma once

#include <cstdint>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

extern "C" {
// Duration of every launch of `fn` (default FAKE_CUDA_KERNEL_US, else 10 us).
void tessera_fake_cuda_set_kernel_us(CUfunction fn, uint64_t us);
// Duration of one launch of a graph instantiated from `graph` afterwards.
void tessera_fake_cuda_set_graph_us(CUgraph graph, uint64_t us);
// The virtual clock.
uint64_t tessera_fake_cuda_now_us();
// Moves the clock to `us` if it is behind (a host thread sleeping).
void tessera_fake_cuda_sleep_until_us(uint64_t us);
// While set, tessera_fake_cuda_sleep_until_us stops the clock at every
// multiple of `period_us` on its way and calls `cb` there (without the
// fake's lock: it may call the fake), so a test can run code "every N us"
// of virtual time even while a thread sleeps in the launch gate. Other
// clock moves (synchronize, a full queue) do not tick. cb nullptr: off.
void tessera_fake_cuda_set_tick(uint64_t period_us, void (*cb)(uint64_t now_us, void* arg), void* arg);
// Moves the clock forward by `us` (host work between calls).
void tessera_fake_cuda_advance_us(uint64_t us);
// Kernel time executed on `dev` within [from_us, to_us): the sum over
// launches (kernels and graphs) of their overlap with the interval (this
// process's part of it, beside neighbours).
uint64_t tessera_fake_cuda_busy_us(int dev, uint64_t from_us, uint64_t to_us);
// From now on `dev` is time-sliced between this process and `contexts`
// saturating contexts of other processes (0: alone), in equal slices: each
// launch takes (1 + contexts) times its duration on the timeline, so its
// events span the others' slices, and busy_us counts only its duration.
// Launches already queued keep their timing.
void tessera_fake_cuda_set_neighbours(int dev, uint32_t contexts);
// Launches the driver accepted on `dev`, of every kind / of cooperative
// kernels only; the grid (x*y*z blocks) of the last cooperative one.
uint64_t tessera_fake_cuda_launches(int dev);
uint64_t tessera_fake_cuda_cooperative_launches(int dev, uint64_t* last_grid_blocks);
// Device memory the fake driver has handed out on `dev` in this process
// (allocations, pools, VMM handles, contexts): what the card would show.
uint64_t tessera_fake_cuda_used_bytes(int dev);
// Events recorded (cuEventRecord) in this process, on any stream.
uint64_t tessera_fake_cuda_events_recorded();
// Calls of the driver function named `api` made by the calling thread, for
// the calls the gate makes per launch: cuStreamIsCapturing,
// cuThreadExchangeStreamCaptureMode, cuCtxGetCurrent, cuEventQuery,
// cuEventRecord, cuStreamQuery (others: 0). Per thread, so the gate's
// helper thread does not count.
uint64_t tessera_fake_cuda_thread_calls(const char* api);
// What the fake's cuGetProcAddress(symbol, version, flags) answers: its
// result, and in *abi the exported name of the variant it hands out (the
// ABI), or nullptr when it hands out none. Whatever the address it gives
// (FAKE_CUDA_PROC_ADDRESS=internal: not the exported symbol's).
CUresult tessera_fake_cuda_proc_address_abi(const char* symbol, int version, cuuint64_t flags,
                                            const char** abi);
}
