/* nn_cuda_wait: bounded waits for CUDA work and the wedged GPUs (nn_cuda_wait.h, nn_cuda.h). */
#include "nn/nn_cuda.h"

#include "core/core_buildinfo.h"

#define WEDGED_MAX 64
static int wedged_devices[WEDGED_MAX];

void hs_cuda_mark_wedged(int ordinal) {
  if (ordinal >= 0 && ordinal < WEDGED_MAX) __atomic_store_n(&wedged_devices[ordinal], 1, __ATOMIC_RELEASE);
}

int hs_cuda_device_wedged(int ordinal) {
  return ordinal >= 0 && ordinal < WEDGED_MAX && __atomic_load_n(&wedged_devices[ordinal], __ATOMIC_ACQUIRE);
}

#if HETSIM_HAVE_CUDA

#include <sched.h>
#include <time.h>

#include "core/core_deadline.h"
#include "nn/nn_cuda_wait.h"

/* How long a wait spins (yielding the core) before it polls every 50 us: the CUDA runtime's
 * default schedule spins for the whole wait when the process has fewer contexts than cores, so a
 * step's short waits keep that latency, and only long ones (a large batch on a few SMs) sleep. */
#define SPIN_S 2e-3

cudaError_t hs_cuda_poll_done(cudaStream_t stream, cudaEvent_t ev, double within_s) {
  struct timespec spin, dl;
  hs_deadline_in(&spin, SPIN_S < within_s ? SPIN_S : within_s);
  hs_deadline_in(&dl, within_s);
  for (;;) {
    cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(stream);
    if (e != cudaErrorNotReady) return e;
    if (hs_deadline_past(&dl)) return cudaErrorNotReady;
    if (hs_deadline_past(&spin)) nanosleep(&(struct timespec){0, 50000}, NULL);
    else sched_yield();
  }
}

int hs_cuda_stream_drained(void *stream, double within_s) {
  cudaError_t e = hs_cuda_poll_done((cudaStream_t)stream, NULL, within_s);
  if (e == cudaErrorNotReady) return 0;
  (void)cudaGetLastError(); /* a failed stream has ended its work too */
  return 1;
}

#else /* !HETSIM_HAVE_CUDA */

int hs_cuda_stream_drained(void *stream, double within_s) {
  (void)stream;
  (void)within_s;
  return 1;
}

#endif /* HETSIM_HAVE_CUDA */
