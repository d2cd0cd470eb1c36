/* The cuda backend's own kernels without a GPU (label deviceless): nn/nn_cuda_kernels.cu and
 * nn/nn_real_kernels.cu, compiled from their unchanged sources, run on the CPU under the CUDA
 * emulation (tests/cuda_emu/cuda_emu.h) with the grids and blocks their launchers ask for, and
 * every launcher's results are compared with a reference written from the headers' contracts
 * (nn_cuda_kernels.h, nn_real_kernels.h), with PyTorch's semantics where they name them.
 *
 * Tolerances follow from the arithmetic each side does, so that an index or formula error (a
 * wrong channel, slice, window or sample) is orders of magnitude above them:
 * - Results a kernel computes with the same float operations as the contract states (bias add,
 *   ReLU, max pooling's forward, add, accumulate, the weighted sum's fmaf chain) must be equal.
 * - The double reductions (bias gradient, batch statistics, dgamma/dbeta, the loss) are compared
 *   with a double reference summed in another order: the two sums differ by at most
 *   m * DBL_EPSILON * sum|terms| for m terms, and the kernel's is then rounded to float once
 *   (the loss stays double), so the tolerance is one float ulp of the result plus that bound.
 * - Float element-wise formulas (batch normalisation's apply, the SGD update, pooling and GAP
 *   averages) are compared with a double reference within a few FLT_EPSILON of the magnitudes
 *   that enter them (the sum of the absolute values of the terms, which bounds cancellation).
 * Where a kernel rounds an operand to float before its double arithmetic, the tolerance says so.
 *
 * Every case runs under three schedules of the emulation (hs_emu_schedule: index order, reverse
 * order, last released first), so that a kernel whose result depends on the order of its blocks,
 * or a missing barrier that one interleaving hides, shows in another: without the first
 * __syncthreads of block_sum the index order fails, without the second the last-released-first
 * order does. The emulation's own checks (indices, barriers, shuffles, the failures it must
 * report) come first: a kernel test is only as good as them. The element-wise launchers run once
 * more on a grid of at most 3 blocks (grid_stride), so that their grid-stride loops take several
 * elements per thread, as they do on a GPU smaller than the grid.
 *
 * Needs only a C++ compiler: the kernel files are compiled by it against the emulation's
 * stand-in cuda_runtime_api.h (CMakeLists.txt, tests/cuda_emu/). */
#include <float.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cuda_emu.h"
#include "nn/nn_cuda_kernels.h"
#include "nn/nn_real_kernels.h"
#include "tests/hs_test.h"

#if defined(__SANITIZE_ADDRESS__)
#define HS_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HS_TEST_ASAN 1
#endif
#endif
#ifndef HS_TEST_ASAN
#define HS_TEST_ASAN 0
#endif
#if HS_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace {

/* --- test data, device memory, comparisons ---------------------------------------------------- */

/* Deterministic data: SplitMix64. */
struct rng {
  uint64_t s;
  explicit rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  float uniform(double lo, double hi) {
    return (float)(lo + (hi - lo) * (double)(next() >> 11) * 0x1p-53);
  }
  int below(int k) { return (int)(next() % (uint64_t)k); }
};

/* "Device" memory: n elements between two guard zones that hold a byte pattern. A write out of
 * bounds changes the pattern (checked after each launcher); under ASan the zones are poisoned as
 * well, so that a read out of bounds stops the test where it happens. */
template <typename T>
class dev {
 public:
  explicit dev(size_t n) : n_(n) {
    base_ = static_cast<unsigned char *>(malloc(bytes()));
    if (!base_) abort();
    memset(base_, kPattern, bytes());
    memset(base_ + guard_bytes(), 0, n_ * sizeof(T));
#if HS_TEST_ASAN
    ASAN_POISON_MEMORY_REGION(base_, guard_bytes());
    ASAN_POISON_MEMORY_REGION(base_ + guard_bytes() + n_ * sizeof(T), guard_bytes());
#endif
  }
  ~dev() {
#if HS_TEST_ASAN
    ASAN_UNPOISON_MEMORY_REGION(base_, bytes());
#endif
    free(base_);
  }
  dev(const dev &) = delete;
  dev &operator=(const dev &) = delete;

  T *p() { return reinterpret_cast<T *>(base_ + guard_bytes()); }
  T &operator[](size_t i) { return p()[i]; }
  size_t size() const { return n_; }
  std::vector<T> copy() { return std::vector<T>(p(), p() + n_); }
  bool guards_intact() {
#if HS_TEST_ASAN
    ASAN_UNPOISON_MEMORY_REGION(base_, bytes());
#endif
    bool ok = true;
    const unsigned char *tail = base_ + guard_bytes() + n_ * sizeof(T);
    for (size_t i = 0; i < guard_bytes(); i++)
      if (base_[i] != kPattern || tail[i] != kPattern) ok = false;
#if HS_TEST_ASAN
    ASAN_POISON_MEMORY_REGION(base_, guard_bytes());
    ASAN_POISON_MEMORY_REGION(base_ + guard_bytes() + n_ * sizeof(T), guard_bytes());
#endif
    return ok;
  }

 private:
  static constexpr size_t kGuard = 64; /* elements */
  static constexpr unsigned char kPattern = 0xa5;
  size_t guard_bytes() const { return kGuard * sizeof(T); }
  size_t bytes() const { return (n_ + 2 * kGuard) * sizeof(T); }
  size_t n_;
  unsigned char *base_;
};

/* One float ulp at |v| (the spacing of floats there). */
double ulpf(double v) {
  float a = fabsf((float)v);
  return (double)nextafterf(a, INFINITY) - (double)a;
}

/* Element-wise comparisons for one check: the first few failures are printed with the case's
 * label, then a count. */
class checker {
 public:
  explicit checker(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(label_, sizeof label_, fmt, ap);
    va_end(ap);
  }
  ~checker() {
    if (bad_ > kShown)
      fprintf(stderr, "  %s: %ld of %ld comparisons failed\n", label_, bad_, total_);
  }
  checker(const checker &) = delete;
  checker &operator=(const checker &) = delete;

  /* got within tol of want; a NaN wants a NaN, an infinity the same infinity. */
  void near(const char *what, int64_t i, double got, double want, double tol) {
    total_++;
    bool ok = isnan(want) ? isnan(got) : got == want || fabs(got - want) <= tol;
    if (ok) return;
    if (bad_ < kShown)
      fprintf(stderr, "  %s: %s[%lld]: got %.9g, want %.9g (tol %.3g)\n", label_, what,
              (long long)i, got, want, tol);
    bad_++;
    hs_test_failed_now = 1;
  }
  void same(const char *what, int64_t i, double got, double want) { near(what, i, got, want, 0.0); }
  template <typename T>
  void guards(const char *what, dev<T> &d) {
    total_++;
    if (d.guards_intact()) return;
    fprintf(stderr, "  %s: a kernel wrote outside %s\n", label_, what);
    bad_++;
    hs_test_failed_now = 1;
  }
  void status(const char *what, cudaError_t got, cudaError_t want) {
    near(what, 0, (double)got, (double)want, 0.0);
  }

 private:
  static constexpr long kShown = 6;
  char label_[160];
  long total_ = 0, bad_ = 0;
};

/* Per-channel statistics of an NCHW tensor, in double (two passes, as a textbook would). */
struct chan_stats {
  double mean, var, sumabs, ex2; /* var biased; ex2 = mean of squares */
};

