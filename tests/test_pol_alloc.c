/* Allocation policies through the simulator: alloc-static and alloc-adaptive (proportional
 * shares, a slowdown, a worker replaced and one added), predbatch and dbs. The cluster has
 * no fixed cost per step (t0 = 0), so proportional shares balance exactly and every answer
 * can be worked out by hand. */
#include <stdlib.h>

#include "core/core_config.h"
#include "core/core_rng.h"
#include "policies/pol_registry.h"
#include "sim/sim_run.h"
#include "tests/hs_test.h"

#define M_BYTES 4e6

enum { MAXW = 8, MAXIT = 4096 };

typedef struct simrun {
  hs_cluster_spec spec;
  hs_params params;
  hs_sim_result res;
  int rc;
  hs_diag d;
  /* batch of each worker's k-th step */
  int n_steps[MAXW];
  int batch[MAXW][MAXIT];
  double start[MAXW][MAXIT];
} simrun;

static int sink(void *ctx, const hs_step_row *row, hs_diag *d) {
  simrun *r = ctx;
  if (row->worker < MAXW && r->n_steps[row->worker] < MAXIT) {
    int k = r->n_steps[row->worker]++;
    r->batch[row->worker][k] = row->batch;
    r->start[row->worker][k] = row->start_s;
  }
  return 0;
}

static simrun *simulate(const char *yaml, const char *policy, int64_t B, int64_t iters) {
  simrun *r = calloc(1, sizeof *r);
  r->rc = hs_cluster_parse(&r->spec, "test.yaml", yaml, strlen(yaml), &r->d);
  if (r->rc) {
    fprintf(stderr, "  cluster: %s\n", r->d.msg);
    return r;
  }
  const hs_policy *pol;
  r->rc = hs_policy_parse(policy, &pol, &r->params, &r->d);
  if (r->rc) return r;
  hs_sim_config cfg = {.cluster = &r->spec, .model = "m", .grad_bytes = M_BYTES,
                       .param_bytes = M_BYTES, .dataset_size = 50000, .global_batch = B,
                       .policy = pol, .params = &r->params, .seed = 3, .max_iterations = iters,
                       .sink = sink, .sink_ctx = r};
  r->rc = hs_sim_run(&cfg, &r->res, &r->d);
  if (r->rc) fprintf(stderr, "  %s: %s\n", policy, r->d.msg);
  return r;
}

static void simrun_free(simrun *r) {
  hs_sim_result_free(&r->res);
  hs_cluster_spec_free(&r->spec);
  free(r);
}

static int last_batch(const simrun *r, int w) { return r->n_steps[w] ? r->batch[w][r->n_steps[w] - 1] : 0; }

/* Worker 0 computes 1 ms per sample, worker 1 3 ms. */
static const char *TWO =
    "name: two\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "device_types:\n"
    "  fast: {compute: {t0: 0s, per_sample: 1ms}}\n"
    "  slow: {compute: {t0: 0s, per_sample: 3ms}}\n"
    "nodes:\n"
    "  - {name: n0, link: {bandwidth: 10GB/s, latency: 5us}, devices: [{type: fast}, {type: slow}]}\n";

static const char *TWO_SLOWDOWN =
    "name: two\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "device_types:\n"
    "  fast: {compute: {t0: 0s, per_sample: 1ms}}\n"
    "  slow: {compute: {t0: 0s, per_sample: 3ms}}\n"
    "nodes:\n"
    "  - {name: n0, link: {bandwidth: 10GB/s, latency: 5us}, devices: [{type: fast}, {type: slow}]}\n"
    "events:\n"
    "  - {at: 1s, worker: 0, slowdown: 3.0}\n";

static void test_static_proportional(void) {
  simrun *r = simulate(TWO, "alloc-static", 64, 20);
  ASSERT_EQ(r->rc, 0);
  /* Speeds 1000 and 333.3 samples/s: 48/16, both 48 ms. */
  for (int k = 0; k < r->n_steps[0]; k++) ASSERT_EQ(r->batch[0][k], 48);
  for (int k = 0; k < r->n_steps[1]; k++) ASSERT_EQ(r->batch[1][k], 16);
  double ring = 2.0 * 1 * (5e-6 + M_BYTES / (2 * 10e9));
  ASSERT_REL(r->res.summary.mean_iteration_s, 0.048 + ring, 1e-12);
  simrun_free(r);
}

