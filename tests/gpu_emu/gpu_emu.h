/* gpu_emu: what the emulated CUDA runtime (fake_cudart.c, linked into a deviceless test) offers
 * the emulated NCCL (fake_nccl.c, built as libnccl.so.2 and opened by nn/nn_cudalib.c's loader
 * through HETSIM_NCCL_PATH) beyond the runtime API itself. Internal to tests/gpu_emu and the
 * tests built on it; nothing in hetsim includes it.
 *
 * The runtime (fake_cudart.c) implements the part of <cuda_runtime_api.h> that real/real_nccl.c,
 * nn/nn_cuda_wait.c and the tests call, against the real header's declarations, following the
 * documented semantics adversarially:
 * - "device memory" is host memory from cudaMalloc, filled with NaN bytes (device memory is not
 *   initialised) and kept in a registry, so that a host pointer passed where device memory is
 *   expected, an overrun, and a use after cudaFree are caught;
 * - every stream is an in-order queue run by its own executor thread after small random delays,
 *   so work completes later than it was enqueued; events, cudaStreamWaitEvent, the legacy
 *   default stream's implicit synchronisation with blocking streams, and the blocking calls
 *   behave as documented (cudaMemcpy from pageable memory returns before its copy has landed;
 *   cudaMemcpyAsync to pageable memory is synchronous with the host);
 * - several GPUs may be emulated (HS_EMU_GPUS, default 1); streams, events and memory belong to
 *   the device current on the calling thread when they were created; each device holds
 *   HS_EMU_DEVICE_MEM bytes (default 8 GiB);
 * - stream capture and CUDA graphs follow the programming guide's rules (fake_cudart.c says
 *   which, and what it does not model).
 * A misuse that the documentation calls an error returns the documented error; one that would
 * corrupt data silently or hang a real GPU is a VIOLATION: a message on stderr, then abort(), so
 * that the test that provoked it fails loudly.
 *
 * Bounds: no wait in the emulation is unbounded. Where a real GPU or NCCL would wait for ever (a
 * kernel whose peer never comes, a synchronous call behind it), the emulation waits
 * hs_emu_bound_s() seconds (HS_EMU_BOUND_S, default 20) and then reports a violation: code that
 * relies on such a wait ending would hang on a GPU.
 *
 * Threading: everything here is thread-safe. Units: bytes, seconds. */
