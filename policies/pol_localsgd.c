/* localsgd: each worker takes tau local SGD steps on its own replica, then the replicas are
 * averaged by an all-reduce of the models (Lin et al., "Don't use large mini-batches, use local
 * SGD", ICLR 2020). One model average is one global update, so an iteration here is a round of
 * tau local steps. Membership changes take effect at the next round. */
#include <stdlib.h>

#include "policies/pol_registry.h"

enum { P_TAU, P_ALGO };

static const hs_param_spec localsgd_params[] = {
    [P_TAU] = {"tau", HS_PARAM_INT, "4", 1, 1e6, NULL, "local steps between model averages"},
    [P_ALGO] = {"algo", HS_PARAM_ENUM, "ring", 0, -1, "ring|hier", "all-reduce algorithm"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

typedef struct localsgd_state {
  hs_pol_group g;
  hs_comm_opts opts;
  int tau;
  int *steps;   /* local steps taken this round, by worker */
  int ready;    /* workers that finished their tau steps */
  int changed;
} localsgd_state;

static int localsgd_init(void *state, hs_runtime *rt, const hs_params *p) {
  localsgd_state *s = state;
  s->tau = (int)p->value[P_TAU];
  s->opts.what = HS_COMM_MODEL;
  s->opts.algo = (hs_ar_algo)p->value[P_ALGO];
  return 0;
}

static int localsgd_round(localsgd_state *s, hs_runtime *rt) {
  s->ready = 0;
  int *st = realloc(s->steps, (size_t)(s->g.cap > 0 ? s->g.cap : 1) * sizeof *st);
  if (!st) return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  s->steps = st;
  for (int i = 0; i < s->g.n; i++) {
    s->steps[s->g.ws[i]] = 0;
    int rc = hs_rt_compute(rt, s->g.ws[i], s->g.batch[i], 0);
    if (rc) return rc;
  }
  return 0;
}

static int localsgd_start(void *state, hs_runtime *rt) {
  localsgd_state *s = state;
  int rc = hs_pol_group_even(&s->g, rt);
  return rc ? rc : localsgd_round(s, rt);
}

static int localsgd_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  localsgd_state *s = state;
  int w = o->worker, rc = hs_rt_local_update(rt, w);
  if (rc) return rc;
  /* A worker that left during the round contributes the steps it took. */
  if (++s->steps[w] < s->tau && hs_rt_active(rt, w)) return hs_rt_compute(rt, w, o->batch, 0);
  if (++s->ready < s->g.n) return 0;
  return hs_rt_allreduce(rt, s->g.ws, s->g.n, NULL, &s->opts);
}

static int localsgd_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  localsgd_state *s = state;
  if (s->changed) {
    s->changed = 0;
    int rc = hs_pol_group_even(&s->g, rt);
    if (rc) return rc;
  }
  return localsgd_round(s, rt);
}

static int localsgd_on_cluster(void *state, hs_runtime *rt, const hs_cluster_obs *o) {
  localsgd_state *s = state;
  if (o->kind != HS_CHANGE_SLOWDOWN) s->changed = 1;
  return 0;
}

static void localsgd_fini(void *state, hs_runtime *rt) {
  localsgd_state *s = state;
  hs_pol_group_free(&s->g);
  free(s->steps);
}

const hs_policy hs_policy_localsgd = {
    .version = HS_POLICY_VERSION,
    .name = "localsgd",
    .description = "local SGD: tau local steps per worker, then the models are averaged by all-reduce",
    .source = "Lin, Stich, Patel, Jaggi: Don't use large mini-batches, use local SGD (ICLR 2020)",
    .params = localsgd_params,
    .state_size = sizeof(localsgd_state),
    .init = localsgd_init,
    .start = localsgd_start,
    .on_compute = localsgd_on_compute,
    .on_comm = localsgd_on_comm,
    .on_cluster = localsgd_on_cluster,
    .fini = localsgd_fini,
};
