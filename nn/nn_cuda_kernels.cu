/* nn_cuda_kernels: the cuda backend's own kernels. See nn_cuda_kernels.h for the contract.
 *
 * Element-wise kernels use grid-stride loops over 64-bit indices. Per-channel reductions run in
 * two passes: a (channel, slice) grid writes double partial sums into scratch, then one thread
 * per channel adds its slices and finishes (bias gradient, batch statistics, backward
 * coefficients); an element-wise pass applies the result. */
#include "nn/nn_cuda_kernels.h"

#include <math.h>

namespace {

constexpr int kThreads = 256;
/* Slices per channel in the reduction passes; scratch is sized for this many. */
constexpr int kSplitsMax = 64;
/* Elements one reduction block should cover at least before another slice is worth it. */
constexpr int64_t kSliceMin = 8192;

inline unsigned grid_for(int64_t count) {
  int64_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks < 1) blocks = 1;
  if (blocks > (1 << 20)) blocks = 1 << 20; /* grid-stride loops cover the rest */
  return (unsigned)blocks;
}

inline int splits_for(int n, int hw) {
  int64_t m = (int64_t)n * hw;
  int64_t s = (m + kSliceMin - 1) / kSliceMin;
  if (s < 1) s = 1;
  if (s > kSplitsMax) s = kSplitsMax;
  return (int)s;
}

inline cudaError_t launched(void) { return cudaGetLastError(); }

/* Sum of one double over the block (blockDim.x == kThreads); the result is valid in thread 0. */
__device__ double block_sum(double v, double *shared) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = 0.0;
  if (warp == 0) {
    v = lane < kThreads / 32 ? shared[lane] : 0.0;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  }
  __syncthreads();
  return v;
}

/* What a reduction pass sums per channel: two doubles per element. */
enum ReduceMode { kSumDy = 0, kSumXX2 = 1, kSumDyXc = 2 };

/* grid (c, splits): partial[(ch * splits + s) * 2 + {0,1}] for the slice s of channel ch. */
template <int Mode>
__global__ void reduce_partial(const float *a, const float *b, const float *mean, double *partial,
                               int n, int c, int hw, int splits) {
  __shared__ double shared[kThreads / 32];
  int ch = blockIdx.x, s = blockIdx.y;
  int64_t m = (int64_t)n * hw;
  int64_t chunk = (m + splits - 1) / splits;
  int64_t lo = s * chunk, hi = lo + chunk < m ? lo + chunk : m;
  float mu = Mode == kSumDyXc ? mean[ch] : 0.0f;
  double s0 = 0.0, s1 = 0.0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) {
    int64_t sample = i / hw, j = i - sample * hw;
    int64_t idx = (sample * c + ch) * hw + j;
    double va = a[idx];
    if (Mode == kSumDy) {
      s0 += va;
    } else if (Mode == kSumXX2) {
      s0 += va;
      s1 += va * va;
    } else {
      s0 += va;                         /* dy */
      s1 += va * (double)(b[idx] - mu); /* dy * (x - mean) */
    }
  }
  s0 = block_sum(s0, shared);
  if (Mode != kSumDy) s1 = block_sum(s1, shared);
  if (threadIdx.x == 0) {
    partial[((int64_t)ch * splits + s) * 2] = s0;
    partial[((int64_t)ch * splits + s) * 2 + 1] = s1;
  }
}

__device__ void add_slices(const double *partial, int ch, int splits, double *s0, double *s1) {
  double a = 0.0, b = 0.0;
  for (int s = 0; s < splits; s++) {
    a += partial[((int64_t)ch * splits + s) * 2];
    b += partial[((int64_t)ch * splits + s) * 2 + 1];
  }
  *s0 = a;
  *s1 = b;
}

__global__ void bias_grad_finish(const double *partial, float *db, int c, int splits) {
  int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  double s0, s1;
  add_slices(partial, ch, splits, &s0, &s1);
  db[ch] = (float)s0;
}

__global__ void bn_stats_finish(const double *partial, float *run_mean, float *run_var,
                                float *save_mean, float *save_invstd, int c, int splits,
                                int64_t m, double eps, double momentum) {
  int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  double sum, sumsq;
  add_slices(partial, ch, splits, &sum, &sumsq);
  double mean = sum / (double)m;
  double var = sumsq / (double)m - mean * mean;
  if (var < 0.0) var = 0.0;
  save_mean[ch] = (float)mean;
  save_invstd[ch] = (float)(1.0 / sqrt(var + eps));
  double unbiased = m > 1 ? var * (double)m / (double)(m - 1) : var;
  run_mean[ch] = (float)((1.0 - momentum) * run_mean[ch] + momentum * mean);
  run_var[ch] = (float)((1.0 - momentum) * run_var[ch] + momentum * unbiased);
}

