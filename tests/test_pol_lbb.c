/* lbb and lbcal tests. Decisions are checked on a scripted runtime (a mock that reports each
 * step's duration from a line times a slowdown the test sets, with no network), so that every
 * fine-tune, rapid-tune and all-reduce weight can be compared with a hand-computed answer;
 * then whole runs go through the simulator on the lbb-4gpu cluster. */
#include <stdlib.h>

#include "core/core_config.h"
#include "core/core_rng.h"
#include "policies/pol_registry.h"
#include "sim/sim_run.h"
#include "tests/hs_test.h"

/* --- a scripted runtime ----------------------------------------------------------------- */

enum { MW = 4 };

typedef struct mock {
  hs_runtime rt;
  int n;
  int64_t B;
  double t0[MW], k[MW], slow[MW]; /* step time = slow * (t0 + k b), s */
  double noise[MW];               /* measured step time = (1 + noise) * step time */
  int batch[MW], computing[MW];
  int ar_calls, ar_n, ar_ws[MW];
  double ar_w[MW];
  hs_diag d;
} mock;

static mock *M(hs_runtime *rt) { return (mock *)rt; }
static double m_now(hs_runtime *rt) { return 0; }
static int m_n(hs_runtime *rt) { return M(rt)->n; }
static int m_active(hs_runtime *rt, int w) { return w >= 0 && w < M(rt)->n; }
static int64_t m_B(hs_runtime *rt) { return M(rt)->B; }
static int m_cap(hs_runtime *rt, int w) { return 0; }
static double m_predict(hs_runtime *rt, int w, int b) {
  mock *m = M(rt);
  return m->slow[w] * (m->t0[w] + m->k[w] * b);
}
static uint64_t m_version(hs_runtime *rt) { return 0; }
static uint64_t m_wversion(hs_runtime *rt, int w) { return 0; }
static uint64_t m_seed(hs_runtime *rt) { return 1; }
static int m_compute(hs_runtime *rt, int w, int b, uint64_t tag) {
  mock *m = M(rt);
  m->batch[w] = b;
  m->computing[w] = 1;
  return 0;
}
static int m_local(hs_runtime *rt, int w) { return 0; }
static int m_allreduce(hs_runtime *rt, const int *ws, int n, const double *w, const hs_comm_opts *o) {
  mock *m = M(rt);
  m->ar_calls++;
  m->ar_n = n;
  for (int i = 0; i < n; i++) m->ar_ws[i] = ws[i], m->ar_w[i] = w ? w[i] : NAN;
  return 0;
}
static int m_push(hs_runtime *rt, int w, const hs_comm_opts *o) { return HS_EUNSUPPORTED; }
static int m_apply(hs_runtime *rt, const hs_comm_opts *o) { return HS_EUNSUPPORTED; }
static int m_timer(hs_runtime *rt, double d, uint64_t tag) { return HS_EUNSUPPORTED; }
static int m_lr(hs_runtime *rt, int w, double lr) { return 0; }
static hs_diag *m_diag(hs_runtime *rt) { return &M(rt)->d; }

static const hs_runtime_ops mock_ops = {
    .version = HS_RUNTIME_VERSION, .now = m_now, .n_workers = m_n, .active = m_active,
    .global_batch = m_B, .max_batch = m_cap, .predict_compute = m_predict,
    .model_version = m_version, .worker_version = m_wversion, .seed = m_seed,
    .compute = m_compute, .local_update = m_local, .allreduce = m_allreduce, .push = m_push,
    .apply = m_apply, .pull = m_push, .timer = m_timer, .set_lr = m_lr, .diag = m_diag,
};

/* Two workers, t = 10 ms + 1 ms b and 10 ms + 1.2 ms b, global batch 64. */
static void two_workers(mock *m) {
  m->n = 2;
  m->B = 64;
  m->t0[0] = m->t0[1] = 0.010;
  m->k[0] = 0.001;
  m->k[1] = 0.0012;
  m->slow[0] = m->slow[1] = 1;
}

typedef struct driven {
  mock m;
  const hs_policy *pol;
  hs_params params;
  void *state;
} driven;

