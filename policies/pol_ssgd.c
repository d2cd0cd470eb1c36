/* ssgd: synchronous data-parallel SGD (BSP) with ring or hierarchical all-reduce.
 *
 * Every active worker computes a step on its share of the global batch; the gradients are
 * all-reduced with weights b_i/B and every replica applies the same update. With overlap=1 the
 * all-reduce is issued together with the steps and runs in buckets as the backward passes
 * produce gradients (PyTorch DDP's bucketing). Membership changes take effect at the next
 * iteration. */
#include "policies/pol_registry.h"

enum { P_OVERLAP, P_BUCKET, P_ALGO, P_FWD };

static const hs_param_spec ssgd_params[] = {
    [P_OVERLAP] = {"overlap", HS_PARAM_BOOL, "0", 0, 1, NULL,
                   "all-reduce gradient buckets during the backward pass"},
    [P_BUCKET] = {"bucket", HS_PARAM_BYTES, "25MiB", 1, 1e15, NULL, "bucket size for overlap"},
    [P_ALGO] = {"algo", HS_PARAM_ENUM, "ring", 0, -1, "ring|hier",
                "all-reduce algorithm: ring, or hierarchical over nodes"},
    [P_FWD] = {"fwd_fraction", HS_PARAM_DOUBLE, "0.3333333333333333", 0.0, 0.99, NULL,
               "share of a step spent in the forward pass (overlap only)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

typedef struct ssgd_state {
  hs_pol_group g;
  hs_comm_opts opts;
  int done;          /* workers whose step finished this iteration */
  int changed;       /* membership changed: rebuild the group before the next iteration */
  uint64_t iter;
} ssgd_state;

static int ssgd_init(void *state, hs_runtime *rt, const hs_params *p) {
  ssgd_state *s = state;
  s->opts.what = HS_COMM_GRAD;
  s->opts.algo = (hs_ar_algo)p->value[P_ALGO];
  s->opts.overlap = p->value[P_OVERLAP] != 0;
  s->opts.bucket_bytes = p->value[P_BUCKET];
  s->opts.fwd_fraction = p->value[P_FWD];
  return 0;
}

static int ssgd_round(ssgd_state *s, hs_runtime *rt) {
  s->done = 0;
  for (int i = 0; i < s->g.n; i++) {
    int rc = hs_rt_compute(rt, s->g.ws[i], s->g.batch[i], s->iter);
    if (rc) return rc;
  }
  if (s->opts.overlap) return hs_rt_allreduce(rt, s->g.ws, s->g.n, NULL, &s->opts);
  return 0;
}

static int ssgd_start(void *state, hs_runtime *rt) {
  ssgd_state *s = state;
  int rc = hs_pol_group_even(&s->g, rt);
  return rc ? rc : ssgd_round(s, rt);
}

static int ssgd_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  ssgd_state *s = state;
  if (++s->done < s->g.n || s->opts.overlap) return 0;
  return hs_rt_allreduce(rt, s->g.ws, s->g.n, NULL, &s->opts);
}

static int ssgd_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  ssgd_state *s = state;
  s->iter++;
  if (s->changed) {
    s->changed = 0;
    int rc = hs_pol_group_even(&s->g, rt);
    if (rc) return rc;
  }
  return ssgd_round(s, rt);
}

static int ssgd_on_cluster(void *state, hs_runtime *rt, const hs_cluster_obs *o) {
  ssgd_state *s = state;
  if (o->kind != HS_CHANGE_SLOWDOWN) s->changed = 1;
  return 0;
}

static void ssgd_fini(void *state, hs_runtime *rt) {
  ssgd_state *s = state;
  hs_pol_group_free(&s->g);
}

const hs_policy hs_policy_ssgd = {
    .version = HS_POLICY_VERSION,
    .name = "ssgd",
    .description = "synchronous SGD: every worker computes, gradients are all-reduced (ring or hierarchical), optional bucketed overlap",
    .source = "bulk-synchronous data parallel SGD; ring all-reduce; PyTorch DDP gradient bucketing",
    .params = ssgd_params,
    .state_size = sizeof(ssgd_state),
    .init = ssgd_init,
    .start = ssgd_start,
    .on_compute = ssgd_on_compute,
    .on_comm = ssgd_on_comm,
    .on_cluster = ssgd_on_cluster,
    .fini = ssgd_fini,
};
