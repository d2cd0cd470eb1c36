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
#include "core/core_progress.h"
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

/* The multi-process channel (backend "tcp" in the tables): the cpu backend between processes,
 * one per rank (hs_real_comm_tcp_rank, real_rank_tcp.h), timed through it by every rank of a
 * launch (mpirun, torchrun) together, as `hetsim calib --device cpu` does when started under a
 * launcher; what `hetsim validate` reads for a run of one process per worker on the cpu.
 *
 * Every rank sizes its buffers by its own list of message sizes (from msg_bytes and max_bytes,
 * as below): first the ranks check that their lists are rank 0's (a digest; two all-reduces of
 * 4 floats) and all fail with HS_EINVAL, before anything is stored, where one differs (rank 0's
 * message names the rank and its largest message).
 *
 * Rank 0 leads: it stores the device (dev, its id in *dev_id), then before each repetition it
 * tells every rank what comes next with an all-reduce of 4 floats (its own hold the command,
 * the others' are 0, weights 1), then times, on itself:
 * - allreduce (world: the launch's), sizes 4 KiB x 4^k below min(max_bytes, the largest message),
 *   and every message of msg_bytes (the models' gradients): from the command's return to its
 *   all-reduce's (each rank's buffer, of the gradient's size, sent as it lies);
 * - p2p (world 2): rank 1's send to rank 0 at the same sizes, from the command to the receive's end;
 * - wake (world 2, 0 bytes): one control message from one process to another waiting in poll,
 *   half a round trip of a 4-byte message between ranks 0 and 1 after rank 0 has busy-waited
 *   HS_CAL_WAKE_IDLE_S (cal_comm.h), so that rank 1's CPU went idle as a waiting rank's does.
 * Repetitions: `warmup` untimed, then timed ones until the rule of cal_time.h stops them. Each
 * point is stored (on rank 0, in s as device *dev_id) unless already there, and the all-reduce
 * and p2p are refitted (alpha + n/beta); with redo the device's tcp rows are deleted first.
 *
 * The other ranks (s NULL) serve rank 0's commands until it says the end (0), or fail with the
 * channel (rank 0 died: HS_ERUNTIME). Rank 0's *stop ends the timing with HS_EINTR, the other
 * ranks told first; what was stored stays. Every wait is bounded by timeout_s. Units: bytes, s. */
typedef struct hs_real_ranks_calib_opts {
  const int64_t *msg_bytes; /* messages always timed (the models' gradients), n_msgs >= 1 */
  int n_msgs;
  int64_t max_bytes;        /* the largest message of the 4^k sizes */
  double timeout_s;         /* the channel's bound on every wait; <= 0 = 60 s */
  int redo;
  hs_cal_comm_opts timing;  /* no_pin 0: each process pinned as the run's ranks (hs_real_rank_pins) */
  hs_progress *progress;    /* rank 0: advanced by one per point timed or found; may be NULL */
} hs_real_ranks_calib_opts;

/* The points rank 0 visits (sizes x 2 + the wake), for a progress total. */
int hs_real_ranks_calib_points(const hs_real_ranks_calib_opts *o);

/* cr[0] all-reduce, cr[1] p2p; *wake the hand-off, with *wake_state 1 timed now, 2 already stored. */
int hs_real_comm_calibrate_ranks(hs_store *s, const hs_cal_device *dev, int64_t *dev_id, const hs_real_ranks_calib_opts *o,
                                 hs_cal_comm_result cr[2], hs_cal_stats *wake, int *wake_state, hs_diag *d);

#endif
