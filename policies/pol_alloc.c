/* alloc-static and alloc-adaptive: data allocation for ring all-reduce in a heterogeneous
 * cluster (Chao, Liao & Gao, "Task allocation for decentralized training in heterogeneous
 * environment", arXiv 2111.08272).
 *
 * Both are synchronous SGD over a ring all-reduce, gradients weighted b_i / B, in which each
 * worker's share of the global batch (its share of the data) follows its computing power:
 * - alloc-static: shares ∝ each worker's nominal speed, read once from the performance model
 *   when the worker first appears: s_i = b̄ / t_i(b̄) at the even share b̄ = B / n. Slowdowns
 *   during the run are not seen. On a join or leave the shares are recomputed from the
 *   nominal speeds of the workers now present (a replaced worker's newcomer brings its own).
 * - alloc-adaptive: starts the same, then measures: after every step the worker's speed
 *   b / duration updates an exponential moving average ŝ_i ← a·s + (1 − a)·ŝ_i. After each
 *   iteration the predicted times b_i / ŝ_i are compared; when (max − min) / max exceeds
 *   `threshold` the batches are re-solved ∝ ŝ_i. On a join the newcomer starts from its
 *   nominal speed and everything is re-solved; on a leave the rest are re-solved. */
#include <math.h>
#include <stdlib.h>

#include "policies/pol_balance.h"
#include "policies/pol_registry.h"

enum { P_ALPHA, P_THRESHOLD, P_ALGO };