/* The two-worker mock running `policy`, started. */
static int drive_open(driven *x, const char *policy) {
  memset(x, 0, sizeof *x);
  x->m.rt.ops = &mock_ops;
  two_workers(&x->m);
  if (hs_policy_parse(policy, &x->pol, &x->params, &x->m.d)) return -1;
  x->state = calloc(1, x->pol->state_size);
  if (x->pol->init(x->state, &x->m.rt, &x->params)) return -1;
  return x->pol->start(x->state, &x->m.rt);
}

/* One synchronous iteration: every computing worker finishes (in index order) after its
 * scripted time, then the all-reduce completes. */
static int drive_iteration(driven *x) {
  for (int w = 0; w < x->m.n; w++) {
    if (!x->m.computing[w]) continue;
    x->m.computing[w] = 0;
    double t = m_predict(&x->m.rt, w, x->m.batch[w]) * (1 + x->m.noise[w]);
    hs_step_obs o = {.worker = w, .batch = x->m.batch[w], .duration = t, .end = t, .loss = NAN};
    int rc = x->pol->on_compute(x->state, &x->m.rt, &o);
    if (rc) return rc;
  }
  hs_comm_obs c = {.kind = HS_OP_ALLREDUCE, .worker = -1};
  return x->pol->on_comm(x->state, &x->m.rt, &c);
}

static void drive_close(driven *x) {
  x->pol->fini(x->state, &x->m.rt);
  free(x->state);
}

static void test_fine_tune_one_sample(void) {
  /* static=0: start from 32/32. t = 42 ms and 48.4 ms: SE = 6.4/45.2 = 0.142, in
   * [0.05, 0.3): one sample moves from the slow worker to the fast one. At 33/31: 43 and
   * 47.2 ms, SE = 0.093: again. At 34/30: 44 and 46 ms, SE = 0.044 < 0.05: stays. */
  driven x;
  ASSERT_EQ(drive_open(&x, "lbb:static=0"), 0);
  int expect0[6] = {32, 33, 34, 34, 34, 34};
  for (int it = 0; it < 6; it++) {
    ASSERT_EQ(x.m.batch[0], expect0[it]);
    ASSERT_EQ(x.m.batch[0] + x.m.batch[1], 64);
    ASSERT_EQ(drive_iteration(&x), 0);
    /* The gradients of this iteration were weighted b_i / B. */
    ASSERT_EQ(x.m.ar_n, 2);
    ASSERT_NEAR(x.m.ar_w[0], expect0[it] / 64.0, 1e-15);
    ASSERT_NEAR(x.m.ar_w[1], (64 - expect0[it]) / 64.0, 1e-15);
  }
  ASSERT_EQ(x.m.ar_calls, 6);
  drive_close(&x);
}

static void test_static_solve_then_quiet(void) {
  driven x;
  ASSERT_EQ(drive_open(&x, "lbb"), 0);
  /* Profiled lines are exact: 10 + b = 10 + 1.2 (64 - b) -> b = 34.9; 35/29 gives 45 and
   * 44.8 ms, 34/30 gives 44 and 46: the solve picks 35/29, and nothing moves after. */
  for (int it = 0; it < 40; it++) {
    ASSERT_EQ(x.m.batch[0], 35);
    ASSERT_EQ(x.m.batch[1], 29);
    ASSERT_EQ(drive_iteration(&x), 0);
  }
  drive_close(&x);
}

