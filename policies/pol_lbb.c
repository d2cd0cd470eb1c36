/* lbb: Load Balanced Batching (Yao et al., J. Supercomputing 2024; code FLYING37520/LBB).
 *
 * Synchronous SGD in which every worker gets its own batch size. Before training, each worker
 * is profiled (the performance model at batches 1, 2, 4, ..., 256) and a line t_i(b) fitted;
 * the batches that minimise the slowest fitted time, summing to the global batch and within
 * each memory limit, are solved for (pol_balance.h). After every iteration the measured step
 * times decide: SE = (max - min) / mean; fine-tune (one sample from the slowest worker to the
 * fastest) when se_low <= SE < se_high; rapid-tune (refit each worker's line from its measured
 * durations and re-solve) when SE >= se_high, at most once every rapid_every iterations.
 * With smooth=N > 1 (ours) those decisions read each worker's median step time relative to
 * its iteration's mean over the last N iterations at unchanged batches, not one iteration's.
 * Gradients are all-reduced with weights b_i / B; the global batch stays constant. A worker
 * that joins is profiled and everything is re-solved; a worker that leaves is dropped and the
 * rest re-solved, both at the next iteration. */
#include <stdlib.h>

#include "policies/pol_balance.h"
#include "policies/pol_registry.h"

enum { P_STATIC, P_DYNAMIC, P_SE_LOW, P_SE_HIGH, P_RAPID_EVERY, P_WINDOW, P_SPREAD, P_SLOPE_ERR,
       P_SMOOTH, P_ALGO };