#ifndef HS_GPU_EMU_H
#define HS_GPU_EMU_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Prints "gpu_emu: VIOLATION: ..." (with the process id) on stderr and aborts the process. */
void hs_emu_violation(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* The bound on every wait that would be unbounded on a real GPU (s). */
double hs_emu_bound_s(void);

/* Sleeps a random time in [min_us, max_us] microseconds (per-thread generator seeded from
 * HS_EMU_SEED, or the process id and the clock). */
void hs_emu_jitter(unsigned min_us, unsigned max_us);

/* The device current on the calling thread (cudaSetDevice; 0 by default). */
int hs_emu_current_device(void);

/* 1 when [p, p + bytes) lies inside one live cudaMalloc allocation, with its device in *device
 * (may be NULL); 0 otherwise. */
int hs_emu_device_range(const void *p, size_t bytes, int *device);

/* The device a stream belongs to, or -1 when s is not a live stream (the legacy and per-thread
 * default streams belong to the current device). */
int hs_emu_stream_device(cudaStream_t s);

/* Work a library puts on a user's stream (NCCL's kernels): runs fn(arg) on the stream's
 * executor in order with the rest of its work. Unlike the runtime API's calls, this one is
 * allowed while the stream has work held back (hs_emu_stream_hold). cudaErrorInvalidResourceHandle
 * for a stream that is not live, cudaErrorStreamCaptureImplicit for the legacy stream while a
 * blocking stream captures; on a capturing stream it is a violation (not modelled). */
cudaError_t hs_emu_stream_submit(cudaStream_t s, void (*fn)(void *), void *arg);

/* A library says that it will put work on s later (delta +1: NCCL returned ncclInProgress and
 * enqueues from its own thread) or has done so or given up (delta -1). While any is held back,
 * every runtime call on s (cudaEventRecord, cudaMemcpyAsync, cudaStreamWaitEvent,
 * cudaLaunchHostFunc, cudaStreamQuery, cudaStreamSynchronize, cudaStreamDestroy) is a violation: NCCL's documentation says that
 * until the communicator's state is ncclSuccess no CUDA call may be issued on streams NCCL uses,
 * and such a call would see the stream without the work it means to follow. `who` names the
 * holder in that message. */
void hs_emu_stream_hold(cudaStream_t s, int delta, const char *who);

/* Work a library or an emulated kernel owns (cuDNN's and cuBLAS's work, kernel launches of
 * tests/cuda_emu): like hs_emu_stream_submit, but arg belongs to the stream from the call on,
 * and the work may be captured.
 * fn(arg) may run more than once: while s is capturing (cudaStreamBeginCapture) the work is
 * recorded into the capture instead of run, and each launch of a graph made from it runs it
 * again. release(arg) (may be NULL) runs exactly once, when nothing will run fn(arg) again:
 * after it ran, or when the capture is abandoned or the graph and every executable graph
 * instantiated from it are destroyed. cudaErrorInvalidResourceHandle for a stream that is not
 * live, cudaErrorStreamCaptureInvalidated for a capture that was invalidated and
 * cudaErrorStreamCaptureImplicit for the legacy stream while a blocking stream captures (arg is
 * released then). */
cudaError_t hs_emu_stream_submit_owned(cudaStream_t s, void (*fn)(void *), void *arg,
                                       void (*release)(void *));

/* Sets the calling thread's last error (what cudaGetLastError returns next), as a launch that
 * fails does. */
void hs_emu_set_last_error(cudaError_t e);

/* 1 when the calling thread has a stream capture under way whose mode forbids potentially
 * unsafe calls (cudaStreamCaptureModeGlobal or ThreadLocal): a library that would allocate
 * device memory now (cuBLAS without a workspace of the user's) must not. */
int hs_emu_thread_capturing(void);

/* A symbol of the emulated driver's library (libcuda.so.1), once hetsim's loader has opened it;
 * NULL before, or for a name it does not have. The driver's own extras below are found so. */
void *hs_emu_driver_sym(const char *name);

/* The emulated driver (fake_cuda_driver.c, libcuda.so.1): how often device dev's primary context
 * is retained now (-1 for a device it does not have). It lives in the driver's library, which
 * hetsim's loader opens: a test finds it with dlsym. */
int hs_emu_driver_primary_refs(int dev);
/* The emulated driver's green context g: its SMs as a bit set (bit i: SM i) in sms[0..words), and
 * their count; -1 for a green context it did not make or that was destroyed (dlsym it too). */
struct CUgreenCtx_st;
int hs_emu_driver_green_sms(struct CUgreenCtx_st *g, unsigned long long *sms, int words);
/* The SMs a kernel on `stream` may use: its green context's, or the whole device's (132) for a
 * stream made otherwise (dlsym it, or call it from a library the driver's symbols reach). */
int hs_emu_driver_stream_sms(void *stream);

/* Counters of what the emulated NCCL was asked to do in this process, for the tests' checks. */
typedef struct hs_emu_nccl_stats {
  long calls;      /* calls of NCCL functions that take a communicator */
  long created;    /* communicators created (ncclCommInitRank*) */
  long ready;      /* ... that became ready */
  long finalized;  /* ncclCommFinalize calls that completed */
  long destroyed;  /* ncclCommDestroy calls */
  long aborted;    /* ncclCommAbort calls */
  long deferred;   /* operations enqueued later by NCCL's thread after ncclInProgress */
  long kernels;    /* collective and point-to-point kernels that completed */
} hs_emu_nccl_stats;

/* The process's counters (fields updated with __atomic builtins; read them the same way). */
hs_emu_nccl_stats *hs_emu_nccl_stats_get(void);

#ifdef __cplusplus
}
#endif

#endif