chan_stats stats_of(const float *x, int n, int c, int hw, int ch) {
  double m = (double)n * hw, s = 0.0, sa = 0.0, s2 = 0.0, d2 = 0.0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < hw; j++) {
      double v = x[((int64_t)i * c + ch) * hw + j];
      s += v;
      sa += fabs(v);
      s2 += v * v;
    }
  double mean = s / m;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < hw; j++) {
      double d = x[((int64_t)i * c + ch) * hw + j] - mean;
      d2 += d * d;
    }
  return chan_stats{mean, d2 / m, sa, s2 / m};
}

/* x[i][ch][*] = offset_ch + scale_ch * u, u uniform in [-1.7, 1.7]; channel 1 constant (its
 * variance is 0) when there are at least 3 channels. */
void fill_channels(float *x, int n, int c, int hw, rng &r) {
  std::vector<float> offset((size_t)c), scale((size_t)c);
  for (int ch = 0; ch < c; ch++) {
    offset[(size_t)ch] = r.uniform(-2.0, 2.0);
    scale[(size_t)ch] = (c >= 3 && ch == 1) ? 0.0f : r.uniform(0.1, 3.0);
  }
  for (int i = 0; i < n; i++)
    for (int ch = 0; ch < c; ch++)
      for (int j = 0; j < hw; j++)
        x[((int64_t)i * c + ch) * hw + j] =
            offset[(size_t)ch] + scale[(size_t)ch] * r.uniform(-1.7, 1.7);
}

void fill(float *x, size_t n, double lo, double hi, rng &r) {
  for (size_t i = 0; i < n; i++) x[i] = r.uniform(lo, hi);
}

/* --- the emulation itself --------------------------------------------------------------------- */

/* Each thread records its indices and the dimensions it sees. */
__global__ void emu_index_kernel(unsigned *out, int *seen) {
  unsigned nthreads = blockDim.x * blockDim.y * blockDim.z;
  unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  unsigned tid = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  unsigned g = block * nthreads + tid;
  seen[g]++;
  out[g * 4 + 0] = threadIdx.x | threadIdx.y << 8 | threadIdx.z << 16;
  out[g * 4 + 1] = blockIdx.x | blockIdx.y << 8 | blockIdx.z << 16;
  out[g * 4 + 2] = blockDim.x | blockDim.y << 8 | blockDim.z << 16;
  out[g * 4 + 3] = gridDim.x | gridDim.y << 8 | gridDim.z << 16;
}

void test_emu_indices(void) {
  const dim3 grid(3, 2, 2), block(5, 3, 2); /* 30 threads: a partial warp */
  const unsigned total = 3 * 2 * 2 * 5 * 3 * 2;
  dev<unsigned> out(total * 4);
  dev<int> seen(total);
  ASSERT_EQ(hs_emu_launch(emu_index_kernel, hs_emu_cfg(grid, block), out.p(), seen.p()),
            cudaSuccess);
  checker k("emu indices");
  for (unsigned g = 0; g < total; g++) {
    unsigned tid = g % 30, b = g / 30;
    unsigned tx = tid % 5, ty = tid / 5 % 3, tz = tid / 15;
    unsigned bx = b % 3, by = b / 3 % 2, bz = b / 6;
    k.same("seen", g, seen[g], 1);
    k.same("threadIdx", g, out[g * 4], tx | ty << 8 | tz << 16);
    k.same("blockIdx", g, out[g * 4 + 1], bx | by << 8 | bz << 16);
    k.same("blockDim", g, out[g * 4 + 2], 5 | 3 << 8 | 2 << 16);
    k.same("gridDim", g, out[g * 4 + 3], 3 | 2 << 8 | 2 << 16);
  }
  k.guards("out", out);
  k.guards("seen", seen);
}

/* Each thread reads the shared value of its neighbour, written before the barrier; then the
 * array is overwritten after a second barrier, which the next block's reads must not see. */
__global__ void emu_barrier_kernel(int *out) {
  __shared__ int shared[96];
  int t = (int)threadIdx.x, n = (int)blockDim.x;
  shared[t] = t * 3 + 1 + 1000 * (int)blockIdx.x;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = shared[(t + 1) % n];
  __syncthreads();
  shared[t] = -1;
}

void test_emu_barrier(void) {
  dev<int> out(3 * 96);
  ASSERT_EQ(hs_emu_launch(emu_barrier_kernel, hs_emu_cfg(3, 96), out.p()), cudaSuccess);
  checker k("emu barrier");
  for (int b = 0; b < 3; b++)
    for (int t = 0; t < 96; t++)
      k.same("out", b * 96 + t, out[(size_t)(b * 96 + t)], (t + 1) % 96 * 3 + 1 + 1000 * b);
}

/* The shuffles' results for every lane of two warps. */
template <typename T>
__global__ void emu_shfl_kernel(T *out) {
  int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5);
  T v = (T)(lane * 10 + warp) + (T)0.5;
  T *o = out + threadIdx.x * 8;
  o[0] = __shfl_down_sync(0xffffffffu, v, 1);
  o[1] = __shfl_down_sync(0xffffffffu, v, 16);
  o[2] = __shfl_down_sync(0xffffffffu, v, 31);
  o[3] = __shfl_down_sync(0xffffffffu, v, 3, 8);
  o[4] = __shfl_up_sync(0xffffffffu, v, 5);
  o[5] = __shfl_xor_sync(0xffffffffu, v, 9);
  o[6] = __shfl_sync(0xffffffffu, v, 7);
  /* A tree sum, as block_sum does it: lane 0 ends with the warp's total. */
  T s = v;
  for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  o[7] = s;
}

template <typename T>
void check_shfl(const char *type) {
  dev<T> out(64 * 8);
  ASSERT_EQ(hs_emu_launch(emu_shfl_kernel<T>, hs_emu_cfg(1, 64), out.p()), cudaSuccess);
  checker k("emu shuffles (%s)", type);
  for (int t = 0; t < 64; t++) {
    int lane = t % 32, warp = t / 32;
    auto val = [&](int l) { return (double)(l * 10 + warp) + 0.5; };
    const T *o = out.p() + t * 8;
    k.same("down 1", t, o[0], val(lane + 1 < 32 ? lane + 1 : lane));
    k.same("down 16", t, o[1], val(lane + 16 < 32 ? lane + 16 : lane));
    k.same("down 31", t, o[2], val(lane + 31 < 32 ? lane + 31 : lane));
    k.same("down 3 width 8", t, o[3], val(lane % 8 + 3 < 8 ? lane + 3 : lane));
    k.same("up 5", t, o[4], val(lane >= 5 ? lane - 5 : lane));
    k.same("xor 9", t, o[5], val(lane ^ 9));
    k.same("idx 7", t, o[6], val(7));
    if (lane == 0) {
      double sum = 0.0;
      for (int l = 0; l < 32; l++) sum += val(l);
      k.same("tree sum", t, o[7], sum);
    }
  }
}

void test_emu_shfl(void) {
  check_shfl<float>("float");
  check_shfl<double>("double");
}

__global__ void emu_exit_before_barrier(int *out) {
  if (threadIdx.x == 5) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}
__global__ void emu_divergent_barrier(int *out) {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}
__global__ void emu_exit_before_shfl(float *out) {
  if (threadIdx.x == 37) return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1);
}
__global__ void emu_nothing(int *out) { out[threadIdx.x] = 7; }

/* A launch that cannot complete must fail, say why, and leave the emulation usable. */
void expect_failure(const char *what, cudaError_t rc, const char *needle) {
  checker k("emu failure: %s", what);
  k.status("launch", rc, cudaErrorLaunchFailure);
  k.status("cudaGetLastError", cudaGetLastError(), cudaErrorLaunchFailure);
  k.status("cudaGetLastError again", cudaGetLastError(), cudaSuccess);
  ASSERT_CONTAINS(hs_emu_last_failure(), needle);
}

