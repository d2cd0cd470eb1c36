/* fake_probe_kernels: nn/nn_probe.h's spin kernel on the emulated runtime (gpu_emu.h), for the
 * green-context probe. The kernel's time is what the probe measures: here it is modelled, as
 * the blocks spread over the SMs the stream's green context has (the emulated driver's
 * hs_emu_driver_stream_sms, found with dlsym), SPIN_UNIT_S a wave; so partitions isolate by
 * construction, and what the test checks is the probe's own use of the driver and its
 * arithmetic, not a GPU's. The output is written as the kernel would (every thread's float). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn/nn_probe.h"
#include "tests/gpu_emu/gpu_emu.h"

/* A wave of one block per SM. Long enough that a loaded machine's late wake-up from the sleep
 * (2.3 ms seen on a 4.4 ms kernel with the rehearsal running beside it, 2026-11-29, which took
 * the speed ratio of 8 and 24 SMs to 1.97 against the probe's bound of 2) stays small beside
 * the kernel: 132 and 44 ms there now, each timed 4 times. */
#define SPIN_UNIT_S 500e-6

typedef struct spin_launch {
  float *out;
  size_t n;
  double seconds;
} spin_launch;

static void spin_run(void *p) {
  spin_launch *a = p;
  struct timespec ts = {.tv_sec = (time_t)a->seconds, .tv_nsec = (long)((a->seconds - (double)(time_t)a->seconds) * 1e9)};
  nanosleep(&ts, NULL);
  for (size_t i = 0; i < a->n; i++) a->out[i] = 1.0f;
  free(a);
}

static int stream_sms(void *stream) {
  void *sym = hs_emu_driver_sym("hs_emu_driver_stream_sms");
  int (*get)(void *) = NULL;
  memcpy(&get, &sym, sizeof sym);
  return get ? get(stream) : 0;
}

int hs_probe_spin_launch(void *stream, float *out, int blocks, int threads, int iters) {
  (void)iters;
  if (blocks < 1 || threads < 1) return (int)cudaErrorInvalidValue;
  size_t n = (size_t)blocks * (size_t)threads;
  int device = hs_emu_stream_device((cudaStream_t)stream);
  if (device < 0) return (int)cudaErrorInvalidResourceHandle;
  int dev = -1;
  if (!hs_emu_device_range(out, n * sizeof *out, &dev) || dev != device)
    hs_emu_violation("hs_probe_spin_launch: out (%zu floats) is not device memory of the stream's device", n);
  int sms = stream_sms(stream);
  if (sms < 1) hs_emu_violation("hs_probe_spin_launch: the emulated driver is not loaded");
  spin_launch *a = malloc(sizeof *a);
  if (!a) return (int)cudaErrorMemoryAllocation;
  int waves = (blocks + sms - 1) / sms;
  *a = (spin_launch){.out = out, .n = n, .seconds = waves * SPIN_UNIT_S};
  cudaError_t e = hs_emu_stream_submit((cudaStream_t)stream, spin_run, a);
  if (e != cudaSuccess) free(a);
  return (int)e;
}
