/* ksync and kasync: the parameter server waits for k of the N workers' gradients per update
 * (Dutta, Joshi, Ghosh, Dube, Nagpurkar: "Slow and stale gradients can win the race:
 * error-runtime trade-offs in distributed SGD", AISTATS 2018).
 *
 * - ksync: every active worker computes a gradient on the current model (version v). The first
 *   k workers to finish their step push it (accumulated at the server); the server applies the
 *   k gradients as one update, and every idle worker pulls the new model and starts again.
 *   The other workers' gradients, computed on v, are discarded: a straggler still computing
 *   when the update is made finishes its step (the runtime has no way to interrupt a step),
 *   drops the gradient without sending it, pulls the new model and starts on it. Dutta et al.
 *   interrupt stragglers instead; here their remaining compute time is lost as wait.
 *   "First to finish" is decided when a step ends, so the k pushes of an update are exactly
 *   those k gradients even when links differ in speed.
 * - kasync: every worker loops on its own: compute, push, pull the latest model, compute. The
 *   server applies an update each time k more gradients have arrived, whatever model version
 *   they were computed on (so gradients can be stale).
 *
 * Adaptive k (parameter `adapt`), re-evaluated every `every` updates:
 * - loss: k = clamp(ceil(k0 * sqrt(F0 / F)), k0, N), F the mean training loss reported since
 *   the last evaluation and F0 the first such mean: few gradients per update while the loss is
 *   high, more as it falls (the error-runtime trade-off of Dutta et al.: a small k is fast
 *   early, a larger k lowers the error floor; the square-root schedule is AdaComm's, Wang &
 *   Joshi 2019, applied to k as the journal version's AdaSync does). With no loss reported
 *   (NaN) k stays k0.
 * - state: from the workers' runtime state and model versions. ksync: k = the number of active
 *   workers whose predicted step time (performance model with current slowdowns) is at most
 *   `straggler` times the fastest one's, so that persistent stragglers are not waited for.
 *   kasync: the mean staleness (updates applied between a worker's read of the model and the
 *   arrival of its gradient) of the pushes since the last evaluation is compared with
 *   `max_stale`: above it k grows by one (fewer, larger updates, hence fresher gradients),
 *   below half of it k shrinks by one.
 * Batches: the global batch is split evenly over the active workers; an update of k gradients
 * therefore carries k/N of the global batch.
 *
 * Cost: O(1) per event, plus at ksync's update the pulls of the workers waiting for it, in
 * worker order: they are kept in a list as they start waiting, so an update with few of them
 * (small k, slow steps) does not scan every worker; with many (at least N/16) the group is
 * scanned in order, O(N) for Θ(N) pulls. The adaptive rules cost O(N) every `every` updates
 * (adapt=state, ksync: one prediction per worker). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policies/pol_registry.h"

enum { P_K, P_ADAPT, P_EVERY, P_STRAGGLER, P_MAX_STALE };
enum { ADAPT_NONE = 0, ADAPT_LOSS = 1, ADAPT_STATE = 2 };

static const hs_param_spec ksync_params[] = {
    [P_K] = {"k", HS_PARAM_INT, "0", 0, 1e9, NULL,
             "gradients per update; 0 = ceil(N/2); capped at the active workers"},
    [P_ADAPT] = {"adapt", HS_PARAM_ENUM, "none", 0, -1, "none|loss|state",
                 "adaptive k: none, from the training loss, or from runtime state and versions"},
    [P_EVERY] = {"every", HS_PARAM_INT, "10", 1, 1e9, NULL, "updates between re-evaluations of adaptive k"},
    [P_STRAGGLER] = {"straggler", HS_PARAM_DOUBLE, "1.5", 1, 1e9, NULL,
                     "adapt=state, ksync: a worker slower than this times the fastest is not waited for"},
    [P_MAX_STALE] = {"max_stale", HS_PARAM_DOUBLE, "2", 0, 1e9, NULL,
                     "adapt=state, kasync: target mean staleness of the applied gradients"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

typedef enum wstate { W_IDLE = 0, W_COMPUTE, W_PUSH, W_WAIT, W_PULL } wstate;

typedef struct ksync_state {
  int async;
  int k_param, k0, k;       /* parameter, initial and current k */
  int adapt, every;
  double straggler, max_stale;
  hs_pol_group g;
  hs_comm_opts push, pull;
  int cap;
  char *st;                 /* wstate by worker */
  char *listed;             /* ksync: by worker, in wait[] */
  int *wait;                /* ksync: workers that became idle or waiting since the last
                               update (a superset of those still so; no repeats) */
  int n_wait;
  uint64_t round;           /* ksync: the update the workers' steps are for */
  int committed;            /* ksync: gradients of this round sent (at most k) */
  int arrived;              /* gradients at the server since the last update */
  int64_t updates;
  double loss_sum, f0;      /* loss adaptation */
  int64_t loss_n;
  double stale_sum;         /* staleness adaptation */
  int64_t stale_n;
} ksync_state;