void test_emu_failures(void) {
  fprintf(stderr, "  (the emulation reports the next four failures on purpose)\n");
  dev<int> out(64);
  dev<float> fout(64);
  long failures = hs_emu_failures();
  expect_failure("exit before a barrier",
                 hs_emu_launch(emu_exit_before_barrier, hs_emu_cfg(2, 64), out.p()), "deadlock");
  ASSERT_CONTAINS(hs_emu_last_failure(), "1 thread(s) returned");
  expect_failure("divergent barriers",
                 hs_emu_launch(emu_divergent_barrier, hs_emu_cfg(1, 64), out.p()), "divergent");
  expect_failure("exit before a shuffle",
                 hs_emu_launch(emu_exit_before_shfl, hs_emu_cfg(1, 64), fout.p()), "deadlock");
  ASSERT_CONTAINS(hs_emu_last_failure(), "in a warp shuffle");
  expect_failure("dynamic shared memory",
                 hs_emu_launch(emu_nothing, hs_emu_cfg(1, 64, 16), out.p()), "dynamic shared");
  ASSERT_EQ(hs_emu_failures(), failures + 4);
  /* and the next launches run as usual */
  ASSERT_EQ(hs_emu_launch(emu_nothing, hs_emu_cfg(1, 64), out.p()), cudaSuccess);
  for (int t = 0; t < 64; t++) ASSERT_EQ(out[(size_t)t], 7);
  test_emu_barrier();
}

void test_emu_config(void) {
  dev<int> out(1024);
  checker k("emu launch configuration");
  k.status("grid 0", hs_emu_launch(emu_nothing, hs_emu_cfg(0, 64), out.p()),
           cudaErrorInvalidConfiguration);
  k.status("cudaGetLastError", cudaGetLastError(), cudaErrorInvalidConfiguration);
  k.status("cudaGetLastError again", cudaGetLastError(), cudaSuccess);
  k.status("block 1025", hs_emu_launch(emu_nothing, hs_emu_cfg(1, 1025), out.p()),
           cudaErrorInvalidConfiguration);
  k.status("block (1,1,65)", hs_emu_launch(emu_nothing, hs_emu_cfg(1, dim3(1, 1, 65)), out.p()),
           cudaErrorInvalidConfiguration);
  k.status("grid.y 65536", hs_emu_launch(emu_nothing, hs_emu_cfg(dim3(1, 65536), 1), out.p()),
           cudaErrorInvalidConfiguration);
  k.status("cudaGetLastError", cudaGetLastError(), cudaErrorInvalidConfiguration);
  k.status("block 1024", hs_emu_launch(emu_nothing, hs_emu_cfg(1, 1024), out.p()), cudaSuccess);
  k.status("cudaGetLastError", cudaGetLastError(), cudaSuccess);
}

/* --- bias ------------------------------------------------------------------------------------- */

void check_bias_add(int n, int c, int hw, uint64_t seed) {
  int64_t count = (int64_t)n * c * hw;
  rng r(seed);
  dev<float> y((size_t)count), b((size_t)c);
  fill(y.p(), y.size(), -2.0, 2.0, r);
  fill(b.p(), b.size(), -1.0, 1.0, r);
  std::vector<float> y0 = y.copy();
  checker k("bias_add n=%d c=%d hw=%d", n, c, hw);
  k.status("rc", hs_cuk_bias_add(y.p(), b.p(), n, c, hw, nullptr), cudaSuccess);
  for (int64_t i = 0; i < count; i++)
    k.same("y", i, y[(size_t)i], y0[(size_t)i] + b[(size_t)(i / hw % c)]);
  k.guards("y", y);
}

void test_bias_add(void) {
  check_bias_add(3, 5, 37, 1);
  check_bias_add(2, 300, 7, 2);
  check_bias_add(1, 1, 1, 3);
}

void check_bias_grad(int n, int c, int hw, int c_max, uint64_t seed) {
  int64_t m = (int64_t)n * hw, count = m * c;
  rng r(seed);
  dev<float> dy((size_t)count), db((size_t)c);
  dev<double> scratch((size_t)hs_cuk_scratch_doubles(c_max));
  fill(dy.p(), dy.size(), -0.75, 1.0, r);
  for (int ch = 0; ch < c; ch++) db[(size_t)ch] = 1e30f; /* written over */
  checker k("bias_grad n=%d c=%d hw=%d", n, c, hw);
  k.status("rc", hs_cuk_bias_grad(dy.p(), db.p(), scratch.p(), n, c, hw, nullptr), cudaSuccess);
  for (int ch = 0; ch < c; ch++) {
    chan_stats s = stats_of(dy.p(), n, c, hw, ch);
    double sum = s.mean * (double)m;
    k.near("db", ch, db[(size_t)ch], sum, ulpf(sum) + (double)m * DBL_EPSILON * s.sumabs);
  }
  k.guards("db", db);
  k.guards("scratch", scratch);
}

void test_bias_grad(void) {
  check_bias_grad(2, 3, 10, 3, 11);       /* one slice */
  check_bias_grad(7, 3, 1500, 4, 12);     /* 2 slices; the boundary falls inside sample 3 */
  check_bias_grad(3, 2, 2731, 2, 13);     /* 8193 elements: 2 slices of 4097 and 4096 */
  check_bias_grad(3, 257, 5, 257, 14);    /* 2 finishing blocks, the second with one channel */
  check_bias_grad(2, 2, 300001, 2, 15);   /* 74 slices wanted, capped at 64; the last short */
}

/* --- batch normalisation ---------------------------------------------------------------------- */

void check_bn_forward_train(int n, int c, int hw, int c_max, double eps, double momentum,
                            uint64_t seed) {
  int64_t m = (int64_t)n * hw, count = m * c;
  rng r(seed);
  dev<float> x((size_t)count), y((size_t)count), gamma((size_t)c), beta((size_t)c);
  dev<float> run_mean((size_t)c), run_var((size_t)c), save_mean((size_t)c), save_invstd((size_t)c);
  dev<double> scratch((size_t)hs_cuk_scratch_doubles(c_max));
  fill_channels(x.p(), n, c, hw, r);
  fill(gamma.p(), gamma.size(), 0.5, 1.5, r);
  fill(beta.p(), beta.size(), -0.5, 0.5, r);
  fill(run_mean.p(), run_mean.size(), -0.1, 0.1, r);
  fill(run_var.p(), run_var.size(), 0.5, 1.5, r);
  std::vector<float> rm0 = run_mean.copy(), rv0 = run_var.copy();
  checker k("bn_forward_train n=%d c=%d hw=%d", n, c, hw);
  k.status("rc",
           hs_cuk_bn_forward_train(x.p(), y.p(), gamma.p(), beta.p(), run_mean.p(), run_var.p(),
                                   save_mean.p(), save_invstd.p(), scratch.p(), n, c, hw, eps,
                                   momentum, nullptr),
           cudaSuccess);
  for (int ch = 0; ch < c; ch++) {
    size_t C = (size_t)ch;
    chan_stats s = stats_of(x.p(), n, c, hw, ch);
    double invstd = 1.0 / sqrt(s.var + eps);
    /* The kernel's variance is E[x^2] - mean^2 from double sums: off by at most about
     * (m + 2) DBL_EPSILON (E[x^2] + mean^2) from the two-pass one. */
    double e_mean = (double)m * DBL_EPSILON * s.sumabs / (double)m;
    double e_var = (double)(m + 2) * DBL_EPSILON * (s.ex2 + s.mean * s.mean);
    double e_invstd = invstd * e_var / (s.var + eps);
    double unbiased = s.var * (double)m / (double)(m - 1);
    k.near("save_mean", ch, save_mean[C], s.mean, ulpf(s.mean) + e_mean);
    k.near("save_invstd", ch, save_invstd[C], invstd, ulpf(invstd) + e_invstd);
    double rm = (1.0 - momentum) * rm0[C] + momentum * s.mean;
    double rv = (1.0 - momentum) * rv0[C] + momentum * unbiased;
    k.near("run_mean", ch, run_mean[C], rm, ulpf(rm) + momentum * e_mean);
    k.near("run_var", ch, run_var[C], rv,
           ulpf(rv) + momentum * e_var * (double)m / (double)(m - 1));
    for (int i = 0; i < n; i++)
      for (int j = 0; j < hw; j++) {
        int64_t idx = ((int64_t)i * c + ch) * hw + j;
        double xv = x[(size_t)idx], g = gamma[C], b = beta[C];
        double want = (xv - s.mean) * invstd * g + b;
        double scale = (fabs(xv) + fabs(s.mean)) * invstd * fabs(g) + fabs(b);
        k.near("y", idx, y[(size_t)idx], want,
               8 * FLT_EPSILON * scale + fabs(xv - s.mean) * fabs(g) * e_invstd);
      }
  }
  k.guards("y", y);
  k.guards("run_mean", run_mean);
  k.guards("run_var", run_var);
  k.guards("save_mean", save_mean);
  k.guards("save_invstd", save_invstd);
  k.guards("scratch", scratch);
}

