/* pol_balance: what the load-balancing policies (lbb, lbcal, predbatch, dbs, alloc-*) share.
 *
 * 1. The static solve of LBB: integer batches b_i, one per worker, summing to a total B, each
 *    within [1, cap_i], that minimise the largest predicted step time max_i t_i(b_i). For
 *    non-decreasing t_i a bisection on the common time T is exact: take the largest b_i with
 *    t_i(b_i) <= T for the largest T whose batches still sum to less than B, then hand the
 *    remaining samples one at a time to the worker whose next sample costs least. The result
 *    is balanced "within one sample": no single sample moved between two workers lowers the
 *    slowest time. Proportional allocation (batch ∝ speed s_i) is the special case
 *    t_i(b) = b / s_i.
 * 2. Least-squares lines t(b) = t0 + k b fitted from (batch, time) pairs.
 * 3. The synchronous loop (hs_bal_sync): every active worker computes its own batch, then the
 *    gradients are all-reduced with weights b_i / B; policies choose the batches between
 *    iterations. hs_pol_sync_* are the callbacks of the policies that only place batches.
 * 4. LBB's tuner (hs_lbb): profile, static solve, fine-tune and rapid-tune, shared by lbb and
 *    lbcal.
 *
 * Contract: no globals, no I/O; whatever an _init or a solve allocates, the matching _free
 * releases. Errors come back as negative HS_E* codes with a message (through hs_rt_fail for
 * the parts that hold a runtime, through an hs_diag otherwise). Units: seconds, samples. */
#ifndef HS_POL_BALANCE_H
#define HS_POL_BALANCE_H

#include <stdint.h>

#include "policies/pol_policy.h"

/* --- 1. the solver ---------------------------------------------------------------------- */

/* Predicted step time of worker i (0 <= i < n) at batch b >= 1; must not decrease with b. */
typedef double hs_bal_time_fn(const void *ctx, int i, int b);

typedef struct hs_bal_problem {
  int n;                 /* workers */
  int64_t total;         /* samples to place: the global batch */
  const int *cap;        /* per-worker memory limit, 0 = none; NULL = none for all */
  hs_bal_time_fn *time;
  const void *ctx;
} hs_bal_problem;

/* Fills b[0..n) as described above. HS_EINVAL when total < n (each worker needs a sample) or
 * the caps together hold fewer than total samples. O(n log(total) · 100 + n · r) time, where
 * r <= n is the remainder placed one sample at a time; no allocation. */
int hs_bal_solve(const hs_bal_problem *p, int *b, hs_diag *d);

/* Batches proportional to speed[i] (samples/s, > 0), within the caps, summing to total. */
int hs_bal_proportional(int n, int64_t total, const double *speed, const int *cap, int *b,
                        hs_diag *d);

/* --- 2. lines --------------------------------------------------------------------------- */

typedef struct hs_bal_line {
  double t0; /* s */
  double k;  /* s per sample, > 0 */
} hs_bal_line;

/* An hs_bal_time_fn over an array of lines (ctx = const hs_bal_line *). */
double hs_bal_line_time(const void *ctx, int i, int b);

/* Least-squares line through (b[j], t[j]), j < n. HS_EINVAL when fewer than two distinct
 * batches are given. A slope below 1e-12 s (noise on a flat curve) is raised to 1e-12 so
 * that the time stays increasing. */
int hs_bal_fit_line(const int *b, const double *t, int n, hs_bal_line *out);
/* The standard error of fit's slope (from the residuals of the n points, n - 2 degrees of
 * freedom) over the slope: how well n noisy points determine it. INFINITY when n < 3 (no
 * residual to judge by) or when the points have one batch only. */
double hs_bal_slope_rel_error(const int *b, const double *t, int n, const hs_bal_line *fit);

/* --- 3. the synchronous loop ------------------------------------------------------------ */

typedef struct hs_bal_sync {
  hs_pol_group g;     /* active workers (g.ws) and their batches (g.batch), aligned */
  hs_comm_opts opts;  /* GRAD all-reduce; algo chosen by the policy */
  double *weight;     /* b_i / B, aligned with g.ws */
  double *dur;        /* s, this iteration's measured step of g.ws[i] */
  int *cap;           /* memory limits, aligned with g.ws (0 = none) */
  int done;           /* steps finished this iteration */
  int changed;        /* membership changed: rebuild before the next iteration */
  uint64_t iter;      /* iterations completed */
} hs_bal_sync;

/* Rebuilds the membership from the runtime: g.ws, g.slot, cap; batches are zeroed for the
 * policy to fill. An empty cluster gives n = 0. */
