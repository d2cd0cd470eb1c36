/* cuda_emu: runs CUDA kernel sources on the CPU, so that deviceless tests can check the arithmetic
 * and the indexing of the cuda backend's own kernels (tests/test_deviceless_cuda_kernels.cpp).
 *
 * A kernel file (nn_cuda_kernels.cu, nn_real_kernels.cu) is compiled by g++ as C++ after one
 * rewrite done at build time (cuda_emu_rewrite.cmake): each launch
 * `k<<<grid, block, shmem, stream>>>(args)` becomes
 * `hs_emu_launch(k, hs_emu_cfg(grid, block, shmem, stream), args)`. Nothing else in the file
 * changes. This header supplies the rest of what the kernels use: the qualifiers, the built-in
 * index variables, __syncthreads, the warp shuffles, rsqrtf.
 *
 * Execution model. A launch runs its blocks one after the other, in one OS thread. The threads of
 * a block are cooperative fibers (ucontext): a thread runs until it reaches __syncthreads or a
 * warp shuffle, or returns, and then the scheduler resumes a released thread or starts the next
 * one, in an order the tests choose (hs_emu_set_schedule). __syncthreads releases the block when
 * every thread waits at the same call; a shuffle exchanges values when every lane its mask names
 * has reached a shuffle, before any of them moves on. `__shared__` is `static`, which is right
 * because only one block runs at a time. A barrier that cannot complete (a thread returned while
 * others wait, a lane missing from a shuffle), threads waiting at two different __syncthreads
 * calls, or a shuffle that reads a lane outside its mask fail the launch: the message names the
 * launch, the block and the threads, and cudaGetLastError then returns cudaErrorLaunchFailure.
 * Grid and block sizes are the ones the launch asks for, checked against CUDA's limits
 * (cudaErrorInvalidConfiguration).
 *
 * What it does not model: memory (host memory stands for device memory; no coalescing, caches, or
 * memory ordering between threads, and every write is seen at once by every later read), data
 * races (threads switch only at barriers and shuffles, so a race shows only where it changes a
 * result in the interleavings the schedules make), real warp scheduling (lanes of a warp do not
 * run in lock step), shared memory left over from a previous block (static arrays keep it, a GPU's
 * are undefined), dynamic shared memory, atomics, streams (a launch completes before it returns,
 * unless a stream runner hands it to the emulated runtime's streams: below), the accuracy of the
 * GPU's math functions (rsqrtf is exact here, at most 2 ulp off on a GPU; exp and log are the
 * host's), and nvcc's contraction of a * b + c into fmaf.
 *
 * Under AddressSanitizer the fibers are announced to ASan (see cuda_emu.cpp).
 *
 * State: one emulation per process (CUDA's built-in variables are globals), not reentrant. Not
 * thread-safe, except launches handed to streams (below), which run one grid at a time. Fiber
 * stacks are kept for later launches; hs_emu_shutdown releases them. */
#ifndef HS_CUDA_EMU_H
#define HS_CUDA_EMU_H

#include <cuda_runtime_api.h>
#include <math.h>
#include <stddef.h>

#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(...)

/* The built-in variables of the thread that runs now (read-only, as in CUDA). */
extern const uint3 &threadIdx;
extern const uint3 &blockIdx;
extern const dim3 &blockDim;
extern const dim3 &gridDim;
constexpr int warpSize = 32;

/* Block barrier. Its call site (file and line) is recorded: every thread must wait at the same. */
void __syncthreads(const char *file = __builtin_FILE(), int line = __builtin_LINE());

/* Lane of the running thread in its warp (threads are numbered x-fastest, as in CUDA). */
int hs_emu_lane(void);
/* Warp exchange: waits until every lane of mask has called it, then each lane receives the
 * `size` bytes the lane `src` (0..31, in the same warp) passed as `value`. */
void hs_emu_warp_exchange(unsigned mask, const void *value, void *result, size_t size, int src,
                          const char *file, int line);

template <typename T>
T hs_emu_shfl(unsigned mask, T var, int src, const char *file, int line) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
                "the emulated shuffles move up to 8 bytes of plain data");
  T out;
  hs_emu_warp_exchange(mask, &var, &out, sizeof(T), src, file, line);
  return out;
}