/* coef[2ch] = mean(dy), coef[2ch+1] = mean(dy * xhat); dgamma = sum(dy * xhat), dbeta = sum(dy). */
__global__ void bn_backward_finish(const double *partial, const float *save_invstd, float *dgamma,
                                   float *dbeta, double *coef, int c, int splits, int64_t m) {
  int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  double sum_dy, sum_dy_xc;
  add_slices(partial, ch, splits, &sum_dy, &sum_dy_xc);
  double sum_dy_xhat = sum_dy_xc * (double)save_invstd[ch];
  dgamma[ch] = (float)sum_dy_xhat;
  dbeta[ch] = (float)sum_dy;
  coef[2 * ch] = sum_dy / (double)m;
  coef[2 * ch + 1] = sum_dy_xhat / (double)m;
}

__global__ void bn_apply(const float *x, float *y, const float *gamma, const float *beta,
                         const float *mean, const float *invstd, int c, int hw, int64_t count) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    int ch = (int)((i / hw) % c);
    y[i] = (x[i] - mean[ch]) * invstd[ch] * gamma[ch] + beta[ch];
  }
}

__global__ void bn_apply_infer(const float *x, float *y, const float *gamma, const float *beta,
                               const float *run_mean, const float *run_var, int c, int hw,
                               int64_t count, float eps) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    int ch = (int)((i / hw) % c);
    float invstd = rsqrtf(run_var[ch] + eps);
    y[i] = (x[i] - run_mean[ch]) * invstd * gamma[ch] + beta[ch];
  }
}

/* dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)). */
__global__ void bn_backward_apply(const float *x, const float *dy, float *dx, const float *gamma,
                                  const float *save_mean, const float *save_invstd,
                                  const double *coef, int c, int hw, int64_t count,
                                  int accumulate) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    int ch = (int)((i / hw) % c);
    float invstd = save_invstd[ch];
    float xhat = (x[i] - save_mean[ch]) * invstd;
    float g = gamma[ch] * invstd *
              (dy[i] - (float)coef[2 * ch] - xhat * (float)coef[2 * ch + 1]);
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

__global__ void bias_add_kernel(float *y, const float *b, int c, int hw, int64_t count) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] += b[(i / hw) % c];
}

__global__ void relu_forward_kernel(const float *x, float *y, int64_t count, float cap) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = x[i];
    v = v > 0.0f ? v : 0.0f;
    y[i] = v < cap ? v : cap;
  }
}

__global__ void relu_backward_kernel(const float *y, const float *dy, float *dx, int64_t count,
                                     float cap, int accumulate) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = y[i];
    float g = (v > 0.0f && v < cap) ? dy[i] : 0.0f;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

/* Index (row * w + col) in the plane of the maximum of output window (oy, ox) by PyTorch's rule
 * (the first of equal values; a NaN takes over, and so does a later NaN: the scan does not stop);
 * -1 when the window holds no input pixel. */
__device__ int window_argmax(const float *plane, const hs_cuk_pool p, int oy, int ox) {
  int y0 = oy * p.stride - p.pad, x0 = ox * p.stride - p.pad;
  int best = -1;
  float bestv = -INFINITY;
  for (int dy = 0; dy < p.k; dy++) {
    int yy = y0 + dy;
    if (yy < 0 || yy >= p.h) continue;
    for (int dx = 0; dx < p.k; dx++) {
      int xx = x0 + dx;
      if (xx < 0 || xx >= p.w) continue;
      float v = plane[yy * p.w + xx];
      if (best < 0 || v > bestv || isnan(v)) {
        best = yy * p.w + xx;
        bestv = v;
      }
    }
  }
  return best;
}

__global__ void maxpool_forward_kernel(const float *x, float *y, const hs_cuk_pool p) {
  int64_t count = (int64_t)p.n * p.c * p.oh * p.ow;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    int ox = (int)(i % p.ow), oy = (int)((i / p.ow) % p.oh);
    int64_t plane = i / ((int64_t)p.oh * p.ow);
    const float *xp = x + plane * p.h * p.w;
    int a = window_argmax(xp, p, oy, ox);
    y[i] = a >= 0 ? xp[a] : -INFINITY;
  }
}

/* The output windows [lo, hi] along one axis that cover input coordinate v. */
__device__ void covering(int v, int k, int stride, int pad, int out, int *lo, int *hi) {
  int a = v + pad - k + 1;
  *lo = a <= 0 ? 0 : (a + stride - 1) / stride;
  int b = (v + pad) / stride;
  *hi = b < out - 1 ? b : out - 1;
}

