/* cal_run: a whole calibration of one device — batch sweeps of training steps for each model,
 * the communication sweep, and the fits — writing everything to the store as it goes.
 *
 * Method (calib/README.md has the details):
 * - For each model, a net is opened on the device (nn_net.h) and fed random fp32 inputs and
 *   random labels of the model's shape (timing does not depend on the values).
 * - The batch sizes are timed interleaved (hs_cal_sweep, cal_time.h): passes over the sizes in
 *   increasing order, each visit `warmup` untimed steps on a size's first visit (one after a
 *   switch of size), then a few timed steps, each split by hs_net_mark into forward, backward
 *   and update, and timed whole (phase "step"), until each size's step times are precise
 *   enough and not bimodal (cal_time.h). Median, p10, p90 and count of every phase are stored
 *   as one point when its size is done. The sweep stops at the first HS_ENOMEM (first pass);
 *   the largest batch that ran becomes perf_model.max_batch.
 * - Resume: a point (device, model, batch) already stored is skipped unless opts.redo, so an
 *   interrupted calibration rerun with the same arguments completes the rest; then every phase
 *   is refitted from all stored points (cal_fit.h) and the fits replace the earlier ones.
 *   The "step" fit is fitted to the timed whole steps, not to the sum of the phases.
 * - Concurrent workers (opts.concurrent = N > 1): N-1 more nets, each on its own thread with
 *   the same batch, step in lock-step with the timed net (all wait for each other after every
 *   step, as the runtime's workers meet at every all-reduce), so the times are those of
 *   one of N workers sharing the device (cores, caches, memory bandwidth) as the real runtime's
 *   workers do; each sample is then the mean step time over a block of consecutive steps
 *   lasting about 20 ms (sized from the warm-up), so that it includes its share of the turns
 *   the threads take on the cores (a single step's median misses the preemptions of a loaded
 *   machine); the p10 and p90 stored are those of the single steps (a uniform sample of up to
 *   4,096 per point), whose spread the simulator's jitter stands for, not of the block means.
 *   On the cpu, with at least N CPUs, the N threads are pinned one per CPU (as the runtime's
 *   workers, real_run.h). The caller stores such a calibration under its own device name.
 * - Communication (cpu devices): the cpu backend's threaded all-reduce and point-to-point
 *   (cal_comm.h) over message sizes 4 KiB, 16 KiB, ... up to comm_max_bytes, stored per size
 *   and fitted to alpha + n/beta. NCCL timing on GPUs is not built: the result says so.
 * Contract: the caller owns the store and the device; hs_cal_result_free frees the result.
 * *opts.stop (may be NULL) interrupts between repetitions with HS_EINTR, keeping every stored
 * point. Units: seconds, bytes, samples. */
#ifndef HS_CAL_RUN_H
#define HS_CAL_RUN_H

#include <signal.h>
#include <stdint.h>

#include "calib/cal_compress.h"
#include "calib/cal_device.h"
#include "calib/cal_fit.h"
#include "calib/cal_store.h"
#include "calib/cal_time.h"
#include "core/core_progress.h"
#include "core/core_store.h"

typedef struct hs_cal_opts {
  const char *const *models;   /* zoo names */
  int n_models;
  const int *batches;          /* samples, increasing */
  int n_batches;
  hs_cal_rule rule;
  int warmup;                  /* untimed steps (or all-reduces) before the timed ones */
  int comm;                    /* 1: time communication (cpu devices) */
  int comm_world;              /* threads of the all-reduce, >= 2 */
  int64_t comm_max_bytes;      /* largest message; sizes go 4 KiB, x4, up to it */
  int redo;                    /* 1: forget the stored points of the models first */
  int concurrent;              /* nets stepping at once, each on its own thread, while one is
                                  timed (the N workers of a real run on this device); 0 or 1:
                                  the timed net alone */
  int no_pin;                  /* 1: leave every thread to the scheduler (`hetsim real --pin
                                  none`); 0: pin the concurrent nets and the all-reduce's
                                  threads one per CPU on the cpu when they fit */
  uint64_t seed;               /* weights and inputs */
  volatile sig_atomic_t *stop; /* may be NULL */
  hs_progress *progress;       /* may be NULL; total = points to visit */
  double wait_s;               /* a GPU net's longest wait for its device (hs_net_options);
                                  0 = the nets' default */
} hs_cal_opts;

typedef struct hs_cal_model_result {
  char model[32];
  int measured, skipped;       /* points timed now, points already stored */
  int oom_batch;               /* first batch that ran out of memory; 0 = none */
  int max_batch;               /* largest batch that ran when one ran out; 0 = no limit seen */
  int fitted[HS_CAL_PHASES];   /* 1 when fits[phase] was stored */
  hs_fit_set fits[HS_CAL_PHASES];
  char fit_error[256];         /* when a phase could not be fitted */
} hs_cal_model_result;

typedef struct hs_cal_comm_result {
  char backend[8];             /* "cpu" (hs_cal_run) | "local" (real/real_comm_calib.h) */
  char op[16];                 /* "allreduce" | "p2p" */
  int world_size;
  int measured, skipped;
  int fitted;
  double alpha_s, beta_bytes_per_s, r2;
  char why[256];               /* when not fitted */
} hs_cal_comm_result;

typedef struct hs_cal_result {
  int64_t device_id;
  int n_models;
  hs_cal_model_result *models;
  int n_comm;
  hs_cal_comm_result comm[2];
  /* The hand-off latency (cal_comm.h, hs_cal_time_wake), timed with the communication: 1 when
   * timed now (wake holds it), 0 when a sample was already stored or comm was not timed. */
  int wake_measured, wake_skipped;
  hs_cal_stats wake;
  char comm_note[160];         /* why communication was not timed, if it was not */
  /* The compressors' round trips on the models' gradients (cal_compress.h), timed by the CLI
   * after the rest. */
  int n_compress;
  hs_cal_compress_result compress[HS_CAL_COMPRESS_MAX];
} hs_cal_result;

/* Points to visit (models x batches, plus message sizes x ops and the hand-off latency when
 * comm), for a progress total. */
int hs_cal_points(const hs_cal_opts *o, const hs_cal_device *dev);
int hs_cal_run(hs_store *s, const hs_cal_device *dev, const hs_cal_opts *o, hs_cal_result *res,
               hs_diag *d);
void hs_cal_result_free(hs_cal_result *res);

#endif