/* The shuffles, with CUDA's rules for a source lane outside the lane's width segment: down and
 * up return the caller's own value, xor returns it for a later segment, idx wraps modulo width. */
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  int lane = hs_emu_lane();
  int src = lane % width + (int)delta < width ? lane + (int)delta : lane;
  return hs_emu_shfl(mask, var, src, file, line);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  int lane = hs_emu_lane();
  int src = lane % width >= (int)delta ? lane - (int)delta : lane;
  return hs_emu_shfl(mask, var, src, file, line);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  int lane = hs_emu_lane();
  int src = lane ^ lane_mask;
  if (src >= (lane / width + 1) * width) src = lane;
  return hs_emu_shfl(mask, var, src, file, line);
}
template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  int lane = hs_emu_lane();
  int src = lane / width * width + ((src_lane % width) + width) % width;
  return hs_emu_shfl(mask, var, src, file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu, const char *file = __builtin_FILE(),
                       int line = __builtin_LINE()) {
  hs_emu_warp_exchange(mask, nullptr, nullptr, 0, hs_emu_lane(), file, line);
}

/* Device math the host library lacks. */
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }

/* A launch's configuration and where in the source it was made (for failure messages). */
struct hs_emu_config {
  dim3 grid, block;
  size_t shmem; /* bytes of dynamic shared memory: only 0 is emulated */
  cudaStream_t stream;
  const char *file;
  int line;
};

inline hs_emu_config hs_emu_cfg(dim3 grid, dim3 block, size_t shmem = 0,
                                cudaStream_t stream = nullptr,
                                const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  return hs_emu_config{grid, block, shmem, stream, file, line};
}

/* Runs fn(closure) once per thread of the configured grid, then release(closure); the launch's
 * status (also left for cudaGetLastError when it is an error). With a stream runner set (below),
 * only the configuration is checked now, and the grid runs when the stream reaches it. */
cudaError_t hs_emu_run(const hs_emu_config &cfg, void (*fn)(void *), void *closure,
                       void (*release)(void *));

/* kernel<<<cfg>>>(args...): the arguments are copied once, as CUDA copies them at the launch,
 * and each thread calls the kernel with its own copies of them. */
template <typename... P, typename... A>
cudaError_t hs_emu_launch(void (*kernel)(P...), const hs_emu_config &cfg, A &&...args) {
  static_assert(sizeof...(P) == sizeof...(A), "a kernel launch with the wrong number of arguments");
  struct closure {
    void (*kernel)(P...);
    std::tuple<P...> args;
  };
  closure *c = new closure{kernel, std::tuple<P...>(std::forward<A>(args)...)};
  return hs_emu_run(
      cfg,
      [](void *p) {
        closure *cl = static_cast<closure *>(p);
        std::apply(cl->kernel, cl->args);
      },
      c, [](void *p) { delete static_cast<closure *>(p); });
}

/* --- launches on streams ------------------------------------------------------------------ */

/* By default a launch runs at once, in the calling thread, as test_deviceless_cuda_kernels
 * wants. A test built on the emulated runtime of tests/gpu_emu (gpu_emu.h) hands the launches to
 * its streams instead: after hs_emu_set_stream_runner(submit, on_error), a launch whose
 * configuration is valid becomes work that stream `cfg.stream` owns (submit is
 * hs_emu_stream_submit_owned), run in stream order on the stream's thread, perhaps again and
 * again when it was captured into a CUDA graph; invalid configurations are reported through
 * on_error (hs_emu_set_last_error), for the launching thread's cudaGetLastError. Grids run one
 * at a time, process-wide (the emulation's state is global). A grid that fails then (a barrier
 * that cannot complete, ...) ends the process with the emulation's message: the launch has
 * returned long ago, and a GPU would report the failure to every later call. */
typedef cudaError_t (*hs_emu_submit_fn)(cudaStream_t stream, void (*fn)(void *), void *arg,
                                        void (*release)(void *));
void hs_emu_set_stream_runner(hs_emu_submit_fn submit, void (*on_error)(cudaError_t));

/* --- knobs and counters for the tests ------------------------------------------------------- */

/* Runs at most max_x blocks along x (0: no limit), as a GPU too small for the grid would, to
 * exercise grid-stride loops; only for kernels written as grid-stride loops. */
void hs_emu_set_grid_limit(unsigned max_x);
/* The order of the cooperative scheduling, which decides which interleaving a missing barrier
 * shows in. A block's threads start in order, each running until it waits or returns; threads a
 * barrier or a shuffle releases resume in order of release. */
typedef enum hs_emu_schedule {
  HS_EMU_INDEX_ORDER,         /* blocks and threads in index order; first released, first resumed */
  HS_EMU_REVERSE_ORDER,       /* blocks and threads from the last index; first released first */
  HS_EMU_LAST_RELEASED_FIRST, /* index order; the last thread released resumes first */
} hs_emu_schedule;
void hs_emu_set_schedule(hs_emu_schedule schedule);
/* Kernel launches so far (including failed ones). */
long hs_emu_launches(void);
/* Launches the emulation failed so far, and the message of the last one ("" when none). */
long hs_emu_failures(void);
const char *hs_emu_last_failure(void);
/* Releases the fiber stacks (no launch may be running). */
void hs_emu_shutdown(void);

#endif