/* Rapid-tune: worker 1 slows 3x before iteration 20, worker 0 4x before iteration 45. */
static void rapid_scenario(const char *policy) {
  driven x;
  ASSERT_EQ(drive_open(&x, policy), 0);
  int prev = x.m.batch[0], jumps[8], nj = 0;
  for (int it = 0; it < 100; it++) {
    if (it == 20) x.m.slow[1] = 3;
    if (it == 45) x.m.slow[0] = 4;
    int b0 = x.m.batch[0];
    ASSERT_EQ(b0 + x.m.batch[1], 64);
    if (abs(b0 - prev) > 1 && nj < 8) jumps[nj++] = it;
    /* Before the first slowdown the static solve holds (35/29); then fine-tunes move one
     * sample per iteration while SE >= 0.3 waits for the rapid-tune. */
    if (it < 21) ASSERT_EQ(b0, 35);
    else if (it < 30) ASSERT_EQ(b0, 35 + (it - 20));
    /* At 44/20 (54 and 102 ms, SE = 0.62) the rapid-tune comes at the end of iteration 29,
     * 30 iterations after the static solve: lines refitted to 10 + b and 30 + 3.6 b; 55/9
     * gives 65 and 62.4 ms (54/10: 64 and 66), SE = 0.04: quiet. */
    else if (it < 46) ASSERT_EQ(b0, 55);
    /* Worker 0 slowed 4x: fine-tunes again (SE stays above 0.3: at 41/23, 204 and 112.8 ms),
     * the next rapid-tune only at the end of iteration 59: 40 + 4 b = 30 + 3.6 (64 - b) at
     * b = 29 exactly (156 ms each). */
    else if (it < 60) ASSERT_EQ(b0, 55 - (it - 45));
    else ASSERT_EQ(b0, 29);
    prev = b0;
    ASSERT_EQ(drive_iteration(&x), 0);
  }
  ASSERT_EQ(nj, 2);
  if (nj == 2) {
    ASSERT_EQ(jumps[0], 30);
    ASSERT_EQ(jumps[1], 60);
  }
  drive_close(&x);
}

static void test_rapid_tune_rescale(void) { rapid_scenario("lbb"); }
/* With min_spread=1 the refit is least squares over the window (all measured after the
 * slowdown, noise-free): the same lines, the same decisions. */
static void test_rapid_tune_least_squares(void) { rapid_scenario("lbb:min_spread=1"); }

/* Noise that happens to fall while the batch grows: in the rapid scenario's first window
 * (iterations 22-29, batches 37-44) worker 0's measured times carry +9%, +6%, ..., -12%, so
 * they fall from 51.2 to 47.5 ms while its true line 10 + b rises. Returns worker 0's batch
 * after the rapid-tune at the end of iteration 29. */
static int noisy_rapid_tune(const char *policy) {
  driven x;
  ASSERT_EQ(drive_open(&x, policy), 0);
  for (int it = 0; it < 30; it++) {
    if (it == 20) x.m.slow[1] = 3;
    x.m.noise[0] = it >= 22 ? 0.09 - 0.03 * (it - 22) : 0;
    ASSERT_EQ(x.m.batch[0], it < 21 ? 35 : 35 + (it - 20));
    ASSERT_EQ(drive_iteration(&x), 0);
  }
  int b0 = x.m.batch[0];
  drive_close(&x);
  return b0;
}

/* The window's least-squares slope is negative (held at 1e-12 s per sample: a flat line, as
 * if worker 0 took any batch in the same time) and its standard error far above
 * max_slope_error, so the line is rescaled through the latest measurement instead:
 * 0.88 (10 + b), and 8.8 + 0.88 b = 30 + 3.6 (64 - b) at b = 56.2: 56/8 (58.1 and 58.8 ms).
 * Without the check (the rule before max_slope_error) the flat line at the window's mean,
 * 49.6 ms, takes all but the 5 samples worker 1 computes within it (30 + 3.6 b <= 49.6):
 * 59/5. */
static void test_rapid_tune_noisy_window(void) {
  ASSERT_EQ(noisy_rapid_tune("lbb:min_spread=1"), 56);
  ASSERT_EQ(noisy_rapid_tune("lbb:min_spread=1,max_slope_error=1e9"), 59);
}

/* smooth: one outlying step (worker 0 takes 1.5x its time in iteration 40 only). LBB's rule
 * (smooth=1) takes it for a slowdown: SE = (67.5 - 44.8) / 56.15 = 0.40, 41 iterations after
 * the static solve, so a rapid-tune rescales worker 0's line through it, 15 + 1.5 b, and
 * 15 + 1.5 b = 10 + 1.2 (64 - b) at b = 26.6 gives 27/37 (55.5 and 54.4 ms on the lines, 37
 * and 54.4 ms in truth). With smooth=8 the medians of the last 8 relative times stay 45/44.9
 * and 44.8/44.9 (SE 0.004): nothing moves. */