static void test_adaptive_reacts_to_slowdown(void) {
  simrun *s = simulate(TWO_SLOWDOWN, "alloc-static", 64, 120);
  simrun *a = simulate(TWO_SLOWDOWN, "alloc-adaptive", 64, 120);
  ASSERT_EQ(s->rc, 0);
  ASSERT_EQ(a->rc, 0);
  /* Static keeps 48/16 although worker 0 now takes 3 ms per sample: 144 ms steps. */
  ASSERT_EQ(last_batch(s, 0), 48);
  ASSERT_EQ(last_batch(s, 1), 16);
  /* Adaptive starts the same ... */
  ASSERT_EQ(a->batch[0][0], 48);
  /* ... and once the moving average has seen the slowdown, both workers are equal: 32/32. */
  ASSERT_EQ(last_batch(a, 0), 32);
  ASSERT_EQ(last_batch(a, 1), 32);
  /* Before the slowdown it never moved (its measured speeds matched the model). */
  for (int k = 0; k < a->n_steps[0] && a->start[0][k] < 1.0; k++) ASSERT_EQ(a->batch[0][k], 48);
  ASSERT(a->res.summary.sim_time_s < 0.8 * s->res.summary.sim_time_s);
  simrun_free(s);
  simrun_free(a);
}

/* Worker 1 (slow) is replaced by a fast one at 1 s; a slow worker is added at 2 s. */
static const char *REPLACE =
    "name: replace\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "device_types:\n"
    "  fast: {compute: {t0: 0s, per_sample: 1ms}}\n"
    "  slow: {compute: {t0: 0s, per_sample: 3ms}}\n"
    "nodes:\n"
    "  - {name: n0, link: {bandwidth: 10GB/s, latency: 5us}, devices: [{type: fast}, {type: slow}]}\n"
    "events:\n"
    "  - {at: 1s, leave: 1}\n"
    "  - {at: 1s, join: {type: fast, node: n0}}\n"
    "  - {at: 2s, join: {type: slow, node: n0}}\n";

static void check_replace(const char *policy) {
  simrun *r = simulate(REPLACE, policy, 70, 100);
  ASSERT_EQ(r->rc, 0);
  ASSERT_EQ(r->res.n_workers, 4);
  /* Start: 1000 and 333.3 samples/s, B = 70: 52.5/17.5 -> 53/17 (the extra sample goes to
   * the lower index on a tie of finishing times). */
  ASSERT_EQ(r->batch[0][0], 53);
  ASSERT_EQ(r->batch[1][0], 17);
  /* The departed worker starts nothing after 1 s. */
  for (int k = 0; k < r->n_steps[1]; k++) ASSERT(r->start[1][k] < 1.0);
  /* Between the replacement and the addition: two fast workers, 35/35. */
  int seen = 0;
  for (int k = 0; k < r->n_steps[2]; k++)
    if (r->start[2][k] < 2.0) {
      ASSERT_EQ(r->batch[2][k], 35);
      seen++;
    }
  ASSERT(seen > 0);
  /* At the end: 1000, 1000, 333.3 samples/s, B = 70: T = 30 ms gives 30/30/10. */
  ASSERT_EQ(last_batch(r, 0), 30);
  ASSERT_EQ(last_batch(r, 2), 30);
  ASSERT_EQ(last_batch(r, 3), 10);
  simrun_free(r);
}

static void test_static_replace_and_join(void) { check_replace("alloc-static"); }
static void test_adaptive_replace_and_join(void) { check_replace("alloc-adaptive"); }

static void test_predbatch(void) {
  /* predictor=last: the first iteration splits evenly (32/32: 32 and 96 ms); from the second
   * on, batches follow the measured speeds: 48/16. */
  simrun *r = simulate(TWO, "predbatch:predictor=last", 64, 10);
  ASSERT_EQ(r->rc, 0);
  ASSERT_EQ(r->batch[0][0], 32);
  for (int k = 1; k < r->n_steps[0]; k++) ASSERT_EQ(r->batch[0][k], 48);
  simrun_free(r);
  /* Every predictor finds 48/16 on this steady cluster, and follows the slowdown to 32/32. */
  const char *preds[] = {"predbatch:predictor=last", "predbatch:predictor=ema",
                         "predbatch:predictor=holt", "predbatch:predictor=gru"};
  for (int p = 0; p < 4; p++) {
    r = simulate(TWO_SLOWDOWN, preds[p], 64, 150);
    ASSERT_EQ(r->rc, 0);
    int k = 0;
    while (k + 1 < r->n_steps[0] && r->start[0][k + 1] < 1.0) k++;
    if (r->batch[0][k] != 48) HS_FAIL_AT("%s: %d before the slowdown", preds[p], r->batch[0][k]);
    if (last_batch(r, 0) != 32) HS_FAIL_AT("%s: %d at the end", preds[p], last_batch(r, 0));
    simrun_free(r);
  }
  /* every=5: the first re-solve is after iteration 5. */
  r = simulate(TWO, "predbatch:predictor=last,every=5", 64, 10);
  for (int k = 0; k < 5; k++) ASSERT_EQ(r->batch[0][k], 32);
  ASSERT_EQ(r->batch[0][5], 48);
  simrun_free(r);
}

