/* nn_cuda_wait: bounded waits for CUDA work, and the process-wide record of GPUs whose work did
 * not end in time (declared for everyone in nn_cuda.h: hs_cuda_stream_drained,
 * hs_cuda_mark_wedged, hs_cuda_device_wedged). This header is for the files built against the
 * CUDA runtime (nn_cuda.c); the waits use the runtime API only, so the deviceless tests build them
 * against an emulated runtime (tests/gpu_emu). */
#ifndef HS_NN_CUDA_WAIT_H
#define HS_NN_CUDA_WAIT_H

#include <cuda_runtime_api.h>

/* Waits until the event (or, with ev NULL, the stream) has no work left, polling: cudaSuccess,
 * the error that ended the work, or cudaErrorNotReady once within_s has passed. Never
 * cudaStreamSynchronize, so that a kernel that does not end cannot hang the caller. */
cudaError_t hs_cuda_poll_done(cudaStream_t stream, cudaEvent_t ev, double within_s);

#endif