static int outlier_batch(const char *policy, int *at41) {
  driven x;
  ASSERT_EQ(drive_open(&x, policy), 0);
  for (int it = 0; it < 60; it++) {
    x.m.noise[0] = it == 40 ? 0.5 : 0;
    if (it == 41) *at41 = x.m.batch[0];
    if (it < 41) ASSERT_EQ(x.m.batch[0], 35);
    ASSERT_EQ(drive_iteration(&x), 0);
  }
  int b0 = x.m.batch[0];
  drive_close(&x);
  return b0;
}

static void test_smooth_ignores_one_outlier(void) {
  int at41 = -1;
  outlier_batch("lbb", &at41);
  ASSERT_EQ(at41, 27);
  ASSERT_EQ(outlier_batch("lbb:smooth=8", &at41), 35);
  ASSERT_EQ(at41, 35);
}

/* smooth=8 follows the rapid scenario's lasting slowdowns, later and in fewer moves. Worker 1
 * slowed 3x from iteration 20: the medians of 8 relative times flip once 4 of the 8 are slow
 * (even count: the mean of the middle two, 0.752 and 1.248 at the end of iteration 23, SE
 * 0.50), 24 iterations after the solve, too soon for a rapid-tune: one sample moves (36/28)
 * and the relative times start again. Eight iterations later (end of 31, 32 >= 30 after the
 * solve) SE = (130.8 - 46) / 88.4 = 0.96: rapid-tune, each line rescaled by its window's
 * median ratio, 1 and 3, as in the rapid scenario: 55/9. Worker 0 slowed 4x from iteration
 * 45: the medians flip at the end of 48 (fine-tune, 54), again at the end of 56 (53; 25
 * iterations after the last rapid-tune), and at the end of 64 (33 after it) the rapid-tune
 * rescales worker 0's line by 4 (252 / 63 ms) and worker 1's by 1: 29, as before. */
static void test_smooth_follows_slowdowns(void) {
  driven x;
  ASSERT_EQ(drive_open(&x, "lbb:smooth=8"), 0);
  for (int it = 0; it < 100; it++) {
    if (it == 20) x.m.slow[1] = 3;
    if (it == 45) x.m.slow[0] = 4;
    int want = it < 24 ? 35 : it < 32 ? 36 : it < 49 ? 55 : it < 57 ? 54 : it < 65 ? 53 : 29;
    ASSERT_EQ(x.m.batch[0], want);
    ASSERT_EQ(x.m.batch[0] + x.m.batch[1], 64);
    ASSERT_EQ(drive_iteration(&x), 0);
  }
  drive_close(&x);
}

