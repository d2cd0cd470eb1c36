/* fake_real_kernels: nn/nn_real_kernels.h's launcher on the emulated runtime (gpu_emu.h). The
 * kernel's own arithmetic is checked against its contract by test_deviceless_cuda_kernels, which
 * runs the .cu itself; here the launch is what matters to the code under test: its arguments
 * are taken at the call, as a kernel's parameters are, and the sum runs later on the stream's
 * executor, in order with the stream's other work. Vectors that are not device memory of the
 * stream's device are a violation (an illegal address on a GPU). */
#include <stdlib.h>

#include "nn/nn_real_kernels.h"
#include "tests/gpu_emu/gpu_emu.h"

typedef struct ws_launch {
  float *dst;
  const float *src[HS_RK_MAX_SRC];
  float w[HS_RK_MAX_SRC];
  int k, accumulate;
  int64_t n;
} ws_launch;

static void ws_run(void *p) {
  ws_launch *a = p;
  for (int64_t j = 0; j < a->n; j++) {
    float acc = a->accumulate ? a->dst[j] : 0.0f;
    for (int k = 0; k < a->k; k++) acc = __builtin_fmaf(a->w[k], a->src[k][j], acc);
    a->dst[j] = acc;
  }
  free(a);
}

static void check_vector(const float *v, int64_t n, int device, const char *what) {
  int dev = -1;
  if (!hs_emu_device_range(v, (size_t)n * sizeof *v, &dev))
    hs_emu_violation("hs_rk_weighted_sum: %s %p (%lld floats) is not device memory", what, (const void *)v,
                     (long long)n);
  if (dev != device)
    hs_emu_violation("hs_rk_weighted_sum: %s is memory of device %d, the stream's is %d", what, dev, device);
}

cudaError_t hs_rk_weighted_sum(float *dst, const float *const *src, const float *w, int k_count, int accumulate,
                               int64_t n, cudaStream_t stream) {
  if (k_count < 1 || k_count > HS_RK_MAX_SRC || n < 1) return cudaErrorInvalidValue;
  int device = hs_emu_stream_device(stream);
  if (device < 0) return cudaErrorInvalidResourceHandle;
  ws_launch *a = calloc(1, sizeof *a);
  if (!a) return cudaErrorMemoryAllocation;
  check_vector(dst, n, device, "dst");
  for (int k = 0; k < k_count; k++) {
    check_vector(src[k], n, device, "a source");
    a->src[k] = src[k];
    a->w[k] = w[k];
  }
  a->dst = dst;
  a->k = k_count;
  a->accumulate = accumulate;
  a->n = n;
  cudaError_t e = hs_emu_stream_submit(stream, ws_run, a);
  if (e != cudaSuccess) free(a);
  return e;
}
