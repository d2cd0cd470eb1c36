/* ashl: ASHL, the adaptive multi-stage scheme of Shen et al. (IEEE Transactions on Computers
 * 73(1), 2024; code xiangunremarkable/ASHL), on a parameter server. Three stages:
 *
 * 1. Profiling. Each worker runs `profile` rounds of one step, an uncompressed push (applied on
 *    arrival) and a pull, then one more round whose push is top-k compressed at `density`. Its
 *    step time c_i, upload up_i, download down_i (means, as observed from request to
 *    completion, so they include the server's queueing) and compressed upload upc_i are kept.
 *    When every worker has profiled, the plan is made:
 *    - AHL: comm_i = up_i + down_i, H_i = round((max_j(K c_j + comm_j) - comm_i) / c_i) with
 *      K = `k_ahl` (8), shares p_i = H_i / sum H;
 *    - SHL: comm_i = upc_i + down_i, H_i from the same rule with K = `k_shl` (2), round time
 *      T = max_j (c_j H_j + comm_j), and per worker the top-k density that makes its push fit
 *      in the slack T - c_i H_i - down_i (hs_ashl_density: 1 = uncompressed when it fits).
 * 2. AHL (asynchronous, local steps): a round of worker i is H_i local steps (compute, local
 *    update), a push of the accumulated update (a MODEL push: the model change since the last
 *    pull; one global update, applied on arrival) and a pull. No worker waits for another.
 * 3. SHL (semi-asynchronous): rounds as in AHL with the SHL plan's H_i and compressed pushes;
 *    a worker whose clock (SHL rounds pushed) is more than `staleness` (3) ahead of the slowest
 *    active worker blocks after its push until the slowest catches up, then pulls.
 * The switch from AHL to SHL happens when the mean of the active workers' latest training
 * losses drops below `switch_loss`, or at time `switch_at`, or once `switch_iter` global
 * updates are made (whichever comes first; 0 turns a condition off). With no loss reported
 * (NaN, no convergence model) only the time and iteration conditions apply, so ASHL stays in
 * AHL unless one is given. A worker enters SHL at the end of its current round.
 *
 * Data shares: every worker's step uses the same batch (the global batch split evenly), so
 * worker i processes H_i b samples per round and p_i = H_i / sum H is both its share of the
 * samples of a round and, as in ASHL, its data shard's share of the data set. ASHL weights
 * each update by p_i at the server: every push carries weight p_i (hs_comm_opts.weight), so
 * the server adds p_i times the worker's model change and one round of all workers' pushes
 * moves the global model by the p-weighted average of their changes. Workers that join later run K local steps uncompressed (no profile).
 *
 * Cost: O(log N) per event. The sums over the active workers that a push or a step needs
 * (the shares' denominators, the mean loss of the switch, whether every worker has profiled)
 * are kept as counters, refreshed in O(N) only when the membership or the plan changes; SHL's
 * clocks are in heaps (pol_clock.h). */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "policies/pol_clock.h"
#include "policies/pol_compress.h"
#include "policies/pol_registry.h"
#include "policies/pol_semiasync.h"

enum { P_PROFILE, P_K_AHL, P_K_SHL, P_STALENESS, P_DENSITY, P_SWITCH_LOSS, P_SWITCH_AT, P_SWITCH_ITER };

