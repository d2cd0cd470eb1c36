/* The analytic convergence model: its formulas against hand computations, monotone loss in
 * progress, each penalty lowering progress, parameter layering, and whole simulated runs with
 * closed-form losses and targets (conv-1.x formulas, conv-2.x driven model, conv-3.x runs). */
#include <stdlib.h>

#include "core/core_config.h"
#include "core/core_rng.h"
#include "policies/pol_registry.h"
#include "sim/sim_conv.h"
#include "sim/sim_run.h"
#include "tests/hs_test.h"

static hs_conv_coef coef(const char *spec) {
  const hs_conv_model *m;
  hs_params p;
  hs_diag d = {0};
  hs_conv_coef c = {0};
  int rc = hs_conv_parse(spec, "resnet18", NULL, &m, &p, &d);
  if (rc) HS_FAIL_AT("parse %s: %s", spec, d.msg);
  else hs_conv_coef_from(&p, &c);
  return c;
}

/* conv-1.1: the formulas, by hand. */
static void test_formulas(void) {
  hs_conv_coef c = coef("analytic:phi=1000,b0=128,beta0=3,beta1=0.5,beta2=0.2,lambda_s=0.1,"
                        "lambda_tau=0.05,lambda_c=0.2,acc_max=0.9,acc_alpha=2");
  ASSERT_NEAR(hs_conv_efficiency(&c, 128), 1.0, 1e-15);
  ASSERT_NEAR(hs_conv_efficiency(&c, 512), 1128.0 / 1512.0, 1e-15);
  ASSERT_NEAR(hs_conv_efficiency(&c, 32), 1128.0 / 1032.0, 1e-15); /* small batches gain */
  ASSERT_NEAR(hs_conv_stale_factor(&c, 0), 1.0, 1e-15);
  ASSERT_NEAR(hs_conv_stale_factor(&c, 3), 1.0 / 1.3, 1e-15);
  ASSERT_NEAR(hs_conv_local_factor(&c, 1), 1.0, 1e-15);
  ASSERT_NEAR(hs_conv_local_factor(&c, 5), 1.0 / 1.2, 1e-15);
  ASSERT_NEAR(hs_conv_compress_factor(&c, 0.01), 1.0 - 0.2 * 0.99, 1e-15);
  ASSERT_NEAR(hs_conv_compress_factor(&c, 1.0), 1.0, 1e-15);
  ASSERT_NEAR(hs_conv_loss(&c, 0), 1.0 / 0.5 + 0.2, 1e-15);
  ASSERT_NEAR(hs_conv_loss(&c, 2), 1.0 / 6.5 + 0.2, 1e-15);
  /* accuracy: 0.1 + 0.8 exp(-2 (l - 0.2)) */
  ASSERT_NEAR(hs_conv_accuracy(&c, 0.2, 10), 0.9, 1e-15);
  ASSERT_NEAR(hs_conv_accuracy(&c, 0.7, 10), 0.1 + 0.8 * exp(-1.0), 1e-15);
  hs_conv_coef n = coef("analytic");
  ASSERT(isnan(hs_conv_accuracy(&n, 0.5, 10))); /* no map configured */
}

/* conv-1.2: loss falls strictly with progress, towards beta2. */
static void test_monotone(void) {
  hs_conv_coef c = coef("analytic");
  double prev = hs_conv_loss(&c, 0);
  for (double k = 0.01; k < 1000; k *= 1.5) {
    double l = hs_conv_loss(&c, k);
    ASSERT(l < prev);
    ASSERT(l > c.beta2);
    prev = l;
  }
  c.acc_max = 0.9;
  c.acc_alpha = 3;
  double pa = 0;
  for (double l = 3; l > c.beta2; l -= 0.05) {
    double a = hs_conv_accuracy(&c, l, 10);
    ASSERT(a >= pa);
    pa = a;
  }
}