__global__ void maxpool_backward_kernel(const float *x, const float *dy, float *dx,
                                        const hs_cuk_pool p, int accumulate) {
  int64_t count = (int64_t)p.n * p.c * p.h * p.w;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    int ix = (int)(i % p.w), iy = (int)((i / p.w) % p.h);
    int64_t plane = i / ((int64_t)p.h * p.w);
    const float *xp = x + plane * p.h * p.w;
    const float *dyp = dy + plane * p.oh * p.ow;
    int ylo, yhi, xlo, xhi;
    covering(iy, p.k, p.stride, p.pad, p.oh, &ylo, &yhi);
    covering(ix, p.k, p.stride, p.pad, p.ow, &xlo, &xhi);
    float g = 0.0f;
    int me = iy * p.w + ix;
    for (int oy = ylo; oy <= yhi; oy++)
      for (int ox = xlo; ox <= xhi; ox++)
        if (window_argmax(xp, p, oy, ox) == me) g += dyp[oy * p.ow + ox];
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

__global__ void avgpool_forward_kernel(const float *x, float *y, const hs_cuk_pool p) {
  int64_t count = (int64_t)p.n * p.c * p.oh * p.ow;
  float inv = 1.0f / (float)(p.k * p.k);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    int ox = (int)(i % p.ow), oy = (int)((i / p.ow) % p.oh);
    int64_t plane = i / ((int64_t)p.oh * p.ow);
    const float *xp = x + plane * p.h * p.w;
    int y0 = oy * p.stride - p.pad, x0 = ox * p.stride - p.pad;
    float s = 0.0f;
    for (int dy = 0; dy < p.k; dy++) {
      int yy = y0 + dy;
      if (yy < 0 || yy >= p.h) continue;
      for (int dxx = 0; dxx < p.k; dxx++) {
        int xx = x0 + dxx;
        if (xx >= 0 && xx < p.w) s += xp[yy * p.w + xx];
      }
    }
    y[i] = s * inv;
  }
}

__global__ void avgpool_backward_kernel(const float *dy, float *dx, const hs_cuk_pool p,
                                        int accumulate) {
  int64_t count = (int64_t)p.n * p.c * p.h * p.w;
  float inv = 1.0f / (float)(p.k * p.k);
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    int ix = (int)(i % p.w), iy = (int)((i / p.w) % p.h);
    int64_t plane = i / ((int64_t)p.h * p.w);
    const float *dyp = dy + plane * p.oh * p.ow;
    int ylo, yhi, xlo, xhi;
    covering(iy, p.k, p.stride, p.pad, p.oh, &ylo, &yhi);
    covering(ix, p.k, p.stride, p.pad, p.ow, &xlo, &xhi);
    float g = 0.0f;
    for (int oy = ylo; oy <= yhi; oy++)
      for (int ox = xlo; ox <= xhi; ox++) g += dyp[oy * p.ow + ox];
    g *= inv;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

/* One warp per (sample, channel) plane. */
__global__ void gap_forward_kernel(const float *x, float *y, int64_t planes, int hw) {
  int lane = threadIdx.x & 31;
  int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; warp < planes;
       warp += warps) {
    const float *xp = x + warp * hw;
    float s = 0.0f;
    for (int j = lane; j < hw; j += 32) s += xp[j];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) y[warp] = s / (float)hw;
  }
}

__global__ void gap_backward_kernel(const float *dy, float *dx, int hw, int64_t count,
                                    int accumulate) {
  float inv = 1.0f / (float)hw;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    float g = dy[i / hw] * inv;
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

__global__ void add_kernel(const float *a, const float *b, float *y, int64_t count) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float *dst, const float *src, int64_t count, int accumulate) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = accumulate ? dst[i] + src[i] : src[i];
}

/* One block: each thread takes samples tid, tid + kThreads, ... */
__global__ void xent_forward_kernel(const float *logits, const int32_t *labels, int n, int k,
                                    hs_cuk_result *res) {
  __shared__ double shared[kThreads / 32];
  double loss = 0.0, correct = 0.0, bad = 0.0;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const float *l = logits + (int64_t)i * k;
    int best = 0;
    float mx = l[0];
    for (int j = 1; j < k; j++)
      if (l[j] > mx) {
        mx = l[j];
        best = j;
      }
    double sum = 0.0;
    for (int j = 0; j < k; j++) sum += exp((double)(l[j] - mx));
    int y = labels[i];
    if (y < 0 || y >= k) {
      bad += 1.0;
      continue;
    }
    loss += log(sum) + (double)mx - (double)l[y];
    if (best == y) correct += 1.0;
  }
  loss = block_sum(loss, shared);
  correct = block_sum(correct, shared);
  bad = block_sum(bad, shared);
  if (threadIdx.x == 0) {
    res->loss = n > 0 ? loss / n : 0.0;
    res->correct = (int)correct;
    res->bad_label = (int)bad;
  }
}

