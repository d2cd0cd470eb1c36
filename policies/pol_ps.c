/* The parameter-server policies: ps-bsp, asp and ssp. They share one file because they differ
 * only in when a worker may read the model again after pushing its gradient.
 *
 * - ps-bsp: every worker pushes; the server accumulates and, once all active workers have
 *   pushed, applies one update; then every worker pulls and starts its next step.
 * - asp: each push is applied on arrival; the worker pulls at once and goes on (Hogwild-style
 *   asynchronous parameter server).
 * - ssp(s): each push is applied on arrival; a worker whose clock (pushes applied) is more than
 *   s ahead of the slowest active worker blocks until the slowest catches up (Ho et al.,
 *   "More effective distributed ML via a stale synchronous parallel parameter server",
 *   NIPS 2013). s = 0 is BSP. The clocks and the slowest of them are kept in heaps
 *   (pol_clock.h): a push costs O(log N), not a scan of the workers. */
#include <stdlib.h>

#include "policies/pol_clock.h"
#include "policies/pol_registry.h"

typedef enum ps_mode { PS_BSP, PS_ASP, PS_SSP } ps_mode;

typedef struct ps_state {
  ps_mode mode;
  int staleness;      /* ssp's bound s */
  hs_pol_group g;
  hs_comm_opts push, pull;
  int pushed;         /* bsp: pushes accumulated this round */
  int expected;       /* bsp: pushes the round waits for (workers that left before their
                         step began are taken off) */
  hs_pol_clocks ck;   /* ssp: pushes applied by worker, who waits for the slowest, and
                         the smallest clock among active workers (ck.min) */
  int changed;
} ps_state;

static int ps_rebuild(ps_state *s, hs_runtime *rt) {
  int rc = hs_pol_group_even(&s->g, rt);
  if (rc) return rc;
  size_t cap = (size_t)(s->g.cap > 0 ? s->g.cap : 1);
  if (s->mode == PS_SSP && hs_pol_clocks_reserve(&s->ck, (int)cap))
    return hs_rt_fail(rt, HS_ENOMEM, "out of memory");
  return 0;
}

/* ssp: the active workers of the clocks are the group's, after a rebuild and any clock set. */
static int ssp_members(ps_state *s, hs_runtime *rt) {
  if (hs_pol_clocks_members(&s->ck, s->g.ws, s->g.n))
    return hs_rt_fail(rt, HS_ERUNTIME, "internal error: a worker beyond the clocks' table");
  return 0;
}

static int ps_init_common(ps_state *s, ps_mode mode) {
  s->mode = mode;
  s->push.what = HS_COMM_GRAD;
  s->push.ps_mode = mode == PS_BSP ? HS_PS_ACCUMULATE : HS_PS_APPLY;
  s->pull.what = HS_COMM_MODEL;
  return 0;
}

static int ps_start(void *state, hs_runtime *rt) {
  ps_state *s = state;
  int rc = ps_rebuild(s, rt);
  if (rc) return rc;
  if (s->mode == PS_SSP) {
    int total = hs_rt_n_workers(rt);
    for (int w = 0; w < total; w++) {
      s->ck.clock[w] = 0;
      s->ck.blocked[w] = 0;
    }
    s->ck.min = 0;
    if ((rc = ssp_members(s, rt))) return rc;
  }
  s->expected = s->g.n;
  for (int i = 0; i < s->g.n; i++)
    if ((rc = hs_rt_compute(rt, s->g.ws[i], s->g.batch[i], 0))) return rc;
  return 0;
}

static int ps_batch(ps_state *s, int w) {
  int i = w < s->g.cap ? s->g.slot[w] : -1;
  return i >= 0 ? s->g.batch[i] : 0;
}

static int ps_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  ps_state *s = state;
  return hs_rt_push(rt, o->worker, &s->push);
}

/* ssp: the smallest clock among active workers, and unblocking whoever is now within s (in
 * ascending worker order). */
static int ssp_release(ps_state *s, hs_runtime *rt) {
  int r = hs_pol_clocks_release(&s->ck, s->staleness);
  for (int i = 0; i < r; i++) {
    int rc = hs_rt_pull(rt, s->ck.out[i], &s->pull);
    if (rc) return rc;
  }
  return 0;
}

/* bsp: the server applies once every worker still in the round has pushed. */
static int bsp_maybe_apply(ps_state *s, hs_runtime *rt) {
  if (s->expected <= 0 || s->pushed < s->expected) return 0;
  s->pushed = 0;
  return hs_rt_apply(rt, &s->push);
}

