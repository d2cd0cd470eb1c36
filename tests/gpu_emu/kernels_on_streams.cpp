/* kernels_on_streams: hetsim's CUDA kernels (nn/nn_cuda_kernels.cu, nn/nn_real_kernels.cu,
 * rewritten for the CUDA emulation of tests/cuda_emu) run on the emulated runtime's streams
 * (fake_cudart.c), in order with the rest of each stream's work and inside captured graphs, so
 * that a whole cuda net trains without a GPU (the deviceless builds of the GPU tests,
 * CMakeLists.txt). It only installs the stream runner, before main; it is compiled with the
 * emulation's stand-in runtime header, so it declares the two functions of gpu_emu.h it hands
 * over itself (same C declarations). */
#include "cuda_emu.h"

extern "C" cudaError_t hs_emu_stream_submit_owned(cudaStream_t s, void (*fn)(void *), void *arg,
                                                  void (*release)(void *));
extern "C" void hs_emu_set_last_error(cudaError_t e);

namespace {
struct install_runner {
  install_runner() { hs_emu_set_stream_runner(hs_emu_stream_submit_owned, hs_emu_set_last_error); }
} installed;
} // namespace
