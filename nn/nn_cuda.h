/* nn_cuda: what a cuda net offers beyond nn_net.h — one training step captured as a CUDA graph,
 * the SMs a net was granted, its math mode, and a way for a communication backend to order its
 * work after a net's.
 *
 * A training step (forward with batch statistics, backward, SGD update) is a few hundred kernel
 * launches; replaying it as one CUDA graph removes the launch overhead, which matters for small
 * batches and for SM-partitioned devices. The captured graph works on the net's buffers in
 * place: hs_net_load of a batch of the same size replaces the data the next replay trains on,
 * and hs_net_result reads the replayed step's loss. The SGD settings are fixed at capture.
 *
 * Contract: capture needs a loaded batch; it builds whatever the step needs first (cuDNN plans,
 * workspaces), then records the step without running it. A replay is invalid (HS_EINVAL:
 * capture again) after a load of a different batch size, and after anything grew the cuDNN
 * workspace the step was recorded with (a plan for another batch, built by a later forward
 * pass), since the graph holds the old workspace's address. Capture needs no eager step first:
 * cuBLAS is given its workspace up front, cuDNN's plans and workspace are built before the
 * capture begins, and drivers of CUDA 12.3 and later load a kernel's module lazily inside a
 * capture (the lent H100/H200 machines run 13.0); on a partition the capture runs on the green
 * context's stream like any other work. Not run on a GPU yet. hs_net_close frees the graph. Nets
 * of other backends, and builds without CUDA, answer HS_EUNSUPPORTED. Calls are asynchronous on
 * the net's stream, as the rest of a cuda net's calls.
 *
 * Partitions ("cuda:I/sm=N"): the nets of one process never share SMs. Each GPU's SMs are split
 * once into the smallest groups its driver allows (8 SMs on compute capability 9.0) and a net
 * takes enough free groups for N SMs, so N is rounded up (hs_net_cuda_sm_count says what was
 * granted) and opening fails with HS_ELIMIT when the GPU's groups are used up. Nets of
 * different sizes may share a GPU: that is how one GPU emulates a heterogeneous cluster. */
#ifndef HS_NN_CUDA_H
#define HS_NN_CUDA_H

#include "core/core_error.h"
#include "nn/nn_net.h"

/* Records forward(train) + backward + update(opt) of the loaded batch as a CUDA graph. */
int hs_net_cuda_capture_step(hs_net *n, const hs_sgd *opt, hs_diag *d);
/* Runs the captured step once on the net's stream. */
int hs_net_cuda_replay_step(hs_net *n, hs_diag *d);

/* The SMs the net's work runs on: the partition the driver granted on "cuda:I/sm=N" (N rounded
 * up to whole groups), the GPU's count on "cuda:I"; 0 for a net of another backend. */
int hs_net_cuda_sm_count(const hs_net *n);
/* "strict" or "fast" (HETSIM_CUDA_MATH at open; nn_cuda_plan.h); NULL for other backends. */
const char *hs_net_cuda_math(const hs_net *n);

/* For a backend that holds only a device pointer (the local backend's all-reduce): finds the
 * open cuda net of this process whose parameter or gradient vector contains dev_ptr, makes that
 * net's context current on the calling thread, and records a new CUDA event (a cudaEvent_t,
 * returned in *event; destroy it with cudaEventDestroy) on the net's stream, which carries all
 * of its work: the event completes when everything the net has enqueued so far is done.
 * HS_ENOTFOUND when no open cuda net holds dev_ptr. Thread-safe. */
int hs_net_cuda_record_owner(const void *dev_ptr, void **event, hs_diag *d);

/* 1 once the CUDA stream (a cudaStream_t, in the calling thread's current context) has nothing
 * left to run, or has failed (which ends its work too); 0 when it still runs after within_s
 * seconds. Polled, never cudaStreamSynchronize, so that a kernel that does not end cannot hang
 * the caller. 1 in a build without CUDA. */
int hs_cuda_stream_drained(void *stream, double within_s);

/* GPU `ordinal` had work that did not end within a bound (a net's wait, a backend's reduction or
 * teardown): for the rest of the process, closing a net or a comm backend on it leaves their
 * memory and handles to the process's exit, since freeing them (cudaFree, cublasDestroy) may
 * wait for the whole device. Thread-safe; ordinals outside [0, 64) are ignored (never wedged). */
void hs_cuda_mark_wedged(int ordinal);
int hs_cuda_device_wedged(int ordinal);

#endif