static const hs_param_spec static_params[] = {
    {"algo", HS_PARAM_ENUM, "ring", 0, -1, "ring|hier", "all-reduce algorithm"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

static const hs_param_spec adaptive_params[] = {
    [P_ALPHA] = {"alpha", HS_PARAM_DOUBLE, "0.5", 1e-6, 1, NULL,
                 "weight of the newest measured speed in the moving average"},
    [P_THRESHOLD] = {"threshold", HS_PARAM_DOUBLE, "0.05", 0, 10, NULL,
                     "re-allocate when (max - min) / max of the predicted step times exceeds this"},
    [P_ALGO] = {"algo", HS_PARAM_ENUM, "ring", 0, -1, "ring|hier", "all-reduce algorithm"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

typedef struct alloc_worker {
  double nominal; /* samples/s from the performance model, 0 = not read yet */
  double ema;     /* samples/s measured, 0 = not measured yet */
} alloc_worker;

typedef struct alloc_state {
  hs_bal_sync s;
  int adaptive;
  double alpha, threshold;
  alloc_worker *w;
  int n_w;
  double *speed;
  int64_t n_realloc;
} alloc_state;

static int alloc_init_common(alloc_state *st, int adaptive, double alpha, double threshold,
                             double algo) {
  st->adaptive = adaptive;
  st->alpha = alpha;
  st->threshold = threshold;
  st->s.opts.what = HS_COMM_GRAD;
  st->s.opts.algo = (hs_ar_algo)algo;
  return 0;
}

static int alloc_static_init(void *state, hs_runtime *rt, const hs_params *p) {
  return alloc_init_common(state, 0, 0, 0, p->value[0]);
}

static int alloc_adaptive_init(void *state, hs_runtime *rt, const hs_params *p) {
  return alloc_init_common(state, 1, p->value[P_ALPHA], p->value[P_THRESHOLD], p->value[P_ALGO]);
}

/* Reads nominal speeds for workers seen for the first time, then solves ∝ speed. */
static int alloc_solve(alloc_state *st, hs_runtime *rt) {
  hs_pol_group *g = &st->s.g;
  int n = hs_rt_n_workers(rt);
  if (hs_bal_grow((void **)&st->w, &st->n_w, n > 0 ? n : 1, sizeof *st->w))
    return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  if (g->n == 0) return 0;
  double *sp = realloc(st->speed, (size_t)g->n * sizeof *sp);
  if (!sp) return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  st->speed = sp;
  int64_t B = hs_rt_global_batch(rt);
  int bbar = (int)(B / g->n > 0 ? B / g->n : 1);
  for (int i = 0; i < g->n; i++) {
    alloc_worker *x = &st->w[g->ws[i]];
    if (!(x->nominal > 0)) {
      int b = st->s.cap[i] > 0 && bbar > st->s.cap[i] ? st->s.cap[i] : bbar;
      double t = hs_rt_predict(rt, g->ws[i], b);
      if (!(t > 0) || !isfinite(t))
        return hs_rt_fail(rt, HS_EINVAL, "%s: worker %d: the performance model gives no step "
                          "time", st->adaptive ? "alloc-adaptive" : "alloc-static", g->ws[i]);
      x->nominal = b / t;
    }
    sp[i] = st->adaptive && x->ema > 0 ? x->ema : x->nominal;
  }
  hs_diag d = {0};
  int rc = hs_bal_proportional(g->n, B, sp, st->s.cap, g->batch, &d);
  return rc ? hs_rt_fail(rt, rc, "%s: %s", st->adaptive ? "alloc-adaptive" : "alloc-static", d.msg) : 0;
}

static int alloc_start(void *state, hs_runtime *rt) {
  alloc_state *st = state;
  int rc = hs_bal_sync_members(&st->s, rt);
  if (!rc) rc = alloc_solve(st, rt);
  return rc ? rc : hs_bal_sync_round(&st->s, rt);
}

static int alloc_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  alloc_state *st = state;
  if (st->adaptive && o->duration > 0 && o->worker < st->n_w) {
    alloc_worker *x = &st->w[o->worker];
    double s = o->batch / o->duration;
    x->ema = x->ema > 0 ? st->alpha * s + (1 - st->alpha) * x->ema : s;
  }
  int rc = hs_bal_sync_step(&st->s, rt, o);
  if (rc <= 0 || !st->adaptive || st->s.changed) return rc < 0 ? rc : 0;
  hs_pol_group *g = &st->s.g;
  double tmax = 0, tmin = INFINITY;
  for (int i = 0; i < g->n; i++) {
    double e = st->w[g->ws[i]].ema;
    if (!(e > 0)) return 0;
    double t = g->batch[i] / e;
    if (t > tmax) tmax = t;
    if (t < tmin) tmin = t;
  }
  if (g->n < 2 || !((tmax - tmin) / tmax > st->threshold)) return 0;
  st->n_realloc++;
  return alloc_solve(st, rt);
}

static int alloc_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  alloc_state *st = state;
  st->s.iter++;
  if (st->s.changed) {
    st->s.changed = 0;
    int rc = hs_bal_sync_members(&st->s, rt);
    if (!rc) rc = alloc_solve(st, rt);
    if (rc) return rc;
  }
  return hs_bal_sync_round(&st->s, rt);
}

static int alloc_on_cluster(void *state, hs_runtime *rt, const hs_cluster_obs *o) {
  alloc_state *st = state;
  if (o->kind != HS_CHANGE_SLOWDOWN) st->s.changed = 1;
  return 0;
}

static void alloc_fini(void *state, hs_runtime *rt) {
  alloc_state *st = state;
  free(st->w);
  free(st->speed);
  hs_bal_sync_free(&st->s);
}

const hs_policy hs_policy_alloc_static = {
    .version = HS_POLICY_VERSION,
    .name = "alloc-static",
    .description = "ring all-reduce with data shares proportional to each worker's nominal speed (performance model), fixed for the run",
    .source = "Chao, Liao, Gao: Task allocation for decentralized training in heterogeneous environment (arXiv 2111.08272), static allocation",
    .params = static_params,
    .state_size = sizeof(alloc_state),
    .init = alloc_static_init,
    .start = alloc_start,
    .on_compute = alloc_on_compute,
    .on_comm = alloc_on_comm,
    .on_cluster = alloc_on_cluster,
    .fini = alloc_fini,
};

const hs_policy hs_policy_alloc_adaptive = {
    .version = HS_POLICY_VERSION,
    .name = "alloc-adaptive",
    .description = "ring all-reduce with data shares re-allocated as measured speeds change (moving average, imbalance threshold) and on join/leave",
    .source = "Chao, Liao, Gao: Task allocation for decentralized training in heterogeneous environment (arXiv 2111.08272), self-adaptive allocation",
    .params = adaptive_params,
    .state_size = sizeof(alloc_state),
    .init = alloc_adaptive_init,
    .start = alloc_start,
    .on_compute = alloc_on_compute,
    .on_comm = alloc_on_comm,
    .on_cluster = alloc_on_cluster,
    .fini = alloc_fini,
};
