/* real_comm_calib: a communication backend's all-reduce and send/recv timed through the
 * backend, as the real runtime calls them, and stored as the calibration that `hetsim validate`
 * reads for runs on that backend (comm_sample and comm_model rows of backend `local`, or `cpu`).
 *
 * Why through the backend: calib/cal_comm.c times the cpu backend's kernels re-implemented in
 * calib/ (calib may not use real/); the local backend's all-reduce (real_local.c: events, a
 * device reduction, a copy back into every participant's buffer, condition waits) has no such
 * copy, and a run on it spends what the backend does. So its buffers are what a run shares:
 * the gradients of `world` nets of the model, opened on the device (device memory on a GPU,
 * where the local backend finds each buffer's owning net), and `world` threads call the
 * backend's allreduce on them with the run's weights (1/world each).
 *
 * One message size (hs_real_comm_time_allreduce) is timed by calib's lock-step timer
 * (hs_cal_time_lockstep, cal_comm.h): every thread calls allreduce on the first n floats of its
 * buffer between two barriers, timed on rank 0; with host buffers each thread first writes its
 * own buffer, untimed, as a backward pass leaves its gradient (cal_comm.h says why). Threads are
 * pinned as the runtime pins its workers unless no_pin or too few CPUs. A failing participant
 * aborts the backend, so that the others return instead of waiting for it, and the first
 * failure is returned.
 *
 * The sweep (hs_real_comm_calibrate): sizes 4 KiB x 4^k up to min(max_bytes, the gradient), and
 * the gradient itself (the message of a run of the model), each stored as comm_sample(backend,
 * op, world) of device dev_id unless already stored, then refitted (alpha + n/beta,
 * hs_cal_refit_comm); *stop ends it early with HS_EINTR. Units: bytes, seconds. */
#ifndef HS_REAL_COMM_CALIB_H
#define HS_REAL_COMM_CALIB_H

#include <stdint.h>

#include "calib/cal_comm.h"
#include "calib/cal_run.h"
#include "core/core_error.h"
#include "core/core_store.h"
#include "real/real_comm.h"

int hs_real_comm_time_allreduce(const hs_real_comm_ops *ops, hs_real_comm *c, float *const *bufs, int world,
                                int64_t n, const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d);

typedef struct hs_real_comm_calib_opts {
  const char *backend; /* "local" (device buffers) or "cpu" (host buffers) */
  const char *device;  /* where the nets are opened: "cuda:0", "cuda:0/sm=16", "cpu" */
  const char *model;   /* the zoo model whose gradient buffers carry the messages */
  int world;           /* participants, 2 to 64 */
  int64_t max_bytes;   /* the largest message below the gradient's size */
  double timeout_s;    /* the backend's bound on every wait; <= 0 = 60 s */
  hs_cal_comm_opts timing;
} hs_real_comm_calib_opts;

/* Times and stores the all-reduce (cr[0]: world o->world) and send/recv (cr[1]: world 2, rank 1
 * to rank 0, host buffers of the gradient's size, as the parameter server's traffic travels on
 * every backend) of o->backend. */
int hs_real_comm_calibrate(hs_store *s, int64_t dev_id, const hs_real_comm_calib_opts *o,
                           hs_cal_comm_result cr[2], hs_diag *d);

#endif
