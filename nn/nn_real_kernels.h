/* nn_real_kernels: device kernels for the real runtime's GPU communication backends
 * (real_local.c): the weighted sum of several device vectors into one, as C-callable launchers
 * (nn_real_kernels.cu).
 *
 * Contract: every launcher enqueues on `stream` (which must belong to a context that can read
 * and write the vectors), never synchronises and never allocates; it returns the launch status
 * (cudaGetLastError after the launch). Vectors are fp32 device arrays of n floats; the sum is
 * taken in a fixed order (src[0], src[1], ...) in float with fused multiply-adds, so the result
 * does not depend on which thread or SM computes it. Exists only in builds with CUDA. */
#ifndef HS_NN_REAL_KERNELS_H
#define HS_NN_REAL_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most vectors one hs_rk_weighted_sum call takes; larger sums are chained with accumulate. */
#define HS_RK_MAX_SRC 16

/* dst[j] = (accumulate ? dst[j] : 0) + sum_k w[k] * src[k][j] for k < k_count (1..HS_RK_MAX_SRC).
 * dst may be one of the sources only when accumulate is 0 and it is src[0]. */
cudaError_t hs_rk_weighted_sum(float *dst, const float *const *src, const float *w, int k_count,
                               int accumulate, int64_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