static const hs_param_spec ashl_params[] = {
    [P_PROFILE] = {"profile", HS_PARAM_INT, "3", 1, 1e6, NULL,
                   "profiling rounds (one step, push, pull) before the plan, plus one compressed round"},
    [P_K_AHL] = {"k_ahl", HS_PARAM_INT, "8", 1, 1e6, NULL, "K of the AHL stage: local steps of the slowest worker"},
    [P_K_SHL] = {"k_shl", HS_PARAM_INT, "2", 1, 1e6, NULL, "K of the SHL stage"},
    [P_STALENESS] = {"staleness", HS_PARAM_INT, "3", 0, 1e9, NULL, "SHL's staleness bound in rounds"},
    [P_DENSITY] = {"density", HS_PARAM_DOUBLE, "0.1", 1e-6, 1, NULL,
                   "top-k density of the bottleneck worker in SHL (the others send more)"},
    [P_SWITCH_LOSS] = {"switch_loss", HS_PARAM_DOUBLE, "0.5", 0, 1e300, NULL,
                       "switch AHL -> SHL when the mean training loss is below this; 0 = off"},
    [P_SWITCH_AT] = {"switch_at", HS_PARAM_TIME, "0", 0, 1e300, NULL, "switch AHL -> SHL at this time; 0 = off"},
    [P_SWITCH_ITER] = {"switch_iter", HS_PARAM_INT, "0", 0, 1e18, NULL,
                       "switch AHL -> SHL after this many global updates; 0 = off"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

typedef enum stage { ST_PROFILE = 0, ST_AHL = 1, ST_SHL = 2 } stage;

typedef struct ashl_worker {
  int stage;            /* stage of the worker's current round */
  int H, steps;         /* local steps of this round: planned, taken */
  int prof;             /* profiling rounds finished */
  int compressed;       /* the push in flight is compressed */
  double c_sum, up_sum, down_sum, upc; /* s */
  int c_n, up_n, down_n;
  int h_ahl, h_shl;     /* the plan */
  double density;       /* SHL top-k density; 1 = uncompressed */
  double loss;          /* latest training loss, NaN if none */
  char profiled;
} ashl_worker;

typedef struct ashl_state {
  int profile, k_ahl, k_shl, staleness;
  double density, switch_loss, switch_at;
  int64_t switch_iter;
  hs_pol_group g;
  int cap;
  ashl_worker *w;
  int switched, planned;
  hs_pol_clocks ck;     /* SHL rounds pushed by worker, who is blocked, the slowest (ck.min) */
  hs_comm_opts push, pull;
  /* Over the active workers (s->g), refreshed by ashl_refresh when membership or the plan
   * changes and kept up to date between: */
  int64_t sum_ahl, sum_shl; /* sum of H of the AHL and of the SHL stage (exact integers) */
  int n_profiled;       /* workers with a profile */
  int n_noloss;         /* workers that have reported no loss yet */
  double loss_sum;      /* their latest losses, summed as they change (not in worker order) */
  double loss_abs;      /* the same sum of |loss| */
  double loss_err;      /* a bound on |loss_sum - exact sum| */
} ashl_state;

/* --- the plan ----------------------------------------------------------------------------- */

void hs_ashl_local_steps(int n, const double *c, const double *comm, int K, int *H) {
  double top = -INFINITY;
  for (int j = 0; j < n; j++)
    if (K * c[j] + comm[j] > top) top = K * c[j] + comm[j];
  for (int i = 0; i < n; i++) {
    double h = c[i] > 0 ? round((top - comm[i]) / c[i]) : K;
    H[i] = h < 1 ? 1 : h > 1e9 ? 1000000000 : (int)h;
  }
}

double hs_ashl_round_time(int n, const double *c, const double *comm, const int *H) {
  double T = 0;
  for (int i = 0; i < n; i++)
    if (c[i] * H[i] + comm[i] > T) T = c[i] * H[i] + comm[i];
  return T;
}

double hs_ashl_density(double T, double c, int H, double up, double down, double up_c, double d0,
                       double wire) {
  double slack = T - c * H - down;
  if (up <= slack) return 1.0;
  double cm = up_c - wire * d0 * up;
  if (cm < 0) cm = 0;
  double d = up > 0 && wire > 0 ? (slack - cm) / (wire * up) : d0;
  if (!(d >= d0)) d = d0;
  return d < 1.0 ? d : 1.0;
}

static int ashl_plan(ashl_state *s, hs_runtime *rt) {
  int n = s->g.n;
  double *buf = malloc((size_t)(n > 0 ? n : 1) * 3 * sizeof *buf);
  int *H = malloc((size_t)(n > 0 ? n : 1) * sizeof *H);
  if (!buf || !H) {
    free(buf);
    free(H);
    return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  }
  double *c = buf, *comm = buf + n, *commc = buf + 2 * n;
  int m = 0; /* workers with a profile, packed first */
  for (int i = 0; i < n; i++) {
    ashl_worker *x = &s->w[s->g.ws[i]];
    if (!x->profiled) continue;
    c[m] = x->c_sum / x->c_n;
    comm[m] = x->up_sum / x->up_n + x->down_sum / x->down_n;
    commc[m] = x->upc + x->down_sum / x->down_n;
    m++;
  }
  hs_ashl_local_steps(m, c, comm, s->k_ahl, H);
  for (int i = 0, j = 0; i < n; i++) {
    ashl_worker *x = &s->w[s->g.ws[i]];
    x->h_ahl = x->profiled ? H[j++] : s->k_ahl;
  }
  hs_ashl_local_steps(m, c, commc, s->k_shl, H);
  double T = hs_ashl_round_time(m, c, commc, H);
  double wire = hs_compress_wire_ratio(&hs_compressor_topk, 1.0);
  for (int i = 0, j = 0; i < n; i++) {
    ashl_worker *x = &s->w[s->g.ws[i]];
    if (!x->profiled) {
      x->h_shl = s->k_shl;
      x->density = 1.0;
      continue;
    }
    x->h_shl = H[j];
    x->density = hs_ashl_density(T, c[j], H[j], x->up_sum / x->up_n, x->down_sum / x->down_n,
                                 x->upc, s->density, wire);
    j++;
  }
  free(buf);
  free(H);
  s->planned = 1;
  return 0;
}

/* --- rounds ------------------------------------------------------------------------------- */

static int ashl_reserve(ashl_state *s, hs_runtime *rt) {
  int n = hs_rt_n_workers(rt);
  if (n <= s->cap) return 0;
  if (hs_pol_clocks_reserve(&s->ck, n)) return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  ashl_worker *w = realloc(s->w, (size_t)n * sizeof *w);
  if (!w) return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  for (int i = s->cap; i < n; i++) w[i] = (ashl_worker){.loss = NAN, .density = 1.0};
  s->w = w;
  s->cap = n;
  return 0;
}

static int ashl_batch(const ashl_state *s, int w) {
  int i = w < s->g.cap ? s->g.slot[w] : -1;
  return i >= 0 ? s->g.batch[i] : 0;
}

/* Whether w is one of the active workers of s->g (whose slots are set only when it has some). */
static int ashl_member(const ashl_state *s, int w) {
  return s->g.n > 0 && w >= 0 && w < s->g.cap && s->g.slot[w] >= 0;
}

/* The exact sum of the active workers' latest losses in worker order (the order the switch's
 * rule sums them in), resynchronising the running sums from it. */
static double ashl_loss_exact(ashl_state *s) {
  double sum = 0, abs_sum = 0;
  for (int i = 0; i < s->g.n; i++) {
    double l = s->w[s->g.ws[i]].loss;
    sum += l;
    abs_sum += fabs(l);
  }
  s->loss_sum = sum;
  s->loss_abs = abs_sum;
  /* Recursive summation of n terms errs by at most n eps sum|l| (with eps = 2u, a margin). */
  s->loss_err = (s->g.n + 1) * DBL_EPSILON * abs_sum;
  return sum;
}

/* Recounts the sums over the active workers; O(N), after a change of membership or plan. */
static void ashl_refresh(ashl_state *s) {
  s->sum_ahl = s->sum_shl = 0;
  s->n_profiled = s->n_noloss = 0;
  for (int i = 0; i < s->g.n; i++) {
    const ashl_worker *x = &s->w[s->g.ws[i]];
    s->sum_ahl += x->h_ahl;
    s->sum_shl += x->h_shl;
    s->n_profiled += x->profiled;
    s->n_noloss += isnan(x->loss) ? 1 : 0;
  }
  if (s->n_noloss == 0) ashl_loss_exact(s);
  else s->loss_sum = s->loss_abs = s->loss_err = 0;
}

/* Worker w's latest loss, kept in the running sums when w is active. */
static void ashl_set_loss(ashl_state *s, int w, double loss) {
  ashl_worker *x = &s->w[w];
  double old = x->loss;
  x->loss = loss;
  if (!ashl_member(s, w)) return;
  if (isnan(old)) {
    if (--s->n_noloss == 0) ashl_loss_exact(s);
    return;
  }
  if (s->n_noloss > 0) return; /* summed once everybody has a loss */
  double d = loss - old, da = fabs(loss) - fabs(old);
  s->loss_sum += d;
  s->loss_abs += da;
  /* Each of the four roundings errs by at most u times its result; 2u each, a margin. */
  s->loss_err += DBL_EPSILON * (fabs(d) + fabs(s->loss_sum) + fabs(da) + s->loss_abs);
}

/* Worker w's data share p_w = H_w / sum of H over the active workers, with every worker's H
 * taken from the plan of w's current stage (1 each while profiling, so p = 1/n). The sums are
 * of integers, exact in a double as they were when summed worker by worker. */
static double ashl_share(const ashl_state *s, int w) {
  if (!ashl_member(s, w)) return 1.0;
  const ashl_worker *x = &s->w[w];
  double sum, mine;
  if (x->stage == ST_PROFILE) {
    sum = s->g.n;
    mine = 1.0;
  } else if (x->stage == ST_AHL) {
    sum = s->planned ? (double)s->sum_ahl : (double)s->k_ahl * s->g.n;
    mine = s->planned ? x->h_ahl : s->k_ahl;
  } else {
    sum = s->planned ? (double)s->sum_shl : (double)s->k_shl * s->g.n;
    mine = s->planned ? x->h_shl : s->k_shl;
  }
  return sum > 0 && mine > 0 ? mine / sum : 1.0;
}

static int ashl_round(ashl_state *s, hs_runtime *rt, int w) {
  ashl_worker *x = &s->w[w];
  x->steps = 0;
  if (x->stage == ST_PROFILE) x->H = 1;
  else if (x->stage == ST_AHL) x->H = s->planned ? x->h_ahl : s->k_ahl;
  else x->H = s->planned ? x->h_shl : s->k_shl;
  return hs_rt_compute(rt, w, ashl_batch(s, w), (uint64_t)x->stage);
}

/* After the group changed: the counters and the clocks' heaps follow it. */
static int ashl_members(ashl_state *s, hs_runtime *rt) {
  ashl_refresh(s);
  if (hs_pol_clocks_members(&s->ck, s->g.ws, s->g.n))
    return hs_rt_fail(rt, HS_ERUNTIME, "internal error: a worker beyond the clocks' table");
  return 0;
}

static int ashl_start(void *state, hs_runtime *rt) {
  ashl_state *s = state;
  int rc = hs_pol_group_even(&s->g, rt);
  if (!rc) rc = ashl_reserve(s, rt);
  if (!rc) rc = ashl_members(s, rt);
  for (int i = 0; !rc && i < s->g.n; i++) rc = ashl_round(s, rt, s->g.ws[i]);
  return rc;
}

static void ashl_check_switch(ashl_state *s, hs_runtime *rt) {
  if (s->switched) return;
  if ((s->switch_at > 0 && hs_rt_now(rt) >= s->switch_at) ||
      (s->switch_iter > 0 && hs_rt_version(rt) >= (uint64_t)s->switch_iter)) {
    s->switched = 1;
    return;
  }
  if (!(s->switch_loss > 0) || s->g.n == 0) return;
  if (s->n_noloss > 0) return; /* not every worker has reported a loss yet */
  /* The rule is fl(sum in worker order / n) < switch_loss. The running sum is within E of
   * that ordered sum; only when the threshold lies within (a generous) E of it is the ordered
   * sum taken, so that the decision is the ordered sum's, bit for bit, at O(1) per event. */
  double tn = s->switch_loss * s->g.n, S = s->loss_sum;
  double E = 2 * (s->loss_err + (s->g.n + 2) * DBL_EPSILON * (s->loss_abs + s->loss_err)) +
             16 * DBL_EPSILON * (fabs(S) + tn);
  if (S + E < tn) s->switched = 1;
  else if (!(S - E > tn) && ashl_loss_exact(s) / s->g.n < s->switch_loss) s->switched = 1;
}

static int ashl_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  ashl_state *s = state;
  int w = o->worker, rc = hs_rt_local_update(rt, w);
  if (rc) return rc;
  ashl_worker *x = &s->w[w];
  if (x->stage == ST_PROFILE) {
    x->c_sum += o->duration;
    x->c_n++;
  }
  if (!isnan(o->loss)) ashl_set_loss(s, w, o->loss);
  ashl_check_switch(s, rt);
  if (++x->steps < x->H && hs_rt_active(rt, w)) return hs_rt_compute(rt, w, o->batch, o->tag);
  hs_comm_opts push = s->push;
  x->compressed = 0;
  if ((x->stage == ST_PROFILE && x->prof == s->profile) || (x->stage == ST_SHL && x->density < 1.0)) {
    push.compressor = &hs_compressor_topk;
    push.ratio = x->stage == ST_PROFILE ? s->density : x->density;
    x->compressed = 1;
  }
  push.weight = ashl_share(s, w);
  return hs_rt_push(rt, w, &push);
}

/* SHL: the smallest clock of the active workers, and unblocking whoever is now within bound
 * (in ascending worker order). */
static int shl_release(ashl_state *s, hs_runtime *rt) {
  int r = hs_pol_clocks_release(&s->ck, s->staleness);
  for (int i = 0; i < r; i++) {
    int rc = hs_rt_pull(rt, s->ck.out[i], &s->pull);
    if (rc) return rc;
  }
  return 0;
}

static int ashl_on_push(ashl_state *s, hs_runtime *rt, const hs_comm_obs *o) {
  int w = o->worker;
  ashl_worker *x = &s->w[w];
  ashl_check_switch(s, rt);
  if (x->stage == ST_PROFILE) {
    if (x->compressed) x->upc = o->end - o->start;
    else {
      x->up_sum += o->end - o->start;
      x->up_n++;
    }
  }
  if (x->stage != ST_SHL) return hs_rt_active(rt, w) ? hs_rt_pull(rt, w, &s->pull) : 0;
  int64_t before = s->ck.clock[w];
  hs_pol_clocks_set(&s->ck, w, before + 1);
  int rc = 0;
  if (!hs_rt_active(rt, w)) return shl_release(s, rt);
  if (before + 1 - s->ck.min <= s->staleness) rc = hs_rt_pull(rt, w, &s->pull);
  else hs_pol_clocks_block(&s->ck, w);
  if (rc) return rc;
  return before == s->ck.min ? shl_release(s, rt) : 0;
}

/* Profiling is over for everybody: plan, then every profiled worker starts its first round. */
static int ashl_maybe_plan(ashl_state *s, hs_runtime *rt) {
  if (s->planned || s->n_profiled < s->g.n) return 0;
  int rc = ashl_plan(s, rt);
  if (!rc) ashl_refresh(s);
  for (int i = 0; !rc && i < s->g.n; i++) {
    ashl_worker *x = &s->w[s->g.ws[i]];
    x->stage = s->switched ? ST_SHL : ST_AHL;
    rc = ashl_round(s, rt, s->g.ws[i]);
  }
  return rc;
}

static int ashl_on_pull(ashl_state *s, hs_runtime *rt, const hs_comm_obs *o) {
  int w = o->worker;
  ashl_worker *x = &s->w[w];
  if (x->stage == ST_PROFILE) {
    x->down_sum += o->end - o->start;
    x->down_n++;
    if (++x->prof <= s->profile) return hs_rt_active(rt, w) ? ashl_round(s, rt, w) : 0;
    if (!x->profiled && ashl_member(s, w)) s->n_profiled++;
    x->profiled = 1;
    return ashl_maybe_plan(s, rt);
  }
  if (!hs_rt_active(rt, w)) return 0;
  if (x->stage == ST_AHL && s->switched) {
    x->stage = ST_SHL;
    hs_pol_clocks_set(&s->ck, w, s->ck.min); /* it enters SHL level with the slowest */
  }
  return ashl_round(s, rt, w);
}

static int ashl_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  ashl_state *s = state;
  if (o->kind == HS_OP_PUSH) return ashl_on_push(s, rt, o);
  if (o->kind == HS_OP_PULL) return ashl_on_pull(s, rt, o);
  return 0;
}

