/* nn_probe.cu: the kernel of the green-context probe (see nn_probe.h). */
#include <cuda_runtime_api.h>

#include "nn/nn_probe.h"

/* A compute-bound kernel: each thread runs a dependent chain of multiply-adds, so its time is
 * set by how many SMs execute the blocks, not by memory. The store keeps the chain alive. */
__global__ void hs_probe_spin(float *out, int iters) {
  float a = 1e-3f * (float)threadIdx.x, b = 0.999f;
  for (int i = 0; i < iters; i++) a = fmaf(a, b, 1e-4f);
  out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = a;
}

extern "C" int hs_probe_spin_launch(void *stream, float *out, int blocks, int threads, int iters) {
  hs_probe_spin<<<blocks, threads, 0, (cudaStream_t)stream>>>(out, iters);
  return (int)cudaGetLastError();
}