static int ps_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  ps_state *s = state;
  int rc = 0;
  switch (o->kind) {
  case HS_OP_PUSH:
    if (s->mode == PS_BSP) {
      s->pushed++;
      return bsp_maybe_apply(s, rt);
    }
    if (s->changed) {
      s->changed = 0;
      if ((rc = ps_rebuild(s, rt))) return rc;
    }
    if (s->mode == PS_ASP) return hs_rt_active(rt, o->worker) ? hs_rt_pull(rt, o->worker, &s->pull) : 0;
    /* ssp */
    hs_pol_clocks_set(&s->ck, o->worker, s->ck.clock[o->worker] + 1);
    if (!hs_rt_active(rt, o->worker)) return ssp_release(s, rt);
    if (s->ck.clock[o->worker] - s->ck.min <= s->staleness)
      rc = hs_rt_pull(rt, o->worker, &s->pull);
    else
      hs_pol_clocks_block(&s->ck, o->worker);
    if (rc) return rc;
    /* Only a push by a worker at the old minimum can raise the minimum. */
    return s->ck.clock[o->worker] - 1 == s->ck.min ? ssp_release(s, rt) : 0;
  case HS_OP_APPLY:
    if (s->changed) {
      s->changed = 0;
      if ((rc = ps_rebuild(s, rt))) return rc;
    }
    s->expected = s->g.n;
    for (int i = 0; i < s->g.n; i++)
      if ((rc = hs_rt_pull(rt, s->g.ws[i], &s->pull))) return rc;
    return 0;
  case HS_OP_PULL:
    if (!hs_rt_active(rt, o->worker)) {
      /* It left after the apply: the round goes on without it. */
      if (s->mode != PS_BSP) return 0;
      s->expected--;
      return bsp_maybe_apply(s, rt);
    }
    return hs_rt_compute(rt, o->worker, ps_batch(s, o->worker), 0);
  case HS_OP_ALLREDUCE:
    break;
  }
  return 0;
}

static int ps_on_cluster(void *state, hs_runtime *rt, const hs_cluster_obs *o) {
  ps_state *s = state;
  if (o->kind == HS_CHANGE_SLOWDOWN) return 0;
  if (s->mode == PS_BSP) {
    s->changed = 1; /* the round in flight finishes with the workers it started with */
    return 0;
  }
  int rc = ps_rebuild(s, rt);
  if (rc) return rc;
  if (s->mode == PS_SSP) {
    if (o->kind == HS_CHANGE_JOIN) {
      s->ck.clock[o->worker] = s->ck.min;
      s->ck.blocked[o->worker] = 0;
    }
    if ((rc = ssp_members(s, rt))) return rc;
  }
  if (o->kind == HS_CHANGE_JOIN) return hs_rt_compute(rt, o->worker, ps_batch(s, o->worker), 0);
  return s->mode == PS_SSP ? ssp_release(s, rt) : 0;
}

static void ps_fini(void *state, hs_runtime *rt) {
  ps_state *s = state;
  hs_pol_group_free(&s->g);
  hs_pol_clocks_free(&s->ck);
}

static int bsp_init(void *state, hs_runtime *rt, const hs_params *p) {
  return ps_init_common(state, PS_BSP);
}
static int asp_init(void *state, hs_runtime *rt, const hs_params *p) {
  return ps_init_common(state, PS_ASP);
}
static int ssp_init(void *state, hs_runtime *rt, const hs_params *p) {
  ps_state *s = state;
  s->staleness = (int)hs_params_get(p, "s");
  return ps_init_common(s, PS_SSP);
}

static const hs_param_spec no_params[] = {{NULL, 0, NULL, 0, 0, NULL, NULL}};
static const hs_param_spec ssp_params[] = {
    {"s", HS_PARAM_INT, "3", 0, 1e9, NULL,
     "staleness bound: a worker may be at most s clocks ahead of the slowest"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

const hs_policy hs_policy_ps_bsp = {
    .version = HS_POLICY_VERSION,
    .name = "ps-bsp",
    .description = "parameter server, bulk synchronous: all push, the server applies one update, all pull",
    .source = "parameter server (Li et al., OSDI 2014) run as BSP",
    .params = no_params,
    .state_size = sizeof(ps_state),
    .init = bsp_init,
    .start = ps_start,
    .on_compute = ps_on_compute,
    .on_comm = ps_on_comm,
    .on_cluster = ps_on_cluster,
    .fini = ps_fini,
};

const hs_policy hs_policy_asp = {
    .version = HS_POLICY_VERSION,
    .name = "asp",
    .description = "asynchronous parameter server: each push is applied on arrival, the worker pulls and goes on",
    .source = "asynchronous parallel SGD on a parameter server (Dean et al., NIPS 2012; Li et al., OSDI 2014)",
    .params = no_params,
    .state_size = sizeof(ps_state),
    .init = asp_init,
    .start = ps_start,
    .on_compute = ps_on_compute,
    .on_comm = ps_on_comm,
    .on_cluster = ps_on_cluster,
    .fini = ps_fini,
};

const hs_policy hs_policy_ssp = {
    .version = HS_POLICY_VERSION,
    .name = "ssp",
    .description = "stale synchronous parallel: asynchronous pushes, but no worker runs more than s clocks ahead of the slowest",
    .source = "Ho et al., More effective distributed ML via a stale synchronous parallel parameter server (NIPS 2013)",
    .params = ssp_params,
    .state_size = sizeof(ps_state),
    .init = ssp_init,
    .start = ps_start,
    .on_compute = ps_on_compute,
    .on_comm = ps_on_comm,
    .on_cluster = ps_on_cluster,
    .fini = ps_fini,
};
