/* lbcal: LBB's batches with local SGD, an adaptive communication interval, communication
 * overlapped with the next local steps, and compensation for the stale average.
 *
 * A round: every active worker takes tau local steps (compute on its LBB batch, local update);
 * when all have, the models are all-reduced (MODEL, weights b_i / B). One average is one
 * iteration. The parts, each switchable for ablations:
 * - batches: LBB's static solve and its fine/rapid tuning (pol_balance.h), decided once per
 *   round from each worker's mean step time in that round;
 * - adaptive=1: AdaComm's interval with its learning-rate form,
 *   tau = ceil(sqrt(eta_0 F_l / (eta_l F_0)) · tau_0), F_l the mean training loss of round l's
 *   steps and F_0 that of the first round with a loss. This policy does not change the
 *   learning rate, so eta_l = eta_0. tau is kept in [1, tau_0]. When the runtime reports no
 *   loss (NaN: no convergence model), tau stays tau_0;
 * - overlap=1: the average of round r is started and the workers go straight on with round
 *   r+1's local steps; round r+1's average waits only if round r's is still in flight. The
 *   workers meet at the end of each round (the next all-reduce needs all their models), so
 *   no worker is ever more than one round ahead;
 * - compensate=1 (with overlap): when round r's average x̄_r arrives during round r+1, each
 *   worker sets x_i ← x̄_r + (x_i − x_i^snap), keeping the local progress made since its
 *   snapshot (overlap local SGD / CoCoD-SGD), so no step is lost: the all-reduce is issued
 *   with hs_comm_opts.keep_local, and the runtime does the arithmetic. compensate=0 replaces the
 *   model by the stale average, x_i ← x̄_r: the steps taken since the snapshot are lost and
 *   the round's count of local steps starts again from the arrival.
 * Membership changes take effect at the next round. */
#include <math.h>
#include <stdlib.h>

#include "policies/pol_balance.h"
#include "policies/pol_registry.h"

enum { P_TAU, P_ADAPTIVE, P_OVERLAP, P_COMPENSATE, P_LBB, P_SE_LOW, P_SE_HIGH, P_RAPID, P_ALGO };