static int ks_reserve(ksync_state *s, hs_runtime *rt) {
  int n = hs_rt_n_workers(rt);
  if (n <= s->cap) return 0;
  char *st = realloc(s->st, (size_t)n);
  if (st) s->st = st;
  char *listed = realloc(s->listed, (size_t)n);
  if (listed) s->listed = listed;
  /* Room for 2n: an update's pulls could, in a runtime that called back at once, list
   * workers again before the n entries being pulled are dropped. */
  int *wait = realloc(s->wait, 2 * (size_t)n * sizeof *wait);
  if (wait) s->wait = wait;
  if (!st || !listed || !wait) return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  for (int i = s->cap; i < n; i++) {
    st[i] = W_IDLE;
    listed[i] = 0;
  }
  s->cap = n;
  return 0;
}

/* Sets worker w's state; one that becomes idle or waiting joins the list of ksync's update. */
static void ks_set(ksync_state *s, int w, wstate st) {
  s->st[w] = (char)st;
  if ((st == W_WAIT || st == W_IDLE) && !s->listed[w]) {
    s->listed[w] = 1;
    s->wait[s->n_wait++] = w;
  }
}

/* The list from scratch after the membership changed: every idle or waiting worker of the
 * group. O(N). */
static void ks_relist(ksync_state *s) {
  for (int i = 0; i < s->n_wait; i++) s->listed[s->wait[i]] = 0;
  s->n_wait = 0;
  for (int i = 0; i < s->g.n; i++) {
    int w = s->g.ws[i];
    if (s->st[w] == W_WAIT || s->st[w] == W_IDLE) ks_set(s, w, (wstate)s->st[w]);
  }
}

static int ks_clamp(const ksync_state *s, int k) {
  if (k > s->g.n) k = s->g.n;
  return k < 1 ? 1 : k;
}

static int ks_rebuild(ksync_state *s, hs_runtime *rt) {
  int rc = hs_pol_group_even(&s->g, rt);
  if (!rc) rc = ks_reserve(s, rt);
  if (rc) return rc;
  ks_relist(s);
  s->k0 = ks_clamp(s, s->k_param > 0 ? s->k_param : (s->g.n + 1) / 2);
  s->k = ks_clamp(s, s->k);
  return 0;
}

static int ks_init_common(ksync_state *s, const hs_params *p, int async) {
  s->async = async;
  s->k_param = (int)p->value[P_K];
  s->adapt = (int)p->value[P_ADAPT];
  s->every = (int)p->value[P_EVERY];
  s->straggler = p->value[P_STRAGGLER];
  s->max_stale = p->value[P_MAX_STALE];
  s->push.what = HS_COMM_GRAD;
  s->push.ps_mode = HS_PS_ACCUMULATE;
  s->pull.what = HS_COMM_MODEL;
  s->f0 = NAN;
  return 0;
}

static int ksync_init(void *state, hs_runtime *rt, const hs_params *p) { return ks_init_common(state, p, 0); }
static int kasync_init(void *state, hs_runtime *rt, const hs_params *p) { return ks_init_common(state, p, 1); }

static int ks_batch(const ksync_state *s, int w) {
  int i = w < s->g.cap ? s->g.slot[w] : -1;
  return i >= 0 ? s->g.batch[i] : 0;
}

