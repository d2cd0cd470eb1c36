/* nn_real_kernels: the weighted sum behind the local backend's all-reduce (see nn_real_kernels.h). */
#include "nn/nn_real_kernels.h"

namespace {

/* Passed by value, so that one launch needs no device copy of the pointers and weights. */
struct rk_sources {
  const float *src[HS_RK_MAX_SRC];
  float w[HS_RK_MAX_SRC];
  int k;
};

__global__ void weighted_sum_kernel(float *dst, rk_sources s, int accumulate, int64_t n) {
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += stride) {
    float acc = accumulate ? dst[j] : 0.0f;
    for (int k = 0; k < s.k; k++) acc = fmaf(s.w[k], s.src[k][j], acc);
    dst[j] = acc;
  }
}

} // namespace

extern "C" cudaError_t hs_rk_weighted_sum(float *dst, const float *const *src, const float *w,
                                          int k_count, int accumulate, int64_t n,
                                          cudaStream_t stream) {
  if (k_count < 1 || k_count > HS_RK_MAX_SRC || n < 1) return cudaErrorInvalidValue;
  rk_sources s;
  for (int k = 0; k < k_count; k++) {
    s.src[k] = src[k];
    s.w[k] = w[k];
  }
  for (int k = k_count; k < HS_RK_MAX_SRC; k++) {
    s.src[k] = nullptr;
    s.w[k] = 0.0f;
  }
  s.k = k_count;
  const int threads = 256;
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 4096) blocks = 4096; /* grid-stride loop beyond */
  weighted_sum_kernel<<<(unsigned)blocks, threads, 0, stream>>>(dst, s, accumulate, n);
  return cudaGetLastError();
}