static const hs_param_spec lbcal_params[] = {
    [P_TAU] = {"tau", HS_PARAM_INT, "4", 1, 1e6, NULL, "local steps per round (tau_0)"},
    [P_ADAPTIVE] = {"adaptive", HS_PARAM_BOOL, "1", 0, 1, NULL,
                    "adapt tau by AdaComm's rule from the training loss"},
    [P_OVERLAP] = {"overlap", HS_PARAM_BOOL, "1", 0, 1, NULL,
                   "run the model average while the next local steps run"},
    [P_COMPENSATE] = {"compensate", HS_PARAM_BOOL, "1", 0, 1, NULL,
                      "keep local progress when the stale average arrives (overlap only)"},
    [P_LBB] = {"dynamic", HS_PARAM_BOOL, "1", 0, 1, NULL, "LBB's fine/rapid tuning of the batches"},
    [P_SE_LOW] = {"se_low", HS_PARAM_DOUBLE, "0.05", 0, 10, NULL, "SE at which fine-tuning starts"},
    [P_SE_HIGH] = {"se_high", HS_PARAM_DOUBLE, "0.3", 0, 10, NULL, "SE at which rapid-tuning starts"},
    [P_RAPID] = {"rapid_every", HS_PARAM_INT, "30", 1, 1e9, NULL, "least rounds between rapid-tunes"},
    [P_ALGO] = {"algo", HS_PARAM_ENUM, "ring", 0, -1, "ring|hier", "all-reduce algorithm"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

typedef struct lbcal_slot {
  int steps;       /* local steps counted toward this round */
  int busy;        /* a step is running */
  double dur;      /* s, compute time of the counted steps */
} lbcal_slot;

typedef struct lbcal_state {
  hs_bal_sync s;        /* membership, batches, caps, weights */
  hs_lbb tuner;
  int tau0, tau, adaptive, overlap, compensate;
  lbcal_slot *slot;     /* aligned with s.g.ws */
  int ready;
  int inflight;         /* an average is on its way */
  int waiting;          /* the round is done but the previous average has not arrived */
  uint64_t rounds;
  double loss_sum, f0;  /* this round's loss, the first round's mean loss (NaN: none yet) */
  int64_t loss_n;
  double *mean;         /* s, per-slot mean step time of the round, for the tuner */
} lbcal_state;

static int lbcal_init(void *state, hs_runtime *rt, const hs_params *p) {
  lbcal_state *st = state;
  if (p->value[P_SE_LOW] > p->value[P_SE_HIGH])
    return hs_rt_fail(rt, HS_EINVAL, "lbcal: se_low=%g is above se_high=%g", p->value[P_SE_LOW],
                      p->value[P_SE_HIGH]);
  st->tau0 = st->tau = (int)p->value[P_TAU];
  st->adaptive = p->value[P_ADAPTIVE] != 0;
  st->overlap = p->value[P_OVERLAP] != 0;
  st->compensate = p->value[P_COMPENSATE] != 0;
  st->f0 = NAN;
  st->tuner.p = (hs_lbb_params){.se_low = p->value[P_SE_LOW], .se_high = p->value[P_SE_HIGH],
                                .rapid_every = (int)p->value[P_RAPID], .window = 8,
                                .min_spread = 8, .max_slope_error = 0.25, .smooth = 1,
                                .dynamic = p->value[P_LBB] != 0};
  st->s.opts.what = HS_COMM_MODEL;
  st->s.opts.algo = (hs_ar_algo)p->value[P_ALGO];
  /* The compensation is model arithmetic, so the runtime does it: x_i <- avg + (x_i - x_i^snap),
   * the snapshot being the model the worker sent. */
  st->s.opts.keep_local = st->overlap && st->compensate;
  return 0;
}

static int lbcal_members(lbcal_state *st, hs_runtime *rt) {
  int rc = hs_bal_sync_members(&st->s, rt);
  if (rc) return rc;
  int n = st->s.g.n > 0 ? st->s.g.n : 1;
  lbcal_slot *sl = realloc(st->slot, (size_t)n * sizeof *sl);
  if (sl) st->slot = sl;
  double *m = realloc(st->mean, (size_t)n * sizeof *m);
  if (m) st->mean = m;
  if (!sl || !m) return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  for (int i = 0; i < st->s.g.n; i++) st->slot[i] = (lbcal_slot){0};
  return hs_lbb_solve(&st->tuner, rt, &st->s.g, st->s.cap);
}

static int start_step(lbcal_state *st, hs_runtime *rt, int i) {
  st->slot[i].busy = 1;
  return hs_rt_compute(rt, st->s.g.ws[i], st->s.g.batch[i], st->rounds);
}

static int begin_round(lbcal_state *st, hs_runtime *rt) {
  st->ready = 0;
  st->loss_sum = 0;
  st->loss_n = 0;
  for (int i = 0; i < st->s.g.n; i++) {
    st->slot[i].steps = 0;
    st->slot[i].dur = 0;
    int rc = start_step(st, rt, i);
    if (rc) return rc;
  }
  return 0;
}

static int issue_average(lbcal_state *st, hs_runtime *rt) {
  int64_t B = hs_rt_global_batch(rt);
  for (int i = 0; i < st->s.g.n; i++) st->s.weight[i] = (double)st->s.g.batch[i] / (double)B;
  st->inflight = 1;
  return hs_rt_allreduce(rt, st->s.g.ws, st->s.g.n, st->s.weight, &st->s.opts);
}

/* AdaComm: tau = ceil(sqrt(F_l / F_0) · tau_0) in [1, tau_0] (eta constant). */
static void adapt_tau(lbcal_state *st) {
  if (!st->adaptive || st->loss_n == 0) return;
  double f = st->loss_sum / (double)st->loss_n;
  if (!isfinite(f)) return;
  if (isnan(st->f0)) {
    st->f0 = f;
    return;
  }
  if (!(st->f0 > 0)) return;
  double t = ceil(sqrt(f > 0 ? f / st->f0 : 0) * st->tau0);
  st->tau = t < 1 ? 1 : t > st->tau0 ? st->tau0 : (int)t;
}

/* Every worker finished its round: average, decide the next round, and go on. */
static int round_done(lbcal_state *st, hs_runtime *rt) {
  if (st->overlap && st->inflight) {
    st->waiting = 1;
    return 0;
  }
  st->waiting = 0;
  int rc = issue_average(st, rt);
  if (rc) return rc;
  st->rounds++;
  adapt_tau(st);
  for (int i = 0; i < st->s.g.n; i++)
    st->mean[i] = st->slot[i].steps > 0 ? st->slot[i].dur / st->slot[i].steps : NAN;
  if (!st->s.changed && (rc = hs_lbb_tune(&st->tuner, rt, &st->s.g, st->s.cap, st->mean, st->rounds)))
    return rc;
  if (!st->overlap) return 0; /* the next round starts when the average arrives */
  if (st->s.changed) {
    st->s.changed = 0;
    if ((rc = lbcal_members(st, rt))) return rc;
  }
  return begin_round(st, rt);
}

static int lbcal_start(void *state, hs_runtime *rt) {
  lbcal_state *st = state;
  int rc = lbcal_members(st, rt);
  return rc ? rc : begin_round(st, rt);
}

static int lbcal_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  lbcal_state *st = state;
  int w = o->worker, i = w < st->s.g.cap ? st->s.g.slot[w] : -1;
  int rc = hs_lbb_observe(&st->tuner, rt, w, o->batch, o->duration);
  if (!rc) rc = hs_rt_local_update(rt, w);
  if (rc || i < 0) return rc;
  lbcal_slot *x = &st->slot[i];
  x->busy = 0;
  x->steps++;
  x->dur += o->duration;
  if (isfinite(o->loss)) st->loss_sum += o->loss, st->loss_n++;
  /* A worker that left during the round contributes the steps it took. */
  if (x->steps < st->tau && hs_rt_active(rt, w)) return start_step(st, rt, i);
  if (++st->ready < st->s.g.n) return 0;
  return round_done(st, rt);
}

static int lbcal_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  lbcal_state *st = state;
  st->inflight = 0;
  int rc;
  if (!st->overlap) {
    st->s.iter++;
    if (st->s.changed) {
      st->s.changed = 0;
      if ((rc = lbcal_members(st, rt))) return rc;
    }
    return begin_round(st, rt);
  }
  st->s.iter++;
  if (!st->compensate) {
    /* x_i <- stale average: the steps taken since the snapshot are lost. Idle workers (done
     * with their round, waiting) start again. */
    st->ready = 0;
    st->waiting = 0;
    for (int i = 0; i < st->s.g.n; i++) {
      st->slot[i].steps = 0;
      st->slot[i].dur = 0;
      if (!st->slot[i].busy && hs_rt_active(rt, st->s.g.ws[i]) && (rc = start_step(st, rt, i)))
        return rc;
      if (!st->slot[i].busy) st->ready++; /* left the cluster: nothing more to wait for */
    }
    if (st->s.g.n > 0 && st->ready == st->s.g.n) return round_done(st, rt);
    return 0;
  }
  return st->waiting ? round_done(st, rt) : 0;
}