static int ks_compute(ksync_state *s, hs_runtime *rt, int w) {
  ks_set(s, w, W_COMPUTE);
  return hs_rt_compute(rt, w, ks_batch(s, w), s->round);
}

static int ksync_start(void *state, hs_runtime *rt) {
  ksync_state *s = state;
  int rc = ks_rebuild(s, rt);
  if (rc) return rc;
  s->k = s->k0;
  for (int i = 0; i < s->g.n; i++)
    if ((rc = ks_compute(s, rt, s->g.ws[i]))) return rc;
  return 0;
}

/* The adaptive rules; see the file comment. */
static void ks_adapt(ksync_state *s, hs_runtime *rt) {
  if (s->adapt == ADAPT_NONE || s->updates % s->every != 0) return;
  if (s->adapt == ADAPT_LOSS) {
    if (s->loss_n > 0) {
      double f = s->loss_sum / (double)s->loss_n;
      if (isnan(s->f0)) s->f0 = f;
      if (f > 0 && s->f0 > 0) s->k = ks_clamp(s, (int)ceil(s->k0 * sqrt(s->f0 / f) - 1e-9));
      if (s->k < s->k0) s->k = s->k0;
    }
    s->loss_sum = 0;
    s->loss_n = 0;
  } else if (!s->async) {
    double fastest = INFINITY;
    for (int i = 0; i < s->g.n; i++) {
      double t = hs_rt_predict(rt, s->g.ws[i], s->g.batch[i]);
      if (t < fastest) fastest = t;
    }
    int k = 0;
    for (int i = 0; i < s->g.n; i++)
      k += hs_rt_predict(rt, s->g.ws[i], s->g.batch[i]) <= s->straggler * fastest;
    s->k = ks_clamp(s, k);
  } else {
    if (s->stale_n > 0) {
      double mean = s->stale_sum / (double)s->stale_n;
      if (mean > s->max_stale) s->k = ks_clamp(s, s->k + 1);
      else if (mean < 0.5 * s->max_stale) s->k = ks_clamp(s, s->k - 1);
    }
    s->stale_sum = 0;
    s->stale_n = 0;
  }
}

static int ks_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  ksync_state *s = state;
  int w = o->worker;
  if (!isnan(o->loss)) {
    s->loss_sum += o->loss;
    s->loss_n++;
  }
  if (s->async) {
    ks_set(s, w, W_PUSH);
    return hs_rt_push(rt, w, &s->push);
  }
  /* ksync: a gradient of the current round, among the first k, is sent; any other is
   * discarded. A discarded worker waits for the update (or pulls at once if it came). */
  if (o->tag == s->round && s->committed < s->k) {
    s->committed++;
    ks_set(s, w, W_PUSH);
    return hs_rt_push(rt, w, &s->push);
  }
  if (o->tag != s->round && hs_rt_active(rt, w)) {
    ks_set(s, w, W_PULL);
    return hs_rt_pull(rt, w, &s->pull);
  }
  ks_set(s, w, W_WAIT);
  return 0;
}

/* ksync: the update is made once the round's k gradients are all at the server (more than k
 * only when k shrank with a worker leaving after the round's gradients were sent). */
static int ksync_maybe_apply(ksync_state *s, hs_runtime *rt) {
  if (s->committed < s->k || s->arrived < s->committed) return 0;
  s->arrived = 0;
  return hs_rt_apply(rt, &s->push);
}

