/* A stand-in for the CUDA toolkit's cuda_runtime_api.h, for the CUDA emulation (cuda_emu.h) only.
 *
 * It is on the include path of test_deviceless_cuda_kernels alone, ahead of any toolkit, so that
 * the kernel headers (nn/nn_cuda_kernels.h, nn/nn_real_kernels.h) compile with g++ where no CUDA
 * toolkit is installed. It declares the part of the runtime API those headers and kernel files
 * use: the error and stream types, the vector types of the launch configuration and
 * cudaGetLastError. Error codes keep the toolkit's values, so that a printed code means the same
 * in both worlds. */
#ifndef HS_CUDA_EMU_RUNTIME_API_H
#define HS_CUDA_EMU_RUNTIME_API_H

#ifndef __cplusplus
#error "the CUDA emulation is C++ (tests/cuda_emu/cuda_emu.h)"
#endif

#include <stddef.h>

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
typedef enum cudaError cudaError_t;

typedef struct CUstream_st *cudaStream_t;

struct uint3 {
  unsigned x, y, z;
};

/* Grid and block sizes; unnamed dimensions are 1, as in CUDA. */
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

extern "C" {
/* The last error of a launch (or of the emulation), reset to cudaSuccess by the call. */
cudaError_t cudaGetLastError(void);
/* Like cudaGetLastError, without the reset. */
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t error);
}

#endif