static int lbcal_on_cluster(void *state, hs_runtime *rt, const hs_cluster_obs *o) {
  lbcal_state *st = state;
  if (o->kind != HS_CHANGE_SLOWDOWN) st->s.changed = 1;
  return 0;
}

static void lbcal_fini(void *state, hs_runtime *rt) {
  lbcal_state *st = state;
  free(st->slot);
  free(st->mean);
  hs_bal_sync_free(&st->s);
  hs_lbb_free(&st->tuner);
}

const hs_policy hs_policy_lbcal = {
    .version = HS_POLICY_VERSION,
    .name = "lbcal",
    .description = "LBB batches with local SGD: adaptive interval (AdaComm), model averaging overlapped with the next local steps, stale-average compensation",
    .source = "LBB/LBCAL (Yao et al.; code FLYING37520/LBB); AdaComm (Wang & Joshi 2019); overlap local SGD / CoCoD-SGD (code JYWa/Overlap_Local_SGD)",
    .params = lbcal_params,
    .state_size = sizeof(lbcal_state),
    .init = lbcal_init,
    .start = lbcal_start,
    .on_compute = lbcal_on_compute,
    .on_comm = lbcal_on_comm,
    .on_cluster = lbcal_on_cluster,
    .fini = lbcal_fini,
};