static int by_worker(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* ksync's update is made: everybody idle or waiting in the group pulls the new model, in
 * worker order; stragglers pull when their step ends. */
static int ksync_pull_waiting(ksync_state *s, hs_runtime *rt) {
  int n = s->n_wait, rc = 0;
  for (int i = 0; i < n; i++) s->listed[s->wait[i]] = 0;
  if (n >= s->g.n / 16) {
    s->n_wait = 0;
    for (int i = 0; !rc && i < s->g.n; i++) {
      int w = s->g.ws[i];
      if (s->st[w] == W_WAIT || s->st[w] == W_IDLE) {
        ks_set(s, w, W_PULL);
        rc = hs_rt_pull(rt, w, &s->pull);
      }
    }
    return rc;
  }
  /* Few: sort the list and pull the members still idle or waiting. */
  qsort(s->wait, (size_t)n, sizeof *s->wait, by_worker);
  for (int i = 0; !rc && i < n; i++) {
    int w = s->wait[i];
    int member = s->g.n > 0 && w < s->g.cap && s->g.slot[w] >= 0;
    if (member && (s->st[w] == W_WAIT || s->st[w] == W_IDLE)) {
      ks_set(s, w, W_PULL);
      rc = hs_rt_pull(rt, w, &s->pull);
    }
  }
  /* Whatever was listed while the pulls were issued stays listed. */
  memmove(s->wait, s->wait + n, (size_t)(s->n_wait - n) * sizeof *s->wait);
  s->n_wait -= n;
  return rc;
}

static int ks_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  ksync_state *s = state;
  int rc;
  switch (o->kind) {
  case HS_OP_PUSH:
    s->stale_sum += o->staleness;
    s->stale_n++;
    s->arrived++;
    if (!s->async) {
      ks_set(s, o->worker, W_WAIT);
      return ksync_maybe_apply(s, rt);
    }
    if (s->arrived >= s->k) {
      s->arrived = 0;
      if ((rc = hs_rt_apply(rt, &s->push))) return rc;
    }
    if (!hs_rt_active(rt, o->worker)) {
      ks_set(s, o->worker, W_IDLE);
      return 0;
    }
    ks_set(s, o->worker, W_PULL);
    return hs_rt_pull(rt, o->worker, &s->pull);
  case HS_OP_APPLY:
    s->updates++;
    ks_adapt(s, rt);
    if (s->async) return 0;
    s->round++;
    s->committed = 0;
    return ksync_pull_waiting(s, rt);
  case HS_OP_PULL:
    if (!hs_rt_active(rt, o->worker)) {
      ks_set(s, o->worker, W_IDLE);
      return 0;
    }
    return ks_compute(s, rt, o->worker);
  case HS_OP_ALLREDUCE:
    break;
  }
  return 0;
}

static int ks_on_cluster(void *state, hs_runtime *rt, const hs_cluster_obs *o) {
  ksync_state *s = state;
  if (o->kind == HS_CHANGE_SLOWDOWN) return 0;
  int rc = ks_rebuild(s, rt);
  if (rc) return rc;
  if (s->g.n == 0) return 0;
  if (o->kind == HS_CHANGE_JOIN) return ks_compute(s, rt, o->worker);
  /* A worker left: fewer may be waited for; a round that now has its k goes on. */
  return s->async ? 0 : ksync_maybe_apply(s, rt);
}

static void ks_fini(void *state, hs_runtime *rt) {
  ksync_state *s = state;
  hs_pol_group_free(&s->g);
  free(s->st);
  free(s->listed);
  free(s->wait);
}

const hs_policy hs_policy_ksync = {
    .version = HS_POLICY_VERSION,
    .name = "ksync",
    .description = "k-sync SGD: the server updates with the first k of N gradients of the current model; the others are discarded",
    .source = "Dutta, Joshi, Ghosh, Dube, Nagpurkar: Slow and stale gradients can win the race (AISTATS 2018)",
    .params = ksync_params,
    .state_size = sizeof(ksync_state),
    .init = ksync_init,
    .start = ksync_start,
    .on_compute = ks_on_compute,
    .on_comm = ks_on_comm,
    .on_cluster = ks_on_cluster,
    .fini = ks_fini,
};

const hs_policy hs_policy_kasync = {
    .version = HS_POLICY_VERSION,
    .name = "kasync",
    .description = "k-async SGD: the server updates after any k gradients arrive; workers pull the latest model and go on",
    .source = "Dutta, Joshi, Ghosh, Dube, Nagpurkar: Slow and stale gradients can win the race (AISTATS 2018)",
    .params = ksync_params,
    .state_size = sizeof(ksync_state),
    .init = kasync_init,
    .start = ksync_start,
    .on_compute = ks_on_compute,
    .on_comm = ks_on_comm,
    .on_cluster = ks_on_cluster,
    .fini = ks_fini,
};
