/* predbatch: synchronous SGD with batches proportional to each worker's predicted speed.
 *
 * After every step the worker's time per sample (duration / batch) is fed to its own
 * predictor (pol_predict.h: last, ema, holt or gru). Every `every` iterations the batches are
 * re-solved in proportion to the predicted speeds 1 / (predicted time per sample), within the
 * memory limits and summing to the global batch (pol_balance.h). The first iteration splits
 * evenly (nothing is known yet); a worker that joins is given the mean predicted speed of the
 * others until it has been measured. Gradients are all-reduced with weights b_i / B. */
#include <math.h>
#include <stdlib.h>

#include "core/core_rng.h"
#include "policies/pol_balance.h"
#include "policies/pol_predict.h"
#include "policies/pol_registry.h"

enum { P_PRED, P_EVERY, P_ALPHA, P_BETA, P_HIDDEN, P_BPTT, P_LR, P_ALGO };

static const hs_param_spec predbatch_params[] = {
    [P_PRED] = {"predictor", HS_PARAM_ENUM, "ema", 0, -1, HS_PREDICTOR_CHOICES,
                "speed predictor: last value, exponential smoothing, Holt, or an online GRU"},
    [P_EVERY] = {"every", HS_PARAM_INT, "1", 1, 1e9, NULL, "iterations between re-solves"},
    [P_ALPHA] = {"alpha", HS_PARAM_DOUBLE, "0.5", 1e-6, 1, NULL, "ema/holt level smoothing"},
    [P_BETA] = {"beta", HS_PARAM_DOUBLE, "0.3", 0, 1, NULL, "holt trend smoothing"},
    [P_HIDDEN] = {"hidden", HS_PARAM_INT, "8", 1, 256, NULL, "gru hidden units"},
    [P_BPTT] = {"bptt", HS_PARAM_INT, "8", 1, 1024, NULL, "gru truncated BPTT length"},
    [P_LR] = {"lr", HS_PARAM_DOUBLE, "0.05", 1e-9, 10, NULL, "gru SGD learning rate"},
    [P_ALGO] = {"algo", HS_PARAM_ENUM, "ring", 0, -1, "ring|hier", "all-reduce algorithm"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

/* hidden^2 x bptt: at least 5e7 operations per worker step (5 to 40 ms measured, see
 * docs/policies.md). */
#define PREDBATCH_GRU_MAX_COST 4194304

typedef struct predbatch_state {
  hs_bal_sync s;
  const hs_predictor *pred;
  hs_pred_params pp;
  int every;
  void **pst;       /* predictor state by worker index, NULL until first seen */
  int n_pst;
  double *speed;    /* aligned with s.g.ws, scratch for the solve */
} predbatch_state;

static int predbatch_init(void *state, hs_runtime *rt, const hs_params *p) {
  predbatch_state *st = state;
  st->pred = hs_predictor_list()[(int)p->value[P_PRED]];
  st->every = (int)p->value[P_EVERY];
  st->pp = (hs_pred_params){.alpha = p->value[P_ALPHA], .beta = p->value[P_BETA],
                            .hidden = (int)p->value[P_HIDDEN], .bptt = (int)p->value[P_BPTT],
                            .lr = p->value[P_LR]};
  st->s.opts.what = HS_COMM_GRAD;
  st->s.opts.algo = (hs_ar_algo)p->value[P_ALGO];
  /* The gru's online training unrolls bptt steps of three hidden x hidden gates, forward and
   * back, at every step of every worker: about 12 hidden^2 bptt operations. Unbounded, the
   * parameters' ranges allow 8e8 per step (86 s for 200 iterations of 4 workers). */
  double cost = (double)st->pp.hidden * st->pp.hidden * st->pp.bptt;
  if (st->pred == &hs_predictor_gru && cost > PREDBATCH_GRU_MAX_COST)
    return hs_rt_fail(rt, HS_EINVAL, "predbatch: gru with hidden=%d and bptt=%d costs at least %.2g operations "
                      "at every step of every worker; hidden^2 x bptt may be at most %d (e.g. hidden=64,bptt=1024 "
                      "or hidden=256,bptt=64; docs/policies.md gives measured costs)", st->pp.hidden, st->pp.bptt,
                      12 * cost, PREDBATCH_GRU_MAX_COST);
  return 0;
}

static void *worker_pred(predbatch_state *st, hs_runtime *rt, int w, int *rc) {
  *rc = 0;
  if (hs_bal_grow((void **)&st->pst, &st->n_pst, w + 1, sizeof *st->pst)) {
    *rc = hs_rt_fail(rt, HS_ENOMEM, "out of memory");
    return NULL;
  }
  if (st->pst[w]) return st->pst[w];
  void *x = calloc(1, st->pred->state_size);
  if (!x) {
    *rc = hs_rt_fail(rt, HS_ENOMEM, "out of memory");
    return NULL;
  }
  st->pst[w] = x; /* freed by fini, even when init fails below */
  hs_pred_params pp = st->pp;
  pp.seed = hs_rng_mix(rt->ops->seed(rt), (uint64_t)w);
  int r = st->pred->init(x, &pp);
  if (r) {
    *rc = hs_rt_fail(rt, r, "predbatch: predictor %s could not start (%s)", st->pred->name,
                     hs_strerror(r));
    return NULL;
  }
  return x;
}

/* Batches ∝ predicted speed; workers without a prediction get the mean of the others', or
 * all the same speed when nobody has one. */
static int predbatch_solve(predbatch_state *st, hs_runtime *rt) {
  hs_pol_group *g = &st->s.g;
  if (g->n == 0) return 0;
  double *sp = realloc(st->speed, (size_t)g->n * sizeof *sp);
  if (!sp) return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  st->speed = sp;
  double sum = 0;
  int known = 0, rc;
  for (int i = 0; i < g->n; i++) {
    void *x = worker_pred(st, rt, g->ws[i], &rc);
    if (!x) return rc;
    double y = st->pred->predict(x);
    sp[i] = isfinite(y) && y > 0 ? 1.0 / y : NAN;
    if (!isnan(sp[i])) sum += sp[i], known++;
  }
  double fill = known ? sum / known : 1.0;
  for (int i = 0; i < g->n; i++)
    if (isnan(sp[i])) sp[i] = fill;
  hs_diag d = {0};
  rc = hs_bal_proportional(g->n, hs_rt_global_batch(rt), sp, st->s.cap, g->batch, &d);
  return rc ? hs_rt_fail(rt, rc, "predbatch: %s", d.msg) : 0;
}

static int predbatch_place(void *state, hs_runtime *rt) {
  predbatch_state *st = state;
  int rc = hs_bal_sync_members(&st->s, rt);
  return rc ? rc : predbatch_solve(st, rt);
}

static int predbatch_start(void *state, hs_runtime *rt) {
  predbatch_state *st = state;
  return hs_pol_sync_start(&st->s, rt, predbatch_place, st);
}

static int predbatch_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  predbatch_state *st = state;
  int rc;
  void *x = worker_pred(st, rt, o->worker, &rc);
  if (!x) return rc;
  if (o->batch > 0 && o->duration > 0) st->pred->observe(x, o->duration / o->batch);
  rc = hs_bal_sync_step(&st->s, rt, o);
  if (rc <= 0) return rc;
  if (st->s.changed || (st->s.iter + 1) % (uint64_t)st->every != 0) return 0;
  return predbatch_solve(st, rt);
}

static int predbatch_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  predbatch_state *st = state;
  return hs_pol_sync_on_comm(&st->s, rt, predbatch_place, st);
}