void test_bn_forward_train(void) {
  check_bn_forward_train(4, 3, 7, 3, 1e-5, 0.1, 21);
  check_bn_forward_train(7, 3, 1500, 3, 1e-5, 0.1, 22);   /* 2 slices */
  check_bn_forward_train(2, 2, 9000, 8, 1e-3, 0.25, 23);  /* 3 slices of 6000, 6000, 6000 */
  check_bn_forward_train(2, 257, 9, 300, 1e-5, 0.1, 24);  /* 2 finishing blocks */
}

void check_bn_forward_infer(int n, int c, int hw, double eps, uint64_t seed) {
  int64_t count = (int64_t)n * c * hw;
  rng r(seed);
  dev<float> x((size_t)count), y((size_t)count), gamma((size_t)c), beta((size_t)c);
  dev<float> run_mean((size_t)c), run_var((size_t)c);
  fill_channels(x.p(), n, c, hw, r);
  fill(gamma.p(), gamma.size(), 0.5, 1.5, r);
  fill(beta.p(), beta.size(), -0.5, 0.5, r);
  fill(run_mean.p(), run_mean.size(), -2.0, 2.0, r);
  fill(run_var.p(), run_var.size(), 0.01, 4.0, r);
  checker k("bn_forward_infer n=%d c=%d hw=%d", n, c, hw);
  k.status("rc",
           hs_cuk_bn_forward_infer(x.p(), y.p(), gamma.p(), beta.p(), run_mean.p(), run_var.p(),
                                   n, c, hw, eps, nullptr),
           cudaSuccess);
  for (int64_t idx = 0; idx < count; idx++) {
    size_t C = (size_t)(idx / hw % c);
    double xv = x[(size_t)idx], rm = run_mean[C], g = gamma[C], b = beta[C];
    double invstd = 1.0 / sqrt((double)run_var[C] + eps);
    double want = (xv - rm) * invstd * g + b;
    /* float arithmetic (and rsqrtf, 2 ulp on a GPU) on magnitudes up to `scale` */
    double scale = (fabs(xv) + fabs(rm)) * invstd * fabs(g) + fabs(b);
    k.near("y", idx, y[(size_t)idx], want, 8 * FLT_EPSILON * scale);
  }
  k.guards("y", y);
}

void test_bn_forward_infer(void) {
  check_bn_forward_infer(3, 5, 11, 1e-5, 31);
  check_bn_forward_infer(2, 300, 3, 1e-3, 32);
}

void check_bn_backward(int n, int c, int hw, int c_max, int accumulate, bool with_dx,
                       uint64_t seed) {
  int64_t m = (int64_t)n * hw, count = m * c;
  rng r(seed);
  dev<float> x((size_t)count), dy((size_t)count), dx((size_t)count), gamma((size_t)c);
  dev<float> save_mean((size_t)c), save_invstd((size_t)c), dgamma((size_t)c), dbeta((size_t)c);
  dev<double> scratch((size_t)hs_cuk_scratch_doubles(c_max));
  fill_channels(x.p(), n, c, hw, r);
  fill(dy.p(), dy.size(), -1.0, 1.0, r);
  fill(gamma.p(), gamma.size(), 0.5, 1.5, r);
  if (accumulate)
    fill(dx.p(), dx.size(), -1.0, 1.0, r);
  else
    for (size_t i = 0; i < dx.size(); i++) dx[i] = NAN; /* written over */
  for (int ch = 0; ch < c; ch++) {
    chan_stats s = stats_of(x.p(), n, c, hw, ch);
    save_mean[(size_t)ch] = (float)s.mean;
    save_invstd[(size_t)ch] = (float)(1.0 / sqrt(s.var + 1e-5));
    dgamma[(size_t)ch] = dbeta[(size_t)ch] = 1e30f; /* written over */
  }
  std::vector<float> dx0 = dx.copy();
  checker k("bn_backward n=%d c=%d hw=%d accumulate=%d dx=%s", n, c, hw, accumulate,
            with_dx ? "yes" : "NULL");
  k.status("rc",
           hs_cuk_bn_backward(x.p(), dy.p(), with_dx ? dx.p() : nullptr, gamma.p(), save_mean.p(),
                              save_invstd.p(), dgamma.p(), dbeta.p(), scratch.p(), n, c, hw,
                              accumulate, nullptr),
           cudaSuccess);
  for (int ch = 0; ch < c; ch++) {
    size_t C = (size_t)ch;
    double mu = save_mean[C], inv = save_invstd[C], g = gamma[C];
    double sum_dy = 0, abs_dy = 0, sum_dy_xc = 0, abs_dy_xc = 0;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < hw; j++) {
        size_t idx = (size_t)(((int64_t)i * c + ch) * hw + j);
        double d = dy[idx], xc = (double)x[idx] - mu;
        sum_dy += d;
        abs_dy += fabs(d);
        sum_dy_xc += d * xc;
        abs_dy_xc += fabs(d * xc);
      }
    double dbeta_want = sum_dy, dgamma_want = sum_dy_xc * inv;
    double tol_dbeta = ulpf(dbeta_want) + (double)m * DBL_EPSILON * abs_dy;
    /* The kernel takes x - mean in float before its double sum: each term may be off by
     * FLT_EPSILON / 2 of itself. */
    double tol_dgamma =
        ulpf(dgamma_want) + (FLT_EPSILON / 2 + (double)m * DBL_EPSILON) * abs_dy_xc * inv;
    k.near("dbeta", ch, dbeta[C], dbeta_want, tol_dbeta);
    k.near("dgamma", ch, dgamma[C], dgamma_want, tol_dgamma);
    if (!with_dx) continue;
    double c0 = sum_dy / (double)m, c1 = dgamma_want / (double)m;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < hw; j++) {
        int64_t idx = ((int64_t)i * c + ch) * hw + j;
        double xv = x[(size_t)idx], d = dy[(size_t)idx], prev = dx0[(size_t)idx];
        double xhat = (xv - mu) * inv;
        double grad = g * inv * (d - c0 - xhat * c1);
        double want = accumulate ? prev + grad : grad;
        double scale = fabs(g * inv) * (fabs(d) + fabs(c0) + fabs(xhat * c1) +
                                        (fabs(xv) + fabs(mu)) * inv * fabs(c1));
        double tol = 8 * FLT_EPSILON * (scale + (accumulate ? fabs(prev) : 0.0)) +
                     fabs(g * inv) * (tol_dbeta + fabs(xhat) * tol_dgamma) / (double)m;
        k.near("dx", idx, dx[(size_t)idx], want, tol);
      }
  }
  k.guards("dx", dx);
  k.guards("dgamma", dgamma);
  k.guards("dbeta", dbeta);
  k.guards("scratch", scratch);
}

