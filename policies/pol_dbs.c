/* dbs: Dynamic Batch Size (Ye et al., "DBS: Dynamic Batch Size for Distributed Deep Neural
 * Network Training"; code Soptq/Dynamic_Load_Balance_DistributedDNN, dbs.py get_size).
 *
 * Synchronous SGD. Training is cut into periods of `every` iterations (DBS uses epochs; a
 * policy does not see the data set's size, so the period is given in iterations). Over a
 * period each worker's pure compute time T_i is summed (communication excluded, as DBS's
 * train() returns train_time minus the sync time). At the end of the period the partition is
 * re-split: p_i' = k · p_i / T_i with k making the shares sum to 1, where p_i = b_i / B is the
 * share the worker had; batches are p_i' · B rounded to integers summing to B within the
 * memory limits (pol_balance.h; DBS's own rounding may lose a sample, ours keeps the global
 * batch). The first period splits evenly, as DBS assumes equal workers at the start. On a
 * join or leave the period restarts; a newcomer gets the mean share of the others. */
#include <math.h>
#include <stdlib.h>

#include "policies/pol_balance.h"
#include "policies/pol_registry.h"

enum { P_EVERY, P_ALGO };

static const hs_param_spec dbs_params[] = {
    [P_EVERY] = {"every", HS_PARAM_INT, "50", 1, 1e9, NULL,
                 "iterations per period (DBS re-splits once per epoch)"},
    [P_ALGO] = {"algo", HS_PARAM_ENUM, "ring", 0, -1, "ring|hier", "all-reduce algorithm"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

typedef struct dbs_worker {
  double busy;   /* s of compute this period */
  int64_t samples;
  double rate;   /* samples/s measured over the last full period, 0 = none */
} dbs_worker;

typedef struct dbs_state {
  hs_bal_sync s;
  int every;
  int in_period;    /* iterations of the current period done */
  dbs_worker *w;    /* by worker index */
  int n_w;
  double *speed;
  int64_t n_resplit;
} dbs_state;

static int dbs_init(void *state, hs_runtime *rt, const hs_params *p) {
  dbs_state *st = state;
  st->every = (int)p->value[P_EVERY];
  st->s.opts.what = HS_COMM_GRAD;
  st->s.opts.algo = (hs_ar_algo)p->value[P_ALGO];
  return 0;
}

static int dbs_reserve(dbs_state *st, hs_runtime *rt) {
  int n = hs_rt_n_workers(rt);
  if (hs_bal_grow((void **)&st->w, &st->n_w, n > 0 ? n : 1, sizeof *st->w))
    return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  return 0;
}

/* Batches ∝ measured throughput. p_i / T_i = (b_i / B) / T_i ∝ samples_i / T_i over a
 * period of fixed batches, so the rule is the measured rate; the rate of a worker that was
 * not measured is the mean of the others' (1 for all when nobody was). */
static int dbs_split(dbs_state *st, hs_runtime *rt) {
  hs_pol_group *g = &st->s.g;
  if (g->n == 0) return 0;
  double *sp = realloc(st->speed, (size_t)g->n * sizeof *sp);
  if (!sp) return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  st->speed = sp;
  double sum = 0;
  int known = 0;
  for (int i = 0; i < g->n; i++) {
    sp[i] = st->w[g->ws[i]].rate;
    if (sp[i] > 0) sum += sp[i], known++;
  }
  for (int i = 0; i < g->n; i++)
    if (!(sp[i] > 0)) sp[i] = known ? sum / known : 1.0;
  hs_diag d = {0};
  int rc = hs_bal_proportional(g->n, hs_rt_global_batch(rt), sp, st->s.cap, g->batch, &d);
  return rc ? hs_rt_fail(rt, rc, "dbs: %s", d.msg) : 0;
}

static void dbs_new_period(dbs_state *st) {
  st->in_period = 0;
  for (int w = 0; w < st->n_w; w++) st->w[w].busy = 0, st->w[w].samples = 0;
}

static int dbs_place(void *state, hs_runtime *rt) {
  dbs_state *st = state;
  int rc = dbs_reserve(st, rt);
  if (!rc) rc = hs_bal_sync_members(&st->s, rt);
  return rc ? rc : dbs_split(st, rt);
}

/* After a join or a leave the period restarts. */
static int dbs_replace(void *state, hs_runtime *rt) {
  int rc = dbs_place(state, rt);
  if (!rc) dbs_new_period(state);
  return rc;
}

static int dbs_start(void *state, hs_runtime *rt) {
  dbs_state *st = state;
  return hs_pol_sync_start(&st->s, rt, dbs_place, st);
}

static int dbs_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  dbs_state *st = state;
  int rc = dbs_reserve(st, rt);
  if (rc) return rc;
  st->w[o->worker].busy += o->duration;
  st->w[o->worker].samples += o->batch;
  rc = hs_bal_sync_step(&st->s, rt, o);
  if (rc <= 0 || st->s.changed) return rc < 0 ? rc : 0;
  if (++st->in_period < st->every) return 0;
  for (int i = 0; i < st->s.g.n; i++) {
    dbs_worker *x = &st->w[st->s.g.ws[i]];
    if (x->busy > 0) x->rate = (double)x->samples / x->busy;
  }
  dbs_new_period(st);
  st->n_resplit++;
  return dbs_split(st, rt);
}

static int dbs_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  dbs_state *st = state;
  return hs_pol_sync_on_comm(&st->s, rt, dbs_replace, st);
}

static int dbs_on_cluster(void *state, hs_runtime *rt, const hs_cluster_obs *o) {
  dbs_state *st = state;
  hs_pol_sync_on_cluster(&st->s, o);
  return 0;
}

static void dbs_fini(void *state, hs_runtime *rt) {
  dbs_state *st = state;
  free(st->w);
  free(st->speed);
  hs_bal_sync_free(&st->s);
}

const hs_policy hs_policy_dbs = {
    .version = HS_POLICY_VERSION,
    .name = "dbs",
    .description = "dynamic batch size: every period, batches re-split in proportion to each worker's measured throughput",
    .source = "Ye et al., DBS: Dynamic Batch Size for Distributed Deep Neural Network Training; code Soptq/Dynamic_Load_Balance_DistributedDNN",
    .params = dbs_params,
    .state_size = sizeof(dbs_state),
    .init = dbs_init,
    .start = dbs_start,
    .on_compute = dbs_on_compute,
    .on_comm = dbs_on_comm,
    .on_cluster = dbs_on_cluster,
    .fini = dbs_fini,
};