static int predbatch_on_cluster(void *state, hs_runtime *rt, const hs_cluster_obs *o) {
  predbatch_state *st = state;
  hs_pol_sync_on_cluster(&st->s, o);
  return 0;
}

static void predbatch_fini(void *state, hs_runtime *rt) {
  predbatch_state *st = state;
  for (int w = 0; w < st->n_pst; w++)
    if (st->pst[w]) {
      st->pred->fini(st->pst[w]);
      free(st->pst[w]);
    }
  free(st->pst);
  free(st->speed);
  hs_bal_sync_free(&st->s);
}

const hs_policy hs_policy_predbatch = {
    .version = HS_POLICY_VERSION,
    .name = "predbatch",
    .description = "synchronous SGD with batches proportional to each worker's predicted speed (last, ema, holt or gru predictor)",
    .source = "speed-predicted batch allocation for heterogeneous clusters; exponential smoothing, Holt's linear trend, GRU (Cho et al. 2014) trained online",
    .params = predbatch_params,
    .state_size = sizeof(predbatch_state),
    .init = predbatch_init,
    .start = predbatch_start,
    .on_compute = predbatch_on_compute,
    .on_comm = predbatch_on_comm,
    .on_cluster = predbatch_on_cluster,
    .fini = predbatch_fini,
};