void test_bn_backward(void) {
  check_bn_backward(4, 3, 7, 3, 0, true, 41);
  check_bn_backward(4, 3, 7, 3, 1, true, 42);
  check_bn_backward(4, 3, 7, 3, 0, false, 43);
  check_bn_backward(7, 3, 1500, 3, 1, true, 44);   /* 2 slices */
  check_bn_backward(3, 2, 2731, 5, 0, true, 45);   /* 2 slices of 4097 and 4096 */
  check_bn_backward(2, 258, 9, 258, 0, true, 46);  /* 2 finishing blocks */
}

/* --- ReLU ------------------------------------------------------------------------------------- */

void check_relu(int64_t count, float cap, int accumulate, uint64_t seed) {
  rng r(seed);
  dev<float> x((size_t)count), y((size_t)count), dy((size_t)count), dx((size_t)count);
  static const float special[] = {-1.0f, -0.0f, 0.0f, 1e-30f, 5.999f, 6.0f, 6.001f, 1e30f, -1e30f};
  for (int64_t i = 0; i < count; i++)
    x[(size_t)i] = i % 5 == 0 ? special[(size_t)(i / 5) % 9] : r.uniform(-8.0, 8.0);
  fill(dy.p(), dy.size(), -1.0, 1.0, r);
  fill(dx.p(), dx.size(), -1.0, 1.0, r);
  if (!accumulate)
    for (size_t i = 0; i < dx.size(); i++) dx[i] = NAN;
  std::vector<float> dx0 = dx.copy();
  checker k("relu count=%lld cap=%g accumulate=%d", (long long)count, (double)cap, accumulate);
  k.status("forward rc", hs_cuk_relu_forward(x.p(), y.p(), count, cap, nullptr), cudaSuccess);
  k.status("backward rc",
           hs_cuk_relu_backward(y.p(), dy.p(), dx.p(), count, cap, accumulate, nullptr),
           cudaSuccess);
  for (int64_t i = 0; i < count; i++) {
    size_t I = (size_t)i;
    float want_y = fminf(fmaxf(x[I], 0.0f), cap);
    k.same("y", i, y[I], want_y);
    float g = want_y > 0.0f && want_y < cap ? dy[I] : 0.0f;
    k.same("dx", i, dx[I], accumulate ? dx0[I] + g : g);
  }
  k.guards("y", y);
  k.guards("dx", dx);
}

void test_relu(void) {
  check_relu(1237, INFINITY, 0, 51);
  check_relu(1237, INFINITY, 1, 52);
  check_relu(700, 6.0f, 0, 53);
  check_relu(700, 6.0f, 1, 54);
  check_relu(1, 6.0f, 0, 55);
}

/* --- pooling ---------------------------------------------------------------------------------- */

hs_cuk_pool pool_geom(int n, int c, int h, int w, int k, int stride, int pad) {
  hs_cuk_pool p{};
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.stride = stride, p.pad = pad;
  p.oh = (h + 2 * pad - k) / stride + 1;
  p.ow = (w + 2 * pad - k) / stride + 1;
  return p;
}

/* PyTorch's max pooling: the first in-bounds position starts the window at -inf; a value
 * strictly greater, or a NaN, takes over (so the last NaN of a window wins). Returns the index
 * in the plane of the winner and its value. */
int ref_window_max(const float *plane, const hs_cuk_pool &p, int oy, int ox, float *val) {
  int y0 = oy * p.stride - p.pad, x0 = ox * p.stride - p.pad;
  int ys = y0 < 0 ? 0 : y0, xs = x0 < 0 ? 0 : x0;
  int ye = y0 + p.k < p.h ? y0 + p.k : p.h, xe = x0 + p.k < p.w ? x0 + p.k : p.w;
  int best = ys * p.w + xs;
  float bestv = -INFINITY;
  for (int yy = ys; yy < ye; yy++)
    for (int xx = xs; xx < xe; xx++) {
      float v = plane[yy * p.w + xx];
      if (v > bestv || isnan(v)) {
        bestv = v;
        best = yy * p.w + xx;
      }
    }
  *val = bestv;
  return best;
}

/* What a pooling backward should write: per input, the sum of the gradients routed to it, of
 * their magnitudes, and their count; checked against dx (over what it held with accumulate),
 * each routed term and the sum rounding in float at most (hits + slack) times. */
struct routed {
  std::vector<double> grad, gabs;
  std::vector<int> hits;
  explicit routed(size_t n) : grad(n, 0.0), gabs(n, 0.0), hits(n, 0) {}
  void add(size_t i, double g) {
    grad[i] += g;
    gabs[i] += fabs(g);
    hits[i]++;
  }
  void check(checker &k, dev<float> &dx, const std::vector<float> &dx0, int accumulate, int slack) {
    for (size_t i = 0; i < grad.size(); i++) {
      double prev = accumulate ? dx0[i] : 0.0;
      k.near("dx", (int64_t)i, dx[i], prev + grad[i], FLT_EPSILON * (hits[i] + slack) * (gabs[i] + fabs(prev)));
    }
    k.guards("dx", dx);
  }
};

/* Kinds of max-pooling input: continuous values, few levels (ties everywhere, some -inf), or
 * continuous values with NaNs placed by the caller. */
enum pool_data { kContinuous, kTies };

void check_maxpool(const hs_cuk_pool &p, pool_data kind, int accumulate, uint64_t seed,
                   const std::vector<int64_t> &nans = {}) {
  int64_t in = (int64_t)p.n * p.c * p.h * p.w, out = (int64_t)p.n * p.c * p.oh * p.ow;
  int64_t plane_in = (int64_t)p.h * p.w, plane_out = (int64_t)p.oh * p.ow;
  rng r(seed);
  dev<float> x((size_t)in), y((size_t)out), dy((size_t)out), dx((size_t)in);
  for (int64_t i = 0; i < in; i++) {
    if (kind == kTies) {
      int level = r.below(4);
      x[(size_t)i] = level == 0 && r.below(4) == 0 ? -INFINITY : (float)level;
    } else {
      x[(size_t)i] = r.uniform(-3.0, 3.0);
    }
  }
  for (int64_t i : nans) x[(size_t)i] = NAN;
  fill(dy.p(), dy.size(), -1.0, 1.0, r);
  fill(dx.p(), dx.size(), -1.0, 1.0, r);
  if (!accumulate)
    for (size_t i = 0; i < dx.size(); i++) dx[i] = NAN;
  std::vector<float> dx0 = dx.copy();
  checker k("maxpool n=%d c=%d %dx%d k=%d stride=%d pad=%d%s%s accumulate=%d", p.n, p.c, p.h,
            p.w, p.k, p.stride, p.pad, kind == kTies ? " ties" : "", nans.empty() ? "" : " NaN",
            accumulate);
  k.status("forward rc", hs_cuk_maxpool_forward(x.p(), y.p(), &p, nullptr), cudaSuccess);
  k.status("backward rc", hs_cuk_maxpool_backward(x.p(), dy.p(), dx.p(), &p, accumulate, nullptr),
           cudaSuccess);
  routed want((size_t)in);
  for (int64_t o = 0; o < out; o++) {
    int64_t plane = o / plane_out;
    int oy = (int)(o % plane_out / p.ow), ox = (int)(o % p.ow);
    float v;
    int a = ref_window_max(x.p() + plane * plane_in, p, oy, ox, &v);
    k.same("y", o, y[(size_t)o], v);
    want.add((size_t)(plane * plane_in + a), dy[(size_t)o]);
  }
  want.check(k, dx, dx0, accumulate, 1);
  k.guards("y", y);
}