static void test_dbs(void) {
  /* Period of 5 iterations: 32/32 (DBS starts even), then ∝ measured throughput 48/16. */
  simrun *r = simulate(TWO, "dbs:every=5", 64, 12);
  ASSERT_EQ(r->rc, 0);
  for (int k = 0; k < 5; k++) ASSERT_EQ(r->batch[0][k], 32);
  for (int k = 5; k < r->n_steps[0]; k++) ASSERT_EQ(r->batch[0][k], 48);
  simrun_free(r);
  /* It re-splits after a slowdown, one period later. */
  r = simulate(TWO_SLOWDOWN, "dbs:every=5", 64, 120);
  ASSERT_EQ(last_batch(r, 0), 32);
  simrun_free(r);
  r = simulate(REPLACE, "dbs:every=5", 70, 100);
  ASSERT_EQ(r->rc, 0);
  ASSERT_EQ(last_batch(r, 0) + last_batch(r, 2) + last_batch(r, 3), 70);
  ASSERT_EQ(last_batch(r, 3), 10);
  simrun_free(r);
}

static void test_determinism_with_jitter(void) {
  static const char *jit =
      "name: jit\n"
      "device_types:\n"
      "  a: {compute: {t0: 2ms, per_sample: 1ms}}\n"
      "  b: {compute: {t0: 4ms, per_sample: 2ms}}\n"
      "nodes:\n"
      "  - {devices: [{type: a, count: 2}, {type: b, count: 2}]}\n"
      "jitter: {cv: 0.2}\n";
  const char *pols[] = {"lbb", "lbcal", "predbatch:predictor=gru", "predbatch:predictor=holt",
                        "dbs:every=3", "alloc-static", "alloc-adaptive"};
  for (int p = 0; p < 7; p++) {
    simrun *a = simulate(jit, pols[p], 128, 40), *b = simulate(jit, pols[p], 128, 40);
    ASSERT_EQ(a->rc, 0);
    ASSERT_EQ(b->rc, 0);
    if (memcmp(a->batch, b->batch, sizeof a->batch) || a->res.summary.sim_time_s != b->res.summary.sim_time_s)
      HS_FAIL_AT("%s: same seed, different runs", pols[p]);
    /* Every iteration's batches sum to the global batch. */
    int n = a->n_steps[0];
    for (int w = 1; w < 4; w++) n = a->n_steps[w] < n ? a->n_steps[w] : n;
    for (int k = 0; k < n; k++)
      if (a->batch[0][k] + a->batch[1][k] + a->batch[2][k] + a->batch[3][k] != 128)
        HS_FAIL_AT("%s: step %d batches do not sum to 128", pols[p], k);
    simrun_free(a);
    simrun_free(b);
  }
}

static void test_memory_limit_respected(void) {
  static const char *lim =
      "name: lim\n"
      "device_types:\n"
      "  big: {max_batch: 100, compute: {t0: 0s, per_sample: 1ms}}\n"
      "  tiny: {max_batch: 10, compute: {t0: 0s, per_sample: 0.5ms}}\n"
      "nodes:\n"
      "  - {devices: [{type: big}, {type: tiny}]}\n";
  /* tiny is the faster but holds 10 samples: 80/10 instead of 30/60. */
  const char *pols[] = {"lbb", "alloc-static", "alloc-adaptive", "predbatch", "dbs:every=2"};
  for (int p = 0; p < 5; p++) {
    simrun *r = simulate(lim, pols[p], 90, 6);
    if (r->rc) HS_FAIL_AT("%s: %s", pols[p], r->d.msg);
    for (int k = 0; k < r->n_steps[1]; k++) ASSERT(r->batch[1][k] <= 10);
    simrun_free(r);
  }
  simrun *r = simulate(lim, "alloc-static", 120, 6);
  ASSERT_EQ(r->rc, HS_EINVAL);
  ASSERT_CONTAINS(r->d.msg, "hold 110 samples");
  simrun_free(r);
}

static const hs_test_case cases[] = {
    {"static_proportional", test_static_proportional},
    {"adaptive_reacts_to_slowdown", test_adaptive_reacts_to_slowdown},
    {"static_replace_and_join", test_static_replace_and_join},
    {"adaptive_replace_and_join", test_adaptive_replace_and_join},
    {"predbatch", test_predbatch},
    {"dbs", test_dbs},
    {"determinism_with_jitter", test_determinism_with_jitter},
    {"memory_limit_respected", test_memory_limit_respected},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  hs_gsl_init();
  return hs_test_main("pol_alloc", cases, argc, argv);
}