__global__ void xent_backward_kernel(const float *logits, const int32_t *labels, int n, int k,
                                     float *dlogits) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float *l = logits + (int64_t)i * k;
  float *g = dlogits + (int64_t)i * k;
  float mx = l[0];
  for (int j = 1; j < k; j++) mx = l[j] > mx ? l[j] : mx;
  double sum = 0.0;
  for (int j = 0; j < k; j++) sum += exp((double)(l[j] - mx));
  int y = labels[i];
  double inv_n = 1.0 / (double)n;
  for (int j = 0; j < k; j++) {
    double p = exp((double)(l[j] - mx)) / sum;
    g[j] = (float)((p - (j == y ? 1.0 : 0.0)) * inv_n);
  }
}

__global__ void sgd_kernel(float *w, const float *grad, float *v, int64_t count, float lr,
                           float momentum, float weight_decay) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
       i += (int64_t)gridDim.x * blockDim.x) {
    float g = grad[i] + weight_decay * w[i];
    float m = momentum * v[i] + g;
    v[i] = m;
    w[i] -= lr * m;
  }
}

} // namespace

extern "C" {

int64_t hs_cuk_scratch_doubles(int c_max) {
  /* partial sums (2 per slice per channel), then 2 coefficients per channel */
  return (int64_t)c_max * (2 * kSplitsMax + 2);
}

cudaError_t hs_cuk_bias_add(float *y, const float *b, int n, int c, int hw,
                            cudaStream_t stream) {
  int64_t count = (int64_t)n * c * hw;
  bias_add_kernel<<<grid_for(count), kThreads, 0, stream>>>(y, b, c, hw, count);
  return launched();
}

cudaError_t hs_cuk_bias_grad(const float *dy, float *db, double *scratch, int n, int c, int hw,
                             cudaStream_t stream) {
  int splits = splits_for(n, hw);
  reduce_partial<kSumDy><<<dim3((unsigned)c, (unsigned)splits), kThreads, 0, stream>>>(
      dy, nullptr, nullptr, scratch, n, c, hw, splits);
  bias_grad_finish<<<(c + kThreads - 1) / kThreads, kThreads, 0, stream>>>(scratch, db, c,
                                                                           splits);
  return launched();
}

cudaError_t hs_cuk_bn_forward_train(const float *x, float *y, const float *gamma,
                                    const float *beta, float *run_mean, float *run_var,
                                    float *save_mean, float *save_invstd, double *scratch, int n,
                                    int c, int hw, double eps, double momentum,
                                    cudaStream_t stream) {
  int splits = splits_for(n, hw);
  int64_t m = (int64_t)n * hw, count = m * c;
  reduce_partial<kSumXX2><<<dim3((unsigned)c, (unsigned)splits), kThreads, 0, stream>>>(
      x, nullptr, nullptr, scratch, n, c, hw, splits);
  bn_stats_finish<<<(c + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      scratch, run_mean, run_var, save_mean, save_invstd, c, splits, m, eps, momentum);
  bn_apply<<<grid_for(count), kThreads, 0, stream>>>(x, y, gamma, beta, save_mean, save_invstd,
                                                     c, hw, count);
  return launched();
}

cudaError_t hs_cuk_bn_forward_infer(const float *x, float *y, const float *gamma,
                                    const float *beta, const float *run_mean,
                                    const float *run_var, int n, int c, int hw, double eps,
                                    cudaStream_t stream) {
  int64_t count = (int64_t)n * c * hw;
  bn_apply_infer<<<grid_for(count), kThreads, 0, stream>>>(x, y, gamma, beta, run_mean, run_var,
                                                           c, hw, count, (float)eps);
  return launched();
}

cudaError_t hs_cuk_bn_backward(const float *x, const float *dy, float *dx, const float *gamma,
                               const float *save_mean, const float *save_invstd, float *dgamma,
                               float *dbeta, double *scratch, int n, int c, int hw,
                               int accumulate, cudaStream_t stream) {
  int splits = splits_for(n, hw);
  int64_t m = (int64_t)n * hw, count = m * c;
  double *coef = scratch + (int64_t)c * 2 * kSplitsMax;
  reduce_partial<kSumDyXc><<<dim3((unsigned)c, (unsigned)splits), kThreads, 0, stream>>>(
      dy, x, save_mean, scratch, n, c, hw, splits);
  bn_backward_finish<<<(c + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      scratch, save_invstd, dgamma, dbeta, coef, c, splits, m);
  if (!dx) return launched(); /* the input is the data batch: only dgamma and dbeta */
  bn_backward_apply<<<grid_for(count), kThreads, 0, stream>>>(x, dy, dx, gamma, save_mean,
                                                              save_invstd, coef, c, hw, count,
                                                              accumulate);
  return launched();
}

cudaError_t hs_cuk_relu_forward(const float *x, float *y, int64_t count, float cap,
                                cudaStream_t stream) {
  relu_forward_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, y, count, cap);
  return launched();
}

