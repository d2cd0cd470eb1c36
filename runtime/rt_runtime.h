/* rt_runtime: what the runtimes of the policy interface do alike.
 *
 * Three runtimes implement hs_runtime_ops: the simulator (sim/sim_run.c), the threaded real
 * runtime (real/real_run.c) and the multi-process real runtime's rank 0 (real/real_rank.c).
 * They judge a policy's calls by the same rules in the same words, keep timers in the same
 * (time, sequence) order, close step records and sum a run up with the same arithmetic and,
 * in real mode, predict a step the same way. This module holds each of those once, so that a
 * policy meets one runtime whether it is simulated or run for real.
 *
 * Contract:
 * - A check returns 0 when the policy's call is well-formed. Otherwise it writes the message
 *   into d and returns its code (HS_ERUNTIME); it changes nothing else, and the runtime's own
 *   fail path then ends its run as failed. The messages are part of the CLI's contract (tests
 *   and users script against them): change none.
 * - Checks are inline, so the simulator's hot path pays a comparison, not a call.
 * - `policy` is the policy's name, for the message; `n` the number of worker slots.
 * - A timer queue belongs to its runtime: zero-initialised, freed by hs_runtime_timers_free,
 *   and not thread-safe (the runtime serialises it as it serialises the policy's calls).
 * Units: seconds, samples. */
#ifndef HS_RT_RUNTIME_H
#define HS_RT_RUNTIME_H

#include <math.h>
#include <stdint.h>

#include "core/core_error.h"
#include "core/core_perfmodel.h"
#include "core/core_store.h"
#include "policies/pol_policy.h"

/* --- checks on a policy's calls ------------------------------------------------------------ */

/* The well-formed call is the one to make fast: the message is written off the hot path. */
#define HS_RUNTIME_LIKELY(c) __builtin_expect(!!(c), 1)

/* Worker w must exist: `what` names the call ("compute", "all-reduce", "set_lr", ...). */
static inline int hs_runtime_check_worker(hs_diag *d, const char *policy, const char *what, int w, int n) {
  if (HS_RUNTIME_LIKELY(w >= 0 && w < n)) return 0;
  return hs_diag_set(d, HS_ERUNTIME, "policy %s: %s on worker %d, which does not exist (%d workers)", policy, what,
                     w, n);
}

/* compute(w, batch) on a worker that exists: it must be in the cluster and idle, and the batch
 * at least one sample. */
static inline int hs_runtime_check_compute(hs_diag *d, const char *policy, int w, int active, int computing,
                                           int batch) {
  if (HS_RUNTIME_LIKELY(active && !computing && batch >= 1)) return 0;
  if (!active)
    return hs_diag_set(d, HS_ERUNTIME, "policy %s: compute on worker %d, which is not in the cluster", policy, w);
  if (computing)
    return hs_diag_set(d, HS_ERUNTIME, "policy %s: compute on worker %d while its step is running", policy, w);
  return hs_diag_set(d, HS_ERUNTIME, "policy %s: batch %d for worker %d", policy, batch, w);
}

/* An all-reduce needs at least one participant. */
static inline int hs_runtime_check_allreduce(hs_diag *d, const char *policy, int n) {
  if (HS_RUNTIME_LIKELY(n >= 1)) return 0;
  return hs_diag_set(d, HS_ERUNTIME, "policy %s: all-reduce over no worker", policy);
}

/* Participant i's all-reduce weight v (given, or its last batch) must be finite and not negative.
 * (The simulator, which only scales by the weights, asks only for finite ones, in its own words.) */
static inline int hs_runtime_check_weight(hs_diag *d, const char *policy, int i, double v) {
  if (isfinite(v) && v >= 0) return 0;
  return hs_diag_set(d, HS_ERUNTIME, "policy %s: all-reduce weight %d is %g", policy, i, v);
}

/* A timer's delay must be finite and not negative. */
static inline int hs_runtime_check_timer(hs_diag *d, const char *policy, double delay) {
  if (delay >= 0 && isfinite(delay)) return 0;
  return hs_diag_set(d, HS_ERUNTIME, "policy %s: timer with delay %g", policy, delay);
}

/* set_lr(w, lr): lr must not be negative (nor NaN), and w is -1 (every worker) or exists. */
static inline int hs_runtime_check_lr(hs_diag *d, const char *policy, int w, int n, double lr) {
  if (!(lr >= 0)) return hs_diag_set(d, HS_ERUNTIME, "policy %s: learning rate %g", policy, lr);
  return w == -1 ? 0 : hs_runtime_check_worker(d, policy, "set_lr", w, n);
}