static void test_params_errors(void) {
  const hs_policy *pol;
  hs_params p;
  hs_diag d = {0};
  ASSERT_EQ(hs_policy_parse("lbb:se_low=abc", &pol, &p, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "se_low");
  ASSERT_EQ(hs_policy_parse("lbb:rapid_every=0", &pol, &p, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "rapid_every");
  ASSERT_EQ(hs_policy_parse("lbb:smooth=0", &pol, &p, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "smooth");
  ASSERT_EQ(hs_policy_parse("lbcal:overlap=maybe", &pol, &p, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "overlap");
  ASSERT_EQ(hs_policy_parse("predbatch:predictor=arima", &pol, &p, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "predictor");
  ASSERT_EQ(hs_policy_parse("lbb:se_low=0.5,se_high=0.2", &pol, &p, &d), 0);
  driven x;
  memset(&x, 0, sizeof x);
  x.m.rt.ops = &mock_ops;
  two_workers(&x.m);
  void *st = calloc(1, pol->state_size);
  ASSERT_EQ(pol->init(st, &x.m.rt, &p), HS_EINVAL);
  ASSERT_CONTAINS(x.m.d.msg, "se_low");
  pol->fini(st, &x.m.rt);
  free(st);
}

/* --- through the simulator -------------------------------------------------------------- */

#define M_BYTES 44695848.0 /* resnet18's fp32 gradient */

static const char *LBB4 =
    "name: lbb-4gpu\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "device_types:\n"
    "  gtx1070: {memory: 8GiB, compute: {t0: 3ms, per_sample: 0.52ms}}\n"
    "  m40:     {memory: 12GiB, compute: {t0: 3ms, per_sample: 0.50ms}}\n"
    "  gtx750:  {memory: 2GiB, compute: {t0: 5ms, per_sample: 3.1ms}}\n"
    "nodes:\n"
    "  - name: server0\n"
    "    link: {bandwidth: 12GB/s, latency: 5us}\n"
    "    devices: [{type: gtx1070, count: 2}, {type: m40}, {type: gtx750}]\n";

typedef struct simrun {
  hs_cluster_spec spec;
  hs_params params;
  hs_sim_result res;
  int rc;
  hs_diag d;
  int64_t rows, bad_sum;
  int64_t batch_sum[4096];
  int last_batch[8];
} simrun;

static int sink(void *ctx, const hs_step_row *row, hs_diag *d) {
  simrun *r = ctx;
  r->rows++;
  if (row->worker < 8) r->last_batch[row->worker] = row->batch;
  return 0;
}

static void simulate(simrun *r, const char *yaml, const char *policy, int64_t B, int64_t iters) {
  memset(r, 0, sizeof *r);
  r->rc = hs_cluster_parse(&r->spec, "test.yaml", yaml, strlen(yaml), &r->d);
  if (r->rc) return;
  const hs_policy *pol;
  r->rc = hs_policy_parse(policy, &pol, &r->params, &r->d);
  if (r->rc) return;
  hs_sim_config cfg = {.cluster = &r->spec, .model = "resnet18", .grad_bytes = M_BYTES,
                       .param_bytes = M_BYTES, .dataset_size = 50000, .global_batch = B,
                       .policy = pol, .params = &r->params, .seed = 1, .max_iterations = iters,
                       .sink = sink, .sink_ctx = r};
  r->rc = hs_sim_run(&cfg, &r->res, &r->d);
}

static void simrun_free(simrun *r) {
  hs_sim_result_free(&r->res);
  hs_cluster_spec_free(&r->spec);
}

static void test_sim_lbb_4gpu(void) {
  simrun a, b;
  simulate(&a, LBB4, "lbb", 512, 50);
  simulate(&b, LBB4, "ssgd", 512, 50);
  ASSERT_EQ(a.rc, 0);
  ASSERT_EQ(b.rc, 0);
  double ring = 2.0 * 3 * (5e-6 + M_BYTES / (4 * 12e9));
  /* The static solve [160, 160, 166, 26] (86.2 ms slowest) holds for the whole run: its SE
   * is (86.2 - 85.6) / 86.05 < 0.05. */
  int expect[4] = {160, 160, 166, 26};
  for (int w = 0; w < 4; w++) {
    ASSERT_EQ(a.res.workers[w].initial_batch, expect[w]);
    ASSERT_EQ(a.last_batch[w], expect[w]);
  }
  ASSERT_REL(a.res.summary.mean_iteration_s, 0.0862 + ring, 1e-12);
  /* Equal batches of 128: the GTX 750 takes 5 + 3.1 * 128 = 401.8 ms per step. */
  ASSERT_REL(b.res.summary.mean_iteration_s, 0.4018 + ring, 1e-12);
  simrun_free(&a);
  simrun_free(&b);
}

static const char *HOMO =
    "name: homo\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "device_types:\n"
    "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
    "nodes:\n"
    "  - {name: n0, link: {bandwidth: 12GB/s, latency: 5us}, devices: [{type: g, count: 4}]}\n";

/* Two nodes over 1 Gbps: the model average (2 · 3 · M/(4 β)) takes far longer than a step. */
static const char *SLOWNET =
    "name: slownet\n"
    "network: {bandwidth: 1Gbps, latency: 20us}\n"
    "device_types:\n"
    "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
    "nodes:\n"
    "  - {name: n0, link: {bandwidth: 1Gbps, latency: 20us}, devices: [{type: g, count: 2}]}\n"
    "  - {name: n1, link: {bandwidth: 1Gbps, latency: 20us}, devices: [{type: g, count: 2}]}\n";

static void test_sim_lbcal(void) {
  double t = 0.010 + 0.001 * 16, ring = 2.0 * 3 * (5e-6 + M_BYTES / (4 * 12e9));
  simrun r;
  /* Every part off: local SGD with LBB batches (even on a homogeneous cluster). */
  simulate(&r, HOMO, "lbcal:tau=5,adaptive=0,overlap=0,dynamic=0", 64, 4);
  ASSERT_EQ(r.rc, 0);
  ASSERT_EQ(r.rows, 4 * 4 * 5);
  ASSERT_REL(r.res.summary.mean_iteration_s, 5 * t + ring, 1e-12);
  simrun_free(&r);
  /* Overlap: the average of round r runs under round r+1's steps (ring < 5 t), so the k-th
   * average ends at k · 5t + ring. */
  simulate(&r, HOMO, "lbcal:tau=5,adaptive=0,overlap=1,dynamic=0", 64, 4);
  ASSERT_EQ(r.rc, 0);
  ASSERT_REL(r.res.summary.sim_time_s, 4 * 5 * t + ring, 1e-12);
  simrun_free(&r);
  /* adaptive=1 with no loss from the runtime: tau stays tau_0 (same rows as adaptive=0). */
  simulate(&r, HOMO, "lbcal:tau=5,adaptive=1,overlap=0,dynamic=0", 64, 4);
  ASSERT_EQ(r.rows, 4 * 4 * 5);
  simrun_free(&r);
  /* A slow network: the average takes longer than a round. Compensation keeps the steps
   * taken meanwhile; without it they are lost and training needs more steps. */
  simrun c, n;
  simulate(&c, SLOWNET, "lbcal:tau=2,adaptive=0,overlap=1,compensate=1,dynamic=0", 64, 6);
  simulate(&n, SLOWNET, "lbcal:tau=2,adaptive=0,overlap=1,compensate=0,dynamic=0", 64, 6);
  ASSERT_EQ(c.rc, 0);
  ASSERT_EQ(n.rc, 0);
  ASSERT(n.res.summary.samples > c.res.summary.samples);
  ASSERT(n.res.summary.sim_time_s > c.res.summary.sim_time_s);
  simrun_free(&c);
  simrun_free(&n);
}

static void test_sim_lbcal_balances(void) {
  simrun r, s;
  simulate(&r, LBB4, "lbcal:tau=4,adaptive=0,overlap=0", 512, 10);
  simulate(&s, LBB4, "localsgd:tau=4", 512, 10);
  ASSERT_EQ(r.rc, 0);
  int expect[4] = {160, 160, 166, 26};
  for (int w = 0; w < 4; w++) ASSERT_EQ(r.res.workers[w].initial_batch, expect[w]);
  double ring = 2.0 * 3 * (5e-6 + M_BYTES / (4 * 12e9));
  ASSERT_REL(r.res.summary.mean_iteration_s, 4 * 0.0862 + ring, 1e-12);
  ASSERT(s.res.summary.mean_iteration_s > 4 * r.res.summary.mean_iteration_s);
  simrun_free(&r);
  simrun_free(&s);
}

static const hs_test_case cases[] = {
    {"fine_tune_one_sample", test_fine_tune_one_sample},
    {"static_solve_then_quiet", test_static_solve_then_quiet},
    {"rapid_tune_rescale", test_rapid_tune_rescale},
    {"rapid_tune_least_squares", test_rapid_tune_least_squares},
    {"rapid_tune_noisy_window", test_rapid_tune_noisy_window},
    {"smooth_ignores_one_outlier", test_smooth_ignores_one_outlier},
    {"smooth_follows_slowdowns", test_smooth_follows_slowdowns},
    {"params_errors", test_params_errors},
    {"sim_lbb_4gpu", test_sim_lbb_4gpu},
    {"sim_lbcal", test_sim_lbcal},
    {"sim_lbcal_balances", test_sim_lbcal_balances},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  hs_gsl_init();
  return hs_test_main("pol_lbb", cases, argc, argv);
}