cudaError_t hs_cuk_relu_backward(const float *y, const float *dy, float *dx, int64_t count,
                                 float cap, int accumulate, cudaStream_t stream) {
  relu_backward_kernel<<<grid_for(count), kThreads, 0, stream>>>(y, dy, dx, count, cap,
                                                                 accumulate);
  return launched();
}

cudaError_t hs_cuk_maxpool_forward(const float *x, float *y, const hs_cuk_pool *p,
                                   cudaStream_t stream) {
  int64_t count = (int64_t)p->n * p->c * p->oh * p->ow;
  maxpool_forward_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, y, *p);
  return launched();
}

cudaError_t hs_cuk_maxpool_backward(const float *x, const float *dy, float *dx,
                                    const hs_cuk_pool *p, int accumulate, cudaStream_t stream) {
  int64_t count = (int64_t)p->n * p->c * p->h * p->w;
  maxpool_backward_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, dy, dx, *p, accumulate);
  return launched();
}

cudaError_t hs_cuk_avgpool_forward(const float *x, float *y, const hs_cuk_pool *p,
                                   cudaStream_t stream) {
  int64_t count = (int64_t)p->n * p->c * p->oh * p->ow;
  avgpool_forward_kernel<<<grid_for(count), kThreads, 0, stream>>>(x, y, *p);
  return launched();
}

cudaError_t hs_cuk_avgpool_backward(const float *dy, float *dx, const hs_cuk_pool *p,
                                    int accumulate, cudaStream_t stream) {
  int64_t count = (int64_t)p->n * p->c * p->h * p->w;
  avgpool_backward_kernel<<<grid_for(count), kThreads, 0, stream>>>(dy, dx, *p, accumulate);
  return launched();
}

cudaError_t hs_cuk_gap_forward(const float *x, float *y, int n, int c, int hw,
                               cudaStream_t stream) {
  int64_t planes = (int64_t)n * c;
  gap_forward_kernel<<<grid_for(planes * 32), kThreads, 0, stream>>>(x, y, planes, hw);
  return launched();
}

cudaError_t hs_cuk_gap_backward(const float *dy, float *dx, int n, int c, int hw, int accumulate,
                                cudaStream_t stream) {
  int64_t count = (int64_t)n * c * hw;
  gap_backward_kernel<<<grid_for(count), kThreads, 0, stream>>>(dy, dx, hw, count, accumulate);
  return launched();
}

cudaError_t hs_cuk_add(const float *a, const float *b, float *y, int64_t count,
                       cudaStream_t stream) {
  add_kernel<<<grid_for(count), kThreads, 0, stream>>>(a, b, y, count);
  return launched();
}

cudaError_t hs_cuk_accumulate(float *dst, const float *src, int64_t count, int accumulate,
                              cudaStream_t stream) {
  accumulate_kernel<<<grid_for(count), kThreads, 0, stream>>>(dst, src, count, accumulate);
  return launched();
}

cudaError_t hs_cuk_xent_forward(const float *logits, const int32_t *labels, int n, int k,
                                hs_cuk_result *res, cudaStream_t stream) {
  xent_forward_kernel<<<1, kThreads, 0, stream>>>(logits, labels, n, k, res);
  return launched();
}

cudaError_t hs_cuk_xent_backward(const float *logits, const int32_t *labels, int n, int k,
                                 float *dlogits, cudaStream_t stream) {
  xent_backward_kernel<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream>>>(logits, labels, n,
                                                                              k, dlogits);
  return launched();
}

cudaError_t hs_cuk_sgd(float *w, const float *grad, float *v, int64_t count, float lr,
                       float momentum, float weight_decay, cudaStream_t stream) {
  sgd_kernel<<<grid_for(count), kThreads, 0, stream>>>(w, grad, v, count, lr, momentum,
                                                       weight_decay);
  return launched();
}

} // extern "C"