int hs_bal_sync_members(hs_bal_sync *s, hs_runtime *rt);
/* Starts an iteration: checks that the batches are >= 1, within the caps and sum to the
 * global batch (the global batch stays constant), then issues one compute per worker. */
int hs_bal_sync_round(hs_bal_sync *s, hs_runtime *rt);
/* Records a finished step. When it was the last of the iteration, issues the weighted
 * all-reduce and returns 1; otherwise returns 0; negative on failure. */
int hs_bal_sync_step(hs_bal_sync *s, hs_runtime *rt, const hs_step_obs *o);
void hs_bal_sync_free(hs_bal_sync *s);

/* The callbacks of the policies that drive an hs_bal_sync and differ only in how they place
 * the batches (dbs, predbatch). The policy supplies one place function that rebuilds the
 * membership (hs_bal_sync_members) and fills the batches; state is the policy's state. It
 * returns 0 or a negative HS_E* code (with the message set on rt). */
typedef int hs_pol_place_fn(void *state, hs_runtime *rt);

/* The start callback's work: places, then starts the first round. */
int hs_pol_sync_start(hs_bal_sync *s, hs_runtime *rt, hs_pol_place_fn *place, void *state);
/* The on_comm callback's work: counts the finished iteration, places again when the membership
 * changed since the last round, then starts the next round. */
int hs_pol_sync_on_comm(hs_bal_sync *s, hs_runtime *rt, hs_pol_place_fn *place, void *state);
/* The on_cluster callback's work: a join or a leave (not a slowdown) marks the membership as
 * changed, to be rebuilt at the end of the current iteration. */
void hs_pol_sync_on_cluster(hs_bal_sync *s, const hs_cluster_obs *o);

/* Grows a zero-filled array of elem-sized records (indexed by worker) to at least need. */
int hs_bal_grow(void **arr, int *cap, int need, size_t elem);

/* --- 4. LBB's tuner --------------------------------------------------------------------- */

typedef struct hs_lbb_params {
  double se_low, se_high;  /* fine-tune when se_low <= SE < se_high; rapid-tune above */
  int rapid_every;         /* iterations between rapid-tunes (the static solve counts) */
  int window;              /* (batch, time) pairs kept per worker for the refit */
  int min_spread;          /* samples: least-squares refit only when the window's batches
                              span at least this much; otherwise the line is rescaled */
  double max_slope_error;  /* ... and when its slope's standard error is at most this
                              fraction of the slope (hs_bal_slope_rel_error) */
  int smooth;              /* 1: each iteration decides (LBB's rule); N > 1: decisions from
                              the per-worker medians of N iterations at unchanged batches,
                              and rescales through the window's median ratio */
  int dynamic;             /* 0: static solve only */
} hs_lbb_params;

typedef struct hs_lbb_worker {
  hs_bal_line line;        /* current fit */
  int have_line;
  int n, head;             /* pairs in the ring below */
  int *b;                  /* window: batches */
  double *t;               /* window: times, s */
  double *rel;             /* smooth > 1: step time / the iteration's mean, since the last change */
} hs_lbb_worker;

typedef enum hs_lbb_action {
  HS_LBB_NONE = 0,
  HS_LBB_FINE = 1,         /* one sample moved from the slowest worker to the fastest */
  HS_LBB_RAPID = 2         /* lines refitted and batches re-solved */
} hs_lbb_action;

typedef struct hs_lbb {
  hs_lbb_params p;
  hs_lbb_worker *w;        /* by worker index */
  int cap_w;
  uint64_t last_solve;     /* iteration of the last static solve or rapid-tune */
  int n_rel, rel_head;     /* smooth > 1: iterations in every rel[] since the last change */
  double *scratch;         /* smooth (or window) doubles for a median */
  double last_se;          /* SE of the last tuning decision */
  hs_lbb_action last_action;
  int64_t n_fine, n_rapid; /* decisions taken, for tests and reports */
} hs_lbb;

/* Profiles every worker of g that has no line yet with the performance model
 * (hs_rt_predict at batches 2, 4, ..., 256, capped by memory and the global batch: LBB's
 * warm-up sweep, done before training), fits lines, and solves the batches into g->batch. */
int hs_lbb_solve(hs_lbb *l, hs_runtime *rt, hs_pol_group *g, const int *cap);
/* Adds a measured (batch, duration) pair of worker w to its window. */
int hs_lbb_observe(hs_lbb *l, hs_runtime *rt, int w, int batch, double duration);
/* One tuning decision after an iteration whose per-slot step times are dur (s); may change
 * g->batch. iter is the number of iterations completed. */
int hs_lbb_tune(hs_lbb *l, hs_runtime *rt, hs_pol_group *g, const int *cap, const double *dur,
                uint64_t iter);
void hs_lbb_free(hs_lbb *l);

#endif