/* conv-1.3: parameters are layered (table, model defaults, file, spec) and checked. */
static void test_params(void) {
  const hs_conv_model *m;
  hs_params p;
  hs_diag d = {0};
  const char *f = hs_test_tmp("conv.params");
  FILE *fp = fopen(f, "w");
  fprintf(fp, "# fitted\nphi = 250\nbeta2=0.3\n\n");
  fclose(fp);
  ASSERT_EQ(hs_conv_parse("analytic:beta2=0.1", "mlp", f, &m, &p, &d), 0);
  ASSERT(m == &hs_conv_analytic);
  ASSERT_NEAR(hs_params_get(&p, "phi"), 250, 0);
  ASSERT_NEAR(hs_params_get(&p, "beta2"), 0.1, 0); /* the spec wins over the file */
  ASSERT_EQ(hs_conv_parse("analytic:nope=1", "mlp", NULL, &m, &p, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "valid: phi");
  ASSERT_EQ(hs_conv_parse("analytic:phi=1,phi=2", "mlp", NULL, &m, &p, &d), HS_EINVAL);
  ASSERT_EQ(hs_conv_parse("analytic:lambda_c=2", "mlp", NULL, &m, &p, &d), HS_EINVAL);
  ASSERT_EQ(hs_conv_parse("bogus", "mlp", NULL, &m, &p, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "analytic, proxy");
  fp = fopen(f, "w");
  fprintf(fp, "phi\n");
  fclose(fp);
  ASSERT_EQ(hs_conv_parse("analytic", "mlp", f, &m, &p, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, ":1: expected key=value");
  remove(f);
  ASSERT_EQ(hs_conv_parse("analytic", "mlp", "/nonexistent/conv.params", &m, &p, &d), HS_EIO);
}

/* A driven analytic model: init, n workers. */
typedef struct drv {
  void *st;
  hs_params p;
  hs_conv_coef c;
} drv;

static void drv_open(drv *v, const char *spec, int n) {
  const hs_conv_model *m;
  hs_diag d = {0};
  memset(v, 0, sizeof *v);
  ASSERT_EQ(hs_conv_parse(spec, "resnet18", NULL, &m, &v->p, &d), 0);
  hs_conv_coef_from(&v->p, &v->c);
  hs_conv_config c = {.model = "resnet18", .dataset_size = 50000, .classes = 10,
                      .global_batch = 512, .n_workers = n, .seed = 1, .params = &v->p};
  v->st = calloc(1, hs_conv_analytic.state_size);
  ASSERT_EQ(hs_conv_analytic.init(v->st, &c, &d), 0);
  for (int i = 0; i < n; i++) ASSERT_EQ(hs_conv_analytic.add_worker(v->st, i, &d), 0);
}

static double drv_loss(drv *v) {
  double l, a;
  hs_diag d = {0};
  ASSERT_EQ(hs_conv_analytic.evaluate(v->st, &l, &a, &d), 0);
  return l;
}

static void drv_close(drv *v) {
  hs_conv_analytic.fini(v->st);
  free(v->st);
}

/* Worker w steps with batch b and pushes its gradient, applied with `stale` staleness. */
static void push(drv *v, int w, int b, int stale) {
  hs_diag d = {0};
  double loss;
  hs_conv_op op = {.kind = HS_OP_PUSH, .what = HS_COMM_GRAD, .ps_mode = HS_PS_APPLY, .worker = w};
  ASSERT_EQ(hs_conv_analytic.step(v->st, w, b, &loss, &d), 0);
  ASSERT_EQ(hs_conv_analytic.begin(v->st, 7, &op, &d), 0);
  ASSERT_EQ(hs_conv_analytic.end(v->st, 7, stale, &d), 0);
}

/* conv-2.1: a stale push brings less progress than a fresh one, by exactly Ps. */
static void test_staleness_lowers_progress(void) {
  drv a, b;
  drv_open(&a, "analytic", 2);
  drv_open(&b, "analytic", 2);
  for (int i = 0; i < 20; i++) {
    push(&a, i % 2, 64, 0);
    push(&b, i % 2, 64, 4);
  }
  ASSERT(drv_loss(&b) > drv_loss(&a));
  double k = 20 * 64 * hs_conv_efficiency(&a.c, 64) / 50000;
  ASSERT_NEAR(drv_loss(&a), hs_conv_loss(&a.c, k), 1e-12);
  ASSERT_NEAR(drv_loss(&b), hs_conv_loss(&b.c, k * hs_conv_stale_factor(&b.c, 4)), 1e-12);
  drv_close(&a);
  drv_close(&b);
}

/* conv-2.2: model averaging after tau local steps: S E(S/tau) Ptau(tau) / D; a gradient
 * all-reduce: B E(B) / D; compression lowers both. */
static void test_local_and_grad_rounds(void) {
  drv v;
  hs_diag d = {0};
  double loss;
  int ws[4] = {0, 1, 2, 3};
  drv_open(&v, "analytic:lambda_tau=0.1", 4);
  for (int t = 0; t < 5; t++)
    for (int w = 0; w < 4; w++) {
      ASSERT_EQ(hs_conv_analytic.step(v.st, w, 32, &loss, &d), 0);
      ASSERT_EQ(hs_conv_analytic.local_update(v.st, w, &d), 0);
    }
  /* A worker's own loss moved with its local updates. */
  ASSERT(loss < hs_conv_loss(&v.c, 0));
  hs_conv_op op = {.kind = HS_OP_ALLREDUCE, .what = HS_COMM_MODEL, .worker = -1, .ws = ws, .n = 4};
  ASSERT_EQ(hs_conv_analytic.begin(v.st, 0, &op, &d), 0);
  ASSERT_EQ(hs_conv_analytic.end(v.st, 0, 0, &d), 0);
  double S = 5 * 4 * 32, k = S * hs_conv_efficiency(&v.c, 128) / (1 + 0.1 * 4) / 50000;
  ASSERT_NEAR(drv_loss(&v), hs_conv_loss(&v.c, k), 1e-12);
  for (int w = 0; w < 4; w++) ASSERT_EQ(hs_conv_analytic.step(v.st, w, 32, &loss, &d), 0);
  ASSERT_NEAR(loss, hs_conv_loss(&v.c, k), 1e-12); /* workers hold the average */
  op.what = HS_COMM_GRAD;
  ASSERT_EQ(hs_conv_analytic.begin(v.st, 0, &op, &d), 0);
  ASSERT_EQ(hs_conv_analytic.end(v.st, 0, 0, &d), 0);
  k += 128 * hs_conv_efficiency(&v.c, 128) / 50000;
  ASSERT_NEAR(drv_loss(&v), hs_conv_loss(&v.c, k), 1e-12);
  drv_close(&v);
}

/* conv-2.3: a push's server-side weight p (ASHL's data share, ADSP's 1/N) among N = 2 workers:
 * applied on arrival it counts min(1, N p) of its progress (a GRAD push at p = 0.25 half, a
 * MODEL push after local steps at 0.75 all of it, at 0.5 = 1/N all of it, like weight 0 = 1);
 * accumulated pushes count their sample-weighted mean weight (at most 1) at the apply. */
static void test_push_weight(void) {
  hs_diag d = {0};
  double loss;
  drv v;
  drv_open(&v, "analytic:lambda_tau=0.1,lambda_s=0.2", 2);
  const double D = 50000;
  /* GRAD push of 64 samples at p = 0.25, staleness 2. */
  hs_conv_op g = {.kind = HS_OP_PUSH, .what = HS_COMM_GRAD, .ps_mode = HS_PS_APPLY, .worker = 0,
                  .weight = 0.25};
  ASSERT_EQ(hs_conv_analytic.step(v.st, 0, 64, &loss, &d), 0);
  ASSERT_EQ(hs_conv_analytic.begin(v.st, 1, &g, &d), 0);
  ASSERT_EQ(hs_conv_analytic.end(v.st, 1, 2, &d), 0);
  double k = 0.5 * 64 * hs_conv_efficiency(&v.c, 64) * hs_conv_stale_factor(&v.c, 2) / D;
  ASSERT_NEAR(drv_loss(&v), hs_conv_loss(&v.c, k), 1e-12);
  /* MODEL push after 3 local steps of 32 at p = 0.75, fresh. */
  for (int t = 0; t < 3; t++) {
    ASSERT_EQ(hs_conv_analytic.step(v.st, 1, 32, &loss, &d), 0);
    ASSERT_EQ(hs_conv_analytic.local_update(v.st, 1, &d), 0);
  }
  hs_conv_op m = {.kind = HS_OP_PUSH, .what = HS_COMM_MODEL, .ps_mode = HS_PS_APPLY, .worker = 1,
                  .weight = 0.75};
  ASSERT_EQ(hs_conv_analytic.begin(v.st, 2, &m, &d), 0);
  ASSERT_EQ(hs_conv_analytic.end(v.st, 2, 0, &d), 0);
  k += 96 * hs_conv_efficiency(&v.c, 32) * hs_conv_local_factor(&v.c, 3) / D;
  ASSERT_NEAR(drv_loss(&v), hs_conv_loss(&v.c, k), 1e-12);
  /* The same at p = 1/N = 0.5. */
  for (int t = 0; t < 3; t++) {
    ASSERT_EQ(hs_conv_analytic.step(v.st, 1, 32, &loss, &d), 0);
    ASSERT_EQ(hs_conv_analytic.local_update(v.st, 1, &d), 0);
  }
  m.weight = 0.5;
  ASSERT_EQ(hs_conv_analytic.begin(v.st, 2, &m, &d), 0);
  ASSERT_EQ(hs_conv_analytic.end(v.st, 2, 0, &d), 0);
  k += 96 * hs_conv_efficiency(&v.c, 32) * hs_conv_local_factor(&v.c, 3) / D;
  ASSERT_NEAR(drv_loss(&v), hs_conv_loss(&v.c, k), 1e-12);
  /* Weight 0 is 1: the same GRAD push unweighted. */
  g.weight = 0;
  ASSERT_EQ(hs_conv_analytic.step(v.st, 0, 64, &loss, &d), 0);
  ASSERT_EQ(hs_conv_analytic.begin(v.st, 1, &g, &d), 0);
  ASSERT_EQ(hs_conv_analytic.end(v.st, 1, 0, &d), 0);
  k += 64 * hs_conv_efficiency(&v.c, 64) / D;
  ASSERT_NEAR(drv_loss(&v), hs_conv_loss(&v.c, k), 1e-12);
  /* Accumulated: 64 samples at 0.5 and 32 at 1, applied together: B = 96, mean weight
   * (32 + 32) / 96. */
  hs_conv_op a = {.kind = HS_OP_PUSH, .what = HS_COMM_GRAD, .ps_mode = HS_PS_ACCUMULATE, .worker = 0,
                  .weight = 0.5};
  ASSERT_EQ(hs_conv_analytic.step(v.st, 0, 64, &loss, &d), 0);
  ASSERT_EQ(hs_conv_analytic.begin(v.st, 3, &a, &d), 0);
  ASSERT_EQ(hs_conv_analytic.end(v.st, 3, 0, &d), 0);
  a.worker = 1;
  a.weight = 1;
  ASSERT_EQ(hs_conv_analytic.step(v.st, 1, 32, &loss, &d), 0);
  ASSERT_EQ(hs_conv_analytic.begin(v.st, 4, &a, &d), 0);
  ASSERT_EQ(hs_conv_analytic.end(v.st, 4, 0, &d), 0);
  hs_conv_op ap = {.kind = HS_OP_APPLY, .what = HS_COMM_GRAD, .worker = -1};
  ASSERT_EQ(hs_conv_analytic.begin(v.st, 5, &ap, &d), 0);
  ASSERT_EQ(hs_conv_analytic.end(v.st, 5, 0, &d), 0);
  k += 96 * hs_conv_efficiency(&v.c, 96) * (64.0 / 96.0) / D;
  ASSERT_NEAR(drv_loss(&v), hs_conv_loss(&v.c, k), 1e-12);
  drv_close(&v);
}

/* conv-2.4: an all-reduce of models with keep_local: a participant that took local steps while
 * it was in flight holds the average's progress plus those steps', and the steps count toward
 * the next average; without keep_local they are lost and count for nothing. */
static void test_keep_local(void) {
  for (int keep = 0; keep < 2; keep++) {
    drv v;
    hs_diag d = {0};
    double loss;
    int ws[2] = {0, 1};
    drv_open(&v, "analytic:lambda_tau=0.1", 2);
    const double D = 50000, e32 = hs_conv_efficiency(&v.c, 32), e64 = hs_conv_efficiency(&v.c, 64);
    for (int t = 0; t < 2; t++)
      for (int w = 0; w < 2; w++) {
        ASSERT_EQ(hs_conv_analytic.step(v.st, w, 32, &loss, &d), 0);
        ASSERT_EQ(hs_conv_analytic.local_update(v.st, w, &d), 0);
      }
    hs_conv_op op = {.kind = HS_OP_ALLREDUCE, .what = HS_COMM_MODEL, .worker = -1, .ws = ws,
                     .n = 2, .keep_local = keep};
    ASSERT_EQ(hs_conv_analytic.begin(v.st, 0, &op, &d), 0);
    /* Worker 0 takes one local step while the average is in flight. */
    ASSERT_EQ(hs_conv_analytic.step(v.st, 0, 32, &loss, &d), 0);
    ASSERT_EQ(hs_conv_analytic.local_update(v.st, 0, &d), 0);
    ASSERT_EQ(hs_conv_analytic.end(v.st, 0, 0, &d), 0);
    /* S = 128 samples in tau = 2 updates each: S E(S/tau) Ptau(tau) / D. */
    double k1 = 128 * e64 * hs_conv_local_factor(&v.c, 2) / D;
    ASSERT_NEAR(drv_loss(&v), hs_conv_loss(&v.c, k1), 1e-12);
    /* Worker 0's model: the average, plus its step with keep_local; worker 1's: the average. */
    ASSERT_EQ(hs_conv_analytic.step(v.st, 0, 32, &loss, &d), 0);
    ASSERT_NEAR(loss, hs_conv_loss(&v.c, k1 + (keep ? 32 * e32 / D : 0)), 1e-12);
    ASSERT_EQ(hs_conv_analytic.step(v.st, 1, 32, &loss, &d), 0);
    ASSERT_NEAR(loss, hs_conv_loss(&v.c, k1), 1e-12);
    /* The next average: worker 1 takes one step, worker 0 one more (two kept, or one). */
    for (int w = 0; w < 2; w++) ASSERT_EQ(hs_conv_analytic.local_update(v.st, w, &d), 0);
    ASSERT_EQ(hs_conv_analytic.begin(v.st, 1, &op, &d), 0);
    ASSERT_EQ(hs_conv_analytic.end(v.st, 1, 0, &d), 0);
    double S = keep ? 96 : 64, tau = S / 32 / 2;
    double k2 = k1 + S * e64 * hs_conv_local_factor(&v.c, tau) / D; /* S / tau = 64 */
    ASSERT_NEAR(drv_loss(&v), hs_conv_loss(&v.c, k2), 1e-12);
    drv_close(&v);
  }
}

static const char *HOMO =
    "name: homo\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "device_types:\n"
    "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
    "nodes:\n"
    "  - {name: n0, link: {bandwidth: 12GB/s, latency: 5us}, devices: [{type: g, count: 4}]}\n";

typedef struct evals {
  int n;
  double t[256], loss[256];
  int64_t step[256];
} evals;

static int eval_sink(void *ctx, double t, int64_t step, double loss, double acc, hs_diag *d) {
  evals *e = ctx;
  if (e->n < 256) {
    e->t[e->n] = t;
    e->step[e->n] = step;
    e->loss[e->n] = loss;
    e->n++;
  }
  return 0;
}

typedef struct rowloss {
  int n, nan;
} rowloss;

static int step_sink(void *ctx, const hs_step_row *row, hs_diag *d) {
  rowloss *r = ctx;
  r->n++;
  if (isnan(row->loss)) r->nan++;
  return 0;
}

static int simulate(const char *policy, const char *conv, int64_t iters, double target_loss,
                    hs_sim_result *res, evals *ev, rowloss *rl) {
  hs_cluster_spec spec;
  hs_diag d = {0};
  memset(&spec, 0, sizeof spec);
  int rc = hs_cluster_parse(&spec, "homo.yaml", HOMO, strlen(HOMO), &d);
  const hs_policy *pol;
  hs_params pp, cp;
  const hs_conv_model *cm = NULL;
  if (!rc) rc = hs_policy_parse(policy, &pol, &pp, &d);
  if (!rc) rc = hs_conv_parse(conv, "resnet18", NULL, &cm, &cp, &d);
  if (!rc) {
    hs_sim_config cfg = {.cluster = &spec, .model = "resnet18", .grad_bytes = 44695848.0,
                         .dataset_size = 50000, .global_batch = 512, .policy = pol, .params = &pp,
                         .seed = 1, .max_iterations = iters, .conv = cm, .conv_params = &cp,
                         .target_loss = target_loss, .eval_sink = eval_sink, .eval_ctx = ev,
                         .sink = step_sink, .sink_ctx = rl};
    rc = hs_sim_run(&cfg, res, &d);
  }
  if (rc) fprintf(stderr, "  simulate: %s\n", d.msg);
  hs_cluster_spec_free(&spec);
  return rc;
}

/* conv-3.1: SSGD, 4 x 128 samples, 40 iterations: the final loss is l(40 B E(B) / D), evaluated
 * every 10 iterations; every step row carries a loss. */
static void test_ssgd_closed_form(void) {
  hs_sim_result res;
  evals ev = {0};
  rowloss rl = {0};
  ASSERT_EQ(simulate("ssgd", "analytic:eval_every=10", 40, 0, &res, &ev, &rl), 0);
  hs_conv_coef c = coef("analytic");
  double per = 512 * hs_conv_efficiency(&c, 512) / 50000;
  ASSERT_NEAR(res.summary.final_loss, hs_conv_loss(&c, 40 * per), 1e-12);
  ASSERT(isnan(res.summary.final_accuracy));
  ASSERT(isnan(res.summary.time_to_target_s));
  ASSERT_EQ(ev.n, 4);
  ASSERT_EQ(ev.step[0], 10);
  ASSERT_NEAR(ev.loss[0], hs_conv_loss(&c, 10 * per), 1e-12);
  ASSERT(rl.n > 0);
  ASSERT_EQ(rl.nan, 0);
  hs_sim_result_free(&res);
}

/* conv-3.2: a target loss ends the run at the first evaluation that reaches it. */
static void test_target_ends_run(void) {
  hs_conv_coef c = coef("analytic");
  double per = 512 * hs_conv_efficiency(&c, 512) / 50000;
  double target = hs_conv_loss(&c, 7 * per) + 1e-12;
  hs_sim_result res;
  evals ev = {0};
  rowloss rl = {0};
  ASSERT_EQ(simulate("ssgd", "analytic:eval_every=1", 1000, target, &res, &ev, &rl), 0);
  ASSERT_EQ(res.status, HS_SIM_COMPLETE);
  ASSERT_EQ(res.summary.iterations, 7);
  ASSERT_NEAR(res.summary.time_to_target_s, res.summary.sim_time_s, 1e-12);
  ASSERT_NEAR(res.summary.time_to_target_s, ev.t[6], 0);
  ASSERT(res.summary.final_loss <= target);
  hs_sim_result_free(&res);
  /* A target alone is a stop condition; one never reached leaves time_to_target NaN. */
  memset(&ev, 0, sizeof ev);
  ASSERT_EQ(simulate("ssgd", "analytic:eval_every=5", 0, target, &res, &ev, &rl), 0);
  ASSERT_EQ(res.summary.iterations, 10);
  hs_sim_result_free(&res);
  memset(&ev, 0, sizeof ev);
  ASSERT_EQ(simulate("ssgd", "analytic:eval_every=5", 20, c.beta2 * 0.5, &res, &ev, &rl), 0);
  ASSERT_EQ(res.summary.iterations, 20);
  ASSERT(isnan(res.summary.time_to_target_s));
  hs_sim_result_free(&res);
}

/* conv-3.3: the same samples under ASP (stale pushes of small batches) and local SGD; each run
 * gives a finite loss below the initial one, and ASP's staleness costs progress against the
 * same run with lambda_s = 0. */
static void test_async_and_local(void) {
  hs_sim_result a, b, l;
  evals ev = {0};
  rowloss rl = {0};
  ASSERT_EQ(simulate("asp", "analytic", 200, 0, &a, &ev, &rl), 0);
  memset(&ev, 0, sizeof ev);
  ASSERT_EQ(simulate("asp", "analytic:lambda_s=0", 200, 0, &b, &ev, &rl), 0);
  ASSERT(a.summary.final_loss > b.summary.final_loss);
  memset(&ev, 0, sizeof ev);
  ASSERT_EQ(simulate("localsgd:tau=4", "analytic", 10, 0, &l, &ev, &rl), 0);
  hs_conv_coef c = coef("analytic");
  ASSERT(l.summary.final_loss < hs_conv_loss(&c, 0));
  hs_sim_result_free(&a);
  hs_sim_result_free(&b);
  hs_sim_result_free(&l);
}

int main(int argc, char **argv) {
  hs_gsl_init();
  static const hs_test_case cases[] = {
      {"formulas", test_formulas},
      {"monotone", test_monotone},
      {"params", test_params},
      {"staleness_lowers_progress", test_staleness_lowers_progress},
      {"local_and_grad_rounds", test_local_and_grad_rounds},
      {"push_weight", test_push_weight},
      {"keep_local", test_keep_local},
      {"ssgd_closed_form", test_ssgd_closed_form},
      {"target_ends_run", test_target_ends_run},
      {"async_and_local", test_async_and_local},
      {NULL, NULL},
  };
  return hs_test_main("conv", cases, argc, argv);
}