void test_maxpool(void) {
  const hs_cuk_pool geoms[] = {
      pool_geom(2, 3, 7, 9, 3, 2, 1),    /* overlapping windows, padding, not square */
      pool_geom(2, 2, 8, 10, 2, 3, 0),   /* stride > k: inputs no window covers */
      pool_geom(1, 2, 5, 6, 3, 1, 1),    /* every input in up to 9 windows */
      pool_geom(3, 4, 12, 12, 3, 2, 0),  /* the last row and column in no window */
      pool_geom(2, 40, 16, 16, 2, 2, 0), /* 20480 outputs: many blocks */
  };
  uint64_t seed = 60;
  for (const hs_cuk_pool &p : geoms)
    for (int acc = 0; acc < 2; acc++) {
      check_maxpool(p, kContinuous, acc, seed++);
      check_maxpool(p, kTies, acc, seed++);
    }
}

/* One NaN per window at most: the NaN is the window's maximum, and takes its gradient. */
void test_maxpool_nan(void) {
  hs_cuk_pool p = pool_geom(1, 2, 8, 8, 2, 2, 0);
  check_maxpool(p, kContinuous, 0, 70, {0, 10, 30, 64 + 63}); /* windows (0,0) (0,1) (1,3) (3,3) */
  hs_cuk_pool q = pool_geom(1, 1, 7, 9, 3, 2, 1);
  check_maxpool(q, kTies, 1, 71, {10, 40});
}

/* Two NaNs in one window: PyTorch's rule (strictly greater, or NaN: nothing stops the scan)
 * sends the gradient to the last NaN of the window; both outputs are NaN either way. */
void test_maxpool_nan_pair(void) {
  hs_cuk_pool p = pool_geom(1, 1, 4, 4, 2, 2, 0);
  check_maxpool(p, kContinuous, 0, 72, {0, 5});      /* window (0,0): (0,0) and (1,1) */
  check_maxpool(p, kContinuous, 0, 73, {2, 3, 7});   /* window (0,1): three NaNs */
}

void check_avgpool(const hs_cuk_pool &p, int accumulate, uint64_t seed) {
  int64_t in = (int64_t)p.n * p.c * p.h * p.w, out = (int64_t)p.n * p.c * p.oh * p.ow;
  int64_t plane_in = (int64_t)p.h * p.w, plane_out = (int64_t)p.oh * p.ow;
  double kk = (double)p.k * p.k;
  rng r(seed);
  dev<float> x((size_t)in), y((size_t)out), dy((size_t)out), dx((size_t)in);
  fill(x.p(), x.size(), -3.0, 3.0, r);
  fill(dy.p(), dy.size(), -1.0, 1.0, r);
  fill(dx.p(), dx.size(), -1.0, 1.0, r);
  if (!accumulate)
    for (size_t i = 0; i < dx.size(); i++) dx[i] = NAN;
  std::vector<float> dx0 = dx.copy();
  checker k("avgpool n=%d c=%d %dx%d k=%d stride=%d pad=%d accumulate=%d", p.n, p.c, p.h, p.w,
            p.k, p.stride, p.pad, accumulate);
  k.status("forward rc", hs_cuk_avgpool_forward(x.p(), y.p(), &p, nullptr), cudaSuccess);
  k.status("backward rc", hs_cuk_avgpool_backward(dy.p(), dx.p(), &p, accumulate, nullptr),
           cudaSuccess);
  routed want((size_t)in);
  for (int64_t o = 0; o < out; o++) {
    int64_t plane = o / plane_out;
    int oy = (int)(o % plane_out / p.ow), ox = (int)(o % p.ow);
    int y0 = oy * p.stride - p.pad, x0 = ox * p.stride - p.pad;
    double s = 0.0, sa = 0.0;
    for (int yy = y0; yy < y0 + p.k; yy++)
      for (int xx = x0; xx < x0 + p.k; xx++) {
        if (yy < 0 || yy >= p.h || xx < 0 || xx >= p.w) continue; /* padding: 0, counted */
        size_t i = (size_t)(plane * plane_in + yy * p.w + xx);
        s += x[i];
        sa += fabs(x[i]);
        want.add(i, dy[(size_t)o] / kk);
      }
    k.near("y", o, y[(size_t)o], s / kk, (kk + 2) * FLT_EPSILON * sa / kk);
  }
  want.check(k, dx, dx0, accumulate, 2);
  k.guards("y", y);
}

void test_avgpool(void) {
  const hs_cuk_pool geoms[] = {
      pool_geom(2, 3, 7, 9, 3, 2, 1),
      pool_geom(2, 2, 8, 10, 2, 3, 0),
      pool_geom(1, 2, 5, 6, 3, 1, 1),
      pool_geom(3, 4, 12, 12, 3, 2, 0),
      pool_geom(2, 3, 6, 6, 5, 1, 2), /* border windows mostly padding */
      pool_geom(2, 40, 16, 16, 2, 2, 0),
  };
  uint64_t seed = 80;
  for (const hs_cuk_pool &p : geoms)
    for (int acc = 0; acc < 2; acc++) check_avgpool(p, acc, seed++);
}

/* --- global average pooling ------------------------------------------------------------------- */

void check_gap(int n, int c, int hw, int accumulate, uint64_t seed) {
  int64_t planes = (int64_t)n * c, count = planes * hw;
  rng r(seed);
  dev<float> x((size_t)count), y((size_t)planes), dy((size_t)planes), dx((size_t)count);
  fill(x.p(), x.size(), -2.0, 3.0, r);
  fill(dy.p(), dy.size(), -1.0, 1.0, r);
  fill(dx.p(), dx.size(), -1.0, 1.0, r);
  if (!accumulate)
    for (size_t i = 0; i < dx.size(); i++) dx[i] = NAN;
  std::vector<float> dx0 = dx.copy();
  checker k("gap n=%d c=%d hw=%d accumulate=%d", n, c, hw, accumulate);
  k.status("forward rc", hs_cuk_gap_forward(x.p(), y.p(), n, c, hw, nullptr), cudaSuccess);
  k.status("backward rc", hs_cuk_gap_backward(dy.p(), dx.p(), n, c, hw, accumulate, nullptr),
           cudaSuccess);
  for (int64_t pl = 0; pl < planes; pl++) {
    double s = 0.0, sa = 0.0;
    for (int j = 0; j < hw; j++) {
      double v = x[(size_t)(pl * hw + j)];
      s += v;
      sa += fabs(v);
    }
    /* float sums of hw / 32 terms per lane, then a 5-level tree, then the division */
    k.near("y", pl, y[(size_t)pl], s / hw, (hw / 32 + 8) * FLT_EPSILON * sa / hw);
    for (int j = 0; j < hw; j++) {
      size_t i = (size_t)(pl * hw + j);
      double g = (double)dy[(size_t)pl] / hw, prev = accumulate ? dx0[i] : 0.0;
      k.near("dx", (int64_t)i, dx[i], prev + g, 2 * FLT_EPSILON * (fabs(g) + fabs(prev)));
    }
  }
  k.guards("y", y);
  k.guards("dx", dx);
}

void test_gap(void) {
  check_gap(2, 3, 49, 0, 91);    /* 6 planes: one block, warps 6 and 7 idle */
  check_gap(2, 3, 49, 1, 92);
  check_gap(3, 5, 1, 0, 93);     /* one pixel: 31 lanes add nothing */
  check_gap(1, 7, 64, 1, 94);
  check_gap(5, 13, 200, 0, 95);  /* 65 planes: 9 blocks */
}

/* --- add, accumulate -------------------------------------------------------------------------- */