/* A step or evaluation sink's return as the run's code: 0, an HS_E* code (negative) as it is,
 * and any other non-zero as HS_ERUNTIME, so that it ends the run as the sinks' contract says
 * (sim_run.h) rather than read as a policy's success (rc >= 0) on its way back. */
static inline int hs_runtime_sink_rc(int rc) { return rc > 0 ? HS_ERUNTIME : rc; }

/* A policy callback returned rc < 0: says so in d, unless the policy already said why
 * (hs_rt_fail). */
void hs_runtime_policy_failed(hs_diag *d, const char *policy, int rc);

/* --- step records -------------------------------------------------------------------------- */

/* Closes a worker's step record: the step ends when both its compute and its communication have
 * (comm_end_s is set to the later), and its wait is the rest of the time since the worker's
 * previous record ended (*prev_end, advanced to this end) once the compute time and the
 * communication time `comm` (s, what the worker spent communicating) are taken out; a negative
 * rest is no wait. */
static inline void hs_runtime_close_row(hs_step_row *row, double *prev_end, double comm) {
  double end = row->comm_end_s > row->compute_end_s ? row->comm_end_s : row->compute_end_s;
  double wait = (end - *prev_end) - (row->compute_end_s - row->start_s) - comm;
  *prev_end = end;
  row->comm_end_s = end;
  row->wait_s = wait > 0 ? wait : 0.0;
}

/* --- stop conditions ---------------------------------------------------------------------- */

/* Whether a global update leaves the run with all it was asked for: max_iterations updates,
 * samples_target samples trained (epochs times the data set), or max_time seconds of the runtime
 * clock at time t; a limit of 0 is none. */
static inline int hs_runtime_limit_reached(int64_t max_iterations, int64_t iterations, double samples_target,
                                           int64_t samples, double max_time, double t) {
  return (max_iterations > 0 && iterations >= max_iterations) ||
         (samples_target > 0 && (double)samples >= samples_target) || (max_time > 0 && t >= max_time);
}

/* Whether an evaluation (loss, accuracy) meets the targets given (a target <= 0 is none): 0
 * when no target is given. */
static inline int hs_runtime_target_met(double target_loss, double target_accuracy, double loss, double acc) {
  if (!(target_loss > 0) && !(target_accuracy > 0)) return 0;
  return (!(target_loss > 0) || loss <= target_loss) && (!(target_accuracy > 0) || acc >= target_accuracy);
}

/* --- the summary of a run ---------------------------------------------------------------- */

/* Fills the counts of a run that ended at `end` (s, runtime clock) and the rates derived from
 * them: mean_iteration_s = end / iterations and samples_per_s = samples / end (NaN where they
 * are undefined). wall_s, the final loss and accuracy and the time to target are set to NaN;
 * wait_fraction is left to the caller, whose runtime knows how its workers spent their time. */
void hs_runtime_summary(hs_summary *m, int workers, int64_t iterations, int64_t events, int64_t samples,
                        double end);

/* --- real mode ---------------------------------------------------------------------------- */

/* hs_runtime_ops.max_batch of a runtime that knows no memory limit: 0 for every worker. */
int hs_runtime_no_max_batch(hs_runtime *rt, int w);

/* A step of `batch` samples: the calibrated model when there is one (perf not NULL), else the
 * start-up probe's line t0 + k * batch (clamped at 0); times the worker's emulated slowdown
 * (a speed-up, below 1, is not emulated). */
double hs_runtime_predict(const hs_perf_model *perf, double t0, double k, double slowdown, int batch);

/* --- timers -------------------------------------------------------------------------------- */

typedef struct hs_runtime_timer {
  double at;              /* s, runtime clock */
  int cluster_event;      /* index into the cluster's events, or -1 for a policy timer */
  uint64_t tag;           /* the policy's */
  uint64_t seq;           /* insertion order: among equal times, the first added fires first */
} hs_runtime_timer;

/* A binary min-heap on (at, seq): timers fire in time order, equal times in insertion order. */
typedef struct hs_runtime_timers {
  hs_runtime_timer *heap;
  int n, cap;
  uint64_t next_seq;
} hs_runtime_timers;

/* 0, or HS_ENOMEM with the message in d. */
int hs_runtime_timers_add(hs_runtime_timers *q, double at, int cluster_event, uint64_t tag, hs_diag *d);
/* When the earliest timer is due (at <= now), removes it into *t and returns 1; otherwise
 * returns 0 with its time in *next (INFINITY when the queue is empty). */
int hs_runtime_timers_pop(hs_runtime_timers *q, double now, hs_runtime_timer *t, double *next);
void hs_runtime_timers_free(hs_runtime_timers *q);

#endif
