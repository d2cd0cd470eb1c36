/* cal_comm: timing of the "cpu" communication backend, where workers are threads of one process
 * (the real runtime's cpu backend): a ring all-reduce over world_size threads, and a
 * point-to-point transfer, which between threads is one memcpy.
 *
 * All-reduce: each thread owns an fp32 buffer of `bytes`; reduce-scatter then all-gather around
 * the ring (2(N-1) steps, each thread adding or copying one 1/N chunk of its predecessor's buffer),
 * with a barrier between steps, as the threaded backend synchronises. The time of one all-reduce
 * is measured on thread 0 from a barrier before to a barrier after. Threads are created once per
 * message size and not timed.
 * Repetitions: `warmup` untimed, then timed ones until the rule of cal_time.h stops them.
 * Contract: allocates and frees its buffers and threads inside each call; *stop (may be NULL)
 * ends the repetitions early with HS_EINTR. Units: bytes, seconds. */
#ifndef HS_CAL_COMM_H
#define HS_CAL_COMM_H

#include <signal.h>
#include <stdint.h>

#include "calib/cal_time.h"
#include "core/core_error.h"

typedef struct hs_cal_comm_opts {
  hs_cal_rule rule;
  int warmup;                  /* untimed repetitions */
  volatile sig_atomic_t *stop; /* may be NULL */
} hs_cal_comm_opts;

int hs_cal_time_allreduce(int world_size, int64_t bytes, const hs_cal_comm_opts *o,
                          hs_cal_stats *out, hs_diag *d);
int hs_cal_time_p2p(int64_t bytes, const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d);

/* Monotonic wall time in seconds. */
double hs_cal_now(void);

#endif