void check_add_accumulate(int64_t count, uint64_t seed) {
  rng r(seed);
  size_t n = (size_t)count;
  dev<float> a(n), b(n), y(n), d0(n), d1(n);
  fill(a.p(), a.size(), -5.0, 5.0, r);
  fill(b.p(), b.size(), -5.0, 5.0, r);
  for (size_t i = 0; i < d0.size(); i++) d0[i] = NAN; /* written over */
  fill(d1.p(), d1.size(), -5.0, 5.0, r);
  std::vector<float> d1_0 = d1.copy();
  checker k("add/accumulate count=%lld", (long long)count);
  k.status("add rc", hs_cuk_add(a.p(), b.p(), y.p(), count, nullptr), cudaSuccess);
  k.status("accumulate 0 rc", hs_cuk_accumulate(d0.p(), a.p(), count, 0, nullptr), cudaSuccess);
  k.status("accumulate 1 rc", hs_cuk_accumulate(d1.p(), b.p(), count, 1, nullptr), cudaSuccess);
  for (int64_t i = 0; i < count; i++) {
    size_t I = (size_t)i;
    k.same("add", i, y[I], a[I] + b[I]);
    k.same("accumulate 0", i, d0[I], a[I]);
    k.same("accumulate 1", i, d1[I], d1_0[I] + b[I]);
  }
  k.guards("y", y);
  k.guards("dst (accumulate 0)", d0);
  k.guards("dst (accumulate 1)", d1);
}

void test_add_accumulate(void) {
  check_add_accumulate(1, 101);
  check_add_accumulate(1000, 102);
  check_add_accumulate(70001, 103);
}

/* --- softmax cross-entropy -------------------------------------------------------------------- */

/* Logits uniform in [-4, 4], every 7th row with its maximum repeated at a later class (a tie for
 * the arg-max); labels in [0, k) except at the positions of `bad`. */
void make_xent(int n, int k, rng &r, dev<float> &logits, dev<int32_t> &labels,
               const std::vector<std::pair<int, int32_t>> &bad) {
  for (int i = 0; i < n; i++) {
    float *l = logits.p() + (int64_t)i * k;
    for (int j = 0; j < k; j++) l[j] = r.uniform(-4.0, 4.0);
    if (i % 7 == 3 && k >= 3) {
      int a = r.below(k - 1), b = a + 1 + r.below(k - 1 - a);
      l[a] = l[b] = 4.5f;
    }
    labels[(size_t)i] = r.below(k);
  }
  for (const auto &b : bad) labels[(size_t)b.first] = b.second;
}

void check_xent_forward(int n, int k, const std::vector<std::pair<int, int32_t>> &bad,
                        uint64_t seed) {
  rng r(seed);
  dev<float> logits((size_t)n * (size_t)k + 1);
  dev<int32_t> labels((size_t)n + 1);
  dev<hs_cuk_result> res(1);
  make_xent(n, k, r, logits, labels, bad);
  res[0] = hs_cuk_result{1e30, -1, -1};
  checker c("xent_forward n=%d k=%d bad=%zu", n, k, bad.size());
  c.status("rc", hs_cuk_xent_forward(logits.p(), labels.p(), n, k, res.p(), nullptr), cudaSuccess);
  double loss = 0.0, tol = 0.0;
  int correct = 0, nbad = 0;
  for (int i = 0; i < n; i++) {
    const float *l = logits.p() + (int64_t)i * k;
    int best = 0;
    for (int j = 1; j < k; j++)
      if (l[j] > l[best]) best = j;
    double mx = l[best], sum = 0.0, range = 0.0;
    for (int j = 0; j < k; j++) {
      sum += exp((double)l[j] - mx);
      range = fmax(range, mx - (double)l[j]);
    }
    int32_t y = labels[(size_t)i];
    if (y < 0 || y >= k) {
      nbad++;
      continue;
    }
    loss += log(sum) + mx - (double)l[y];
    if (best == y) correct++;
    /* the kernel takes l[j] - max in float before exp: off by FLT_EPSILON / 2 of it */
    tol += FLT_EPSILON / 2 * range;
  }
  /* "mean cross-entropy over the batch": the divisor is the batch, n */
  double want = n > 0 ? loss / n : 0.0;
  tol = (n > 0 ? tol / n : 0.0) + 1e-12 * (1.0 + fabs(want));
  c.near("loss", 0, res[0].loss, want, tol);
  c.same("correct", 0, res[0].correct, correct);
  c.same("bad_label", 0, res[0].bad_label, nbad);
  c.guards("result", res);
}

void test_xent_forward(void) {
  check_xent_forward(5, 10, {}, 111);
  check_xent_forward(600, 7, {}, 112); /* n > 256: up to 3 samples per thread */
  check_xent_forward(600, 7, {{0, -1}, {255, 7}, {256, 1000}, {599, INT32_MIN}}, 113);
  check_xent_forward(33, 1, {{3, 1}}, 114); /* one class: every loss 0, every sample correct */
  check_xent_forward(0, 4, {}, 115);
}

void check_xent_backward(int n, int k, const std::vector<std::pair<int, int32_t>> &bad,
                         uint64_t seed) {
  rng r(seed);
  dev<float> logits((size_t)n * (size_t)k), dlogits((size_t)n * (size_t)k);
  dev<int32_t> labels((size_t)n);
  make_xent(n, k, r, logits, labels, bad);
  for (size_t i = 0; i < dlogits.size(); i++) dlogits[i] = NAN; /* written over */
  checker c("xent_backward n=%d k=%d bad=%zu", n, k, bad.size());
  c.status("rc", hs_cuk_xent_backward(logits.p(), labels.p(), n, k, dlogits.p(), nullptr),
           cudaSuccess);
  for (int i = 0; i < n; i++) {
    const float *l = logits.p() + (int64_t)i * k;
    double mx = l[0], sum = 0.0, range = 0.0;
    for (int j = 1; j < k; j++) mx = fmax(mx, (double)l[j]);
    for (int j = 0; j < k; j++) {
      sum += exp((double)l[j] - mx);
      range = fmax(range, mx - (double)l[j]);
    }
    int32_t y = labels[(size_t)i];
    for (int j = 0; j < k; j++) {
      double p = exp((double)l[j] - mx) / sum;
      /* an out-of-range label has no one-hot entry: the row is softmax / n */
      double want = (p - (j == y ? 1.0 : 0.0)) / n;
      int64_t idx = (int64_t)i * k + j;
      c.near("dlogits", idx, dlogits[(size_t)idx], want,
             ulpf(want) + FLT_EPSILON * (range + 1.0) * p / n);
    }
  }
  c.guards("dlogits", dlogits);
}

void test_xent_backward(void) {
  check_xent_backward(5, 10, {}, 121);
  check_xent_backward(300, 7, {{17, -3}, {299, 7}}, 122); /* 2 blocks, the second partial */
  check_xent_backward(1, 3, {}, 123);
}

/* --- SGD -------------------------------------------------------------------------------------- */

void check_sgd(int64_t count, float lr, float momentum, float wd, int steps, uint64_t seed) {
  rng r(seed);
  dev<float> w((size_t)count), grad((size_t)count), v((size_t)count);
  fill(w.p(), w.size(), -1.0, 1.0, r);
  checker k("sgd count=%lld lr=%g momentum=%g weight_decay=%g", (long long)count, (double)lr,
            (double)momentum, (double)wd);
  for (int s = 0; s < steps; s++) {
    fill(grad.p(), grad.size(), -0.5, 0.5, r);
    std::vector<float> w0 = w.copy(), v0 = v.copy();
    k.status("rc", hs_cuk_sgd(w.p(), grad.p(), v.p(), count, lr, momentum, wd, nullptr),
             cudaSuccess);
    for (int64_t i = 0; i < count; i++) {
      size_t I = (size_t)i;
      double g = (double)grad[I] + (double)wd * w0[I];
      double m = (double)momentum * v0[I] + g;
      double w1 = w0[I] - (double)lr * m;
      double terms = fabs(grad[I]) + fabs((double)wd * w0[I]) + fabs((double)momentum * v0[I]);
      k.near("v", i, v[I], m, 2 * FLT_EPSILON * terms);
      k.near("w", i, w[I], w1, 2 * FLT_EPSILON * (fabs(w0[I]) + 2 * (double)lr * terms));
    }
  }
  k.guards("w", w);
  k.guards("v", v);
}