static int ashl_on_cluster(void *state, hs_runtime *rt, const hs_cluster_obs *o) {
  ashl_state *s = state;
  if (o->kind == HS_CHANGE_SLOWDOWN) return 0;
  int rc = hs_pol_group_even(&s->g, rt);
  if (!rc) rc = ashl_reserve(s, rt);
  if (rc) return rc;
  if (o->kind == HS_CHANGE_JOIN) {
    ashl_worker *x = &s->w[o->worker];
    *x = (ashl_worker){.loss = NAN, .density = 1.0};
    s->ck.clock[o->worker] = s->ck.min;
    s->ck.blocked[o->worker] = 0;
    x->stage = !s->planned ? ST_PROFILE : s->switched ? ST_SHL : ST_AHL;
    x->h_ahl = s->k_ahl;
    x->h_shl = s->k_shl;
    if ((rc = ashl_members(s, rt))) return rc;
    return ashl_round(s, rt, o->worker);
  }
  if ((rc = ashl_members(s, rt))) return rc;
  /* A worker left: the plan may now be complete, and SHL's slowest clock may move. */
  if ((rc = ashl_maybe_plan(s, rt))) return rc;
  return shl_release(s, rt);
}

static int ashl_init(void *state, hs_runtime *rt, const hs_params *p) {
  ashl_state *s = state;
  s->profile = (int)p->value[P_PROFILE];
  s->k_ahl = (int)p->value[P_K_AHL];
  s->k_shl = (int)p->value[P_K_SHL];
  s->staleness = (int)p->value[P_STALENESS];
  s->density = p->value[P_DENSITY];
  s->switch_loss = p->value[P_SWITCH_LOSS];
  s->switch_at = p->value[P_SWITCH_AT];
  s->switch_iter = (int64_t)p->value[P_SWITCH_ITER];
  s->push.what = HS_COMM_MODEL; /* the round's local steps, not only its last gradient */
  s->push.ps_mode = HS_PS_APPLY;
  s->pull.what = HS_COMM_MODEL;
  return 0;
}

static void ashl_fini(void *state, hs_runtime *rt) {
  ashl_state *s = state;
  hs_pol_group_free(&s->g);
  hs_pol_clocks_free(&s->ck);
  free(s->w);
}

const hs_policy hs_policy_ashl = {
    .version = HS_POLICY_VERSION,
    .name = "ashl",
    .description = "ASHL: profiling, then asynchronous local steps sized per worker (AHL), then semi-asynchronous rounds with per-worker top-k (SHL)",
    .source = "Shen et al.: ASHL, an adaptive multi-stage distributed deep learning training scheme for heterogeneous environments (IEEE TC 2024); code xiangunremarkable/ASHL",
    .params = ashl_params,
    .state_size = sizeof(ashl_state),
    .init = ashl_init,
    .start = ashl_start,
    .on_compute = ashl_on_compute,
    .on_comm = ashl_on_comm,
    .on_cluster = ashl_on_cluster,
    .fini = ashl_fini,
};