static const hs_param_spec lbb_params[] = {
    [P_STATIC] = {"static", HS_PARAM_BOOL, "1", 0, 1, NULL,
                  "solve the batches from profiled fits before training (0: start from an even split)"},
    [P_DYNAMIC] = {"dynamic", HS_PARAM_BOOL, "1", 0, 1, NULL, "fine-tune and rapid-tune during training"},
    [P_SE_LOW] = {"se_low", HS_PARAM_DOUBLE, "0.05", 0, 10, NULL, "SE at which fine-tuning starts"},
    [P_SE_HIGH] = {"se_high", HS_PARAM_DOUBLE, "0.3", 0, 10, NULL, "SE at which rapid-tuning starts"},
    [P_RAPID_EVERY] = {"rapid_every", HS_PARAM_INT, "30", 1, 1e9, NULL,
                       "least iterations between two rapid-tunes"},
    [P_WINDOW] = {"window", HS_PARAM_INT, "8", 1, 4096, NULL,
                  "measured (batch, time) pairs per worker kept for the refit"},
    [P_SPREAD] = {"min_spread", HS_PARAM_INT, "8", 1, 1e9, NULL,
                  "least batch range in the window for a least-squares refit (else rescale)"},
    [P_SLOPE_ERR] = {"max_slope_error", HS_PARAM_DOUBLE, "0.25", 0, 1e9, NULL,
                     "largest standard error of a least-squares refit's slope, as a fraction of "
                     "the slope (else rescale)"},
    [P_SMOOTH] = {"smooth", HS_PARAM_INT, "1", 1, 4096, NULL,
                  "iterations at unchanged batches whose per-worker median relative step times "
                  "decide (1: every iteration decides, LBB's rule)"},
    [P_ALGO] = {"algo", HS_PARAM_ENUM, "ring", 0, -1, "ring|hier", "all-reduce algorithm"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

typedef struct lbb_state {
  hs_bal_sync s;
  hs_lbb tuner;
  int static_solve;
} lbb_state;

static int lbb_init(void *state, hs_runtime *rt, const hs_params *p) {
  lbb_state *st = state;
  if (p->value[P_SE_LOW] > p->value[P_SE_HIGH])
    return hs_rt_fail(rt, HS_EINVAL, "lbb: se_low=%g is above se_high=%g", p->value[P_SE_LOW],
                      p->value[P_SE_HIGH]);
  st->static_solve = p->value[P_STATIC] != 0;
  st->tuner.p = (hs_lbb_params){
      .se_low = p->value[P_SE_LOW], .se_high = p->value[P_SE_HIGH],
      .rapid_every = (int)p->value[P_RAPID_EVERY], .window = (int)p->value[P_WINDOW],
      .min_spread = (int)p->value[P_SPREAD], .max_slope_error = p->value[P_SLOPE_ERR],
      .smooth = (int)p->value[P_SMOOTH], .dynamic = p->value[P_DYNAMIC] != 0};
  st->s.opts.what = HS_COMM_GRAD;
  st->s.opts.algo = (hs_ar_algo)p->value[P_ALGO];
  return 0;
}

/* New membership: solve from the fits, or (static=0, first time) split evenly. */
static int lbb_place(lbb_state *st, hs_runtime *rt, int first) {
  int rc = hs_bal_sync_members(&st->s, rt);
  if (rc || st->s.g.n == 0) return rc;
  if (first && !st->static_solve) {
    hs_pol_even_split(hs_rt_global_batch(rt), st->s.g.n, st->s.g.batch);
    for (int i = 0; i < st->s.g.n; i++)
      if (st->s.cap[i] > 0 && st->s.g.batch[i] > st->s.cap[i])
        return hs_rt_fail(rt, HS_EINVAL, "lbb: static=0: worker %d cannot hold its even share "
                          "%d (memory limit %d)", st->s.g.ws[i], st->s.g.batch[i], st->s.cap[i]);
    /* The profile still gives the lines that rapid-tunes rescale. */
    int *keep = st->s.g.batch;
    int *tmp = malloc((size_t)st->s.g.n * sizeof *tmp);
    if (!tmp) return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
    st->s.g.batch = tmp;
    rc = hs_lbb_solve(&st->tuner, rt, &st->s.g, st->s.cap);
    st->s.g.batch = keep;
    free(tmp);
    return rc;
  }
  return hs_lbb_solve(&st->tuner, rt, &st->s.g, st->s.cap);
}

static int lbb_start(void *state, hs_runtime *rt) {
  lbb_state *st = state;
  int rc = lbb_place(st, rt, 1);
  return rc ? rc : hs_bal_sync_round(&st->s, rt);
}

static int lbb_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  lbb_state *st = state;
  int rc = hs_lbb_observe(&st->tuner, rt, o->worker, o->batch, o->duration);
  if (rc) return rc;
  rc = hs_bal_sync_step(&st->s, rt, o);
  if (rc <= 0) return rc;
  /* The all-reduce is on its way; the next iteration's batches are decided now. */
  if (st->s.changed) return 0;
  return hs_lbb_tune(&st->tuner, rt, &st->s.g, st->s.cap, st->s.dur, st->s.iter + 1);
}

static int lbb_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  lbb_state *st = state;
  st->s.iter++;
  if (st->s.changed) {
    st->s.changed = 0;
    int rc = lbb_place(st, rt, 0);
    if (rc) return rc;
  }
  return hs_bal_sync_round(&st->s, rt);
}

static int lbb_on_cluster(void *state, hs_runtime *rt, const hs_cluster_obs *o) {
  lbb_state *st = state;
  if (o->kind != HS_CHANGE_SLOWDOWN) st->s.changed = 1;
  return 0;
}

static void lbb_fini(void *state, hs_runtime *rt) {
  lbb_state *st = state;
  hs_bal_sync_free(&st->s);
  hs_lbb_free(&st->tuner);
}

const hs_policy hs_policy_lbb = {
    .version = HS_POLICY_VERSION,
    .name = "lbb",
    .description = "load balanced batching: per-worker batches solved from fitted step times, fine- and rapid-tuned from measured times; synchronous all-reduce weighted b_i/B",
    .source = "Yao et al., LBB: load balanced batching for efficient distributed learning on heterogeneous GPU clusters (J. Supercomputing 2024); code FLYING37520/LBB",
    .params = lbb_params,
    .state_size = sizeof(lbb_state),
    .init = lbb_init,
    .start = lbb_start,
    .on_compute = lbb_on_compute,
    .on_comm = lbb_on_comm,
    .on_cluster = lbb_on_cluster,
    .fini = lbb_fini,
};