void test_sgd(void) {
  check_sgd(1000, 0.05f, 0.9f, 1e-2f, 3, 131);
  check_sgd(1000, 0.1f, 0.0f, 0.0f, 2, 132); /* plain SGD: v = grad */
  check_sgd(3, 0.5f, 0.5f, 0.5f, 2, 133);
}

/* --- the real runtime's weighted sum ---------------------------------------------------------- */

void check_weighted_sum(int k_count, int accumulate, int64_t n, bool dst_is_src0, uint64_t seed) {
  rng r(seed);
  std::vector<dev<float> *> srcs;
  std::vector<const float *> ptrs;
  std::vector<float> w((size_t)k_count);
  for (int s = 0; s < k_count; s++) {
    srcs.push_back(new dev<float>((size_t)n));
    fill(srcs.back()->p(), (size_t)n, -2.0, 2.0, r);
    ptrs.push_back(srcs.back()->p());
    w[(size_t)s] = r.uniform(-1.0, 1.0);
  }
  dev<float> own((size_t)n);
  dev<float> &dst = dst_is_src0 ? *srcs[0] : own;
  if (!dst_is_src0) fill(dst.p(), (size_t)n, -2.0, 2.0, r);
  std::vector<float> dst0 = dst.copy();
  std::vector<std::vector<float>> src0;
  for (dev<float> *s : srcs) src0.push_back(s->copy());
  checker c("weighted_sum k=%d accumulate=%d n=%lld%s", k_count, accumulate, (long long)n,
            dst_is_src0 ? " dst=src[0]" : "");
  c.status("rc",
           hs_rk_weighted_sum(dst.p(), ptrs.data(), w.data(), k_count, accumulate, n, nullptr),
           cudaSuccess);
  for (int64_t j = 0; j < n; j++) {
    size_t J = (size_t)j;
    /* the contract's own arithmetic: float, fused multiply-adds in source order */
    float acc = accumulate ? dst0[J] : 0.0f;
    for (int s = 0; s < k_count; s++) acc = fmaf(w[(size_t)s], src0[(size_t)s][J], acc);
    c.same("dst", j, dst[J], acc);
  }
  c.guards("dst", dst);
  for (int s = 0; s < k_count; s++) {
    c.guards("a source", *srcs[(size_t)s]);
    if (dst_is_src0 && s == 0) continue;
    bool unchanged =
        memcmp(srcs[(size_t)s]->p(), src0[(size_t)s].data(), (size_t)n * sizeof(float)) == 0;
    c.same("source unchanged", s, unchanged, 1);
  }
  for (dev<float> *s : srcs) delete s;
}

void test_weighted_sum(void) {
  uint64_t seed = 140;
  for (int k : {1, 3, 16})
    for (int acc = 0; acc < 2; acc++) check_weighted_sum(k, acc, 1000, false, seed++);
  check_weighted_sum(3, 0, 1, false, seed++);
  check_weighted_sum(3, 0, 1000, true, seed++);
  /* more than 4096 blocks' worth: the grid is capped and each thread takes two elements */
  check_weighted_sum(3, 1, 4096LL * 256 + 77, false, seed++);
}

void test_weighted_sum_errors(void) {
  dev<float> dst(8), src(8);
  const float *ptrs[HS_RK_MAX_SRC + 1];
  float w[HS_RK_MAX_SRC + 1];
  for (int s = 0; s <= HS_RK_MAX_SRC; s++) ptrs[s] = src.p(), w[s] = 1.0f;
  for (size_t i = 0; i < 8; i++) dst[i] = 5.0f;
  long launches = hs_emu_launches();
  checker c("weighted_sum refusals");
  c.status("k 0", hs_rk_weighted_sum(dst.p(), ptrs, w, 0, 0, 8, nullptr), cudaErrorInvalidValue);
  c.status("k 17", hs_rk_weighted_sum(dst.p(), ptrs, w, HS_RK_MAX_SRC + 1, 0, 8, nullptr),
           cudaErrorInvalidValue);
  c.status("n 0", hs_rk_weighted_sum(dst.p(), ptrs, w, 1, 0, 0, nullptr), cudaErrorInvalidValue);
  c.same("no launch", 0, (double)(hs_emu_launches() - launches), 0);
  for (size_t i = 0; i < 8; i++) c.same("dst untouched", (int64_t)i, dst[i], 5.0f);
}

/* --- grid-stride loops ------------------------------------------------------------------------ */

/* The element-wise launchers again, on a grid of at most 3 blocks (as a GPU smaller than their
 * grid would run them): every thread's loop must then take several elements. Only launchers made
 * of grid-stride kernels alone are run so; the reductions' grids are indices, not strides. */
void test_grid_stride(void) {
  hs_emu_set_grid_limit(3);
  check_bias_add(3, 5, 137, 201);
  check_bn_forward_infer(3, 5, 111, 1e-5, 202);
  check_relu(5000, 6.0f, 1, 203);
  check_maxpool(pool_geom(2, 3, 17, 19, 3, 2, 1), kTies, 1, 204);
  check_avgpool(pool_geom(2, 3, 17, 19, 3, 2, 1), 1, 205);
  check_gap(5, 13, 50, 1, 206); /* 65 planes on 24 warps */
  check_add_accumulate(5000, 207);
  check_sgd(5000, 0.05f, 0.9f, 1e-2f, 1, 208);
  check_weighted_sum(16, 1, 5000, false, 209);
  hs_emu_set_grid_limit(0);
}

} // namespace

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
      {"emu_indices", test_emu_indices},
      {"emu_barrier", test_emu_barrier},
      {"emu_shfl", test_emu_shfl},
      {"emu_failures", test_emu_failures},
      {"emu_config", test_emu_config},
      {"bias_add", test_bias_add},
      {"bias_grad", test_bias_grad},
      {"bn_forward_train", test_bn_forward_train},
      {"bn_forward_infer", test_bn_forward_infer},
      {"bn_backward", test_bn_backward},
      {"relu", test_relu},
      {"maxpool", test_maxpool},
      {"maxpool_nan", test_maxpool_nan},
      {"maxpool_nan_pair", test_maxpool_nan_pair},
      {"avgpool", test_avgpool},
      {"gap", test_gap},
      {"add_accumulate", test_add_accumulate},
      {"xent_forward", test_xent_forward},
      {"xent_backward", test_xent_backward},
      {"sgd", test_sgd},
      {"weighted_sum", test_weighted_sum},
      {"weighted_sum_errors", test_weighted_sum_errors},
      {"grid_stride", test_grid_stride},
      {NULL, NULL},
  };
  int rc = hs_test_main("cuda_kernels", cases, argc, argv);
  hs_emu_set_schedule(HS_EMU_REVERSE_ORDER);
  rc |= hs_test_main("cuda_kernels.reverse", cases, argc, argv);
  hs_emu_set_schedule(HS_EMU_LAST_RELEASED_FIRST);
  rc |= hs_test_main("cuda_kernels.lifo", cases, argc, argv);
  hs_emu_shutdown();
  return rc;
}
