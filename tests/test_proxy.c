/* The proxy convergence model: real training of mlp on a Fashion-MNIST subset under simulated
 * schedules. Determinism (same seed, same evaluations bit for bit), SSGD reducing the loss,
 * the asynchronous (push/pull) and local-SGD (model averaging) paths, targets, compression
 * through the compressor's real round trip, the worker limit, model-delta pushes (one worker:
 * local update + MODEL push + pull = one SGD step; ashl and adsp learn). Without Fashion-MNIST
 * installed, on its synthetic stand-in (HETSIM_FASHION_MNIST_DIR=synthetic). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core_config.h"
#include "core/core_rng.h"
#include "nn/nn_data.h"
#include "policies/pol_compress.h"
#include "policies/pol_registry.h"
#include "sim/sim_conv.h"
#include "sim/sim_run.h"
#include "tests/hs_test.h"

static const char *HOMO =
    "name: homo\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "device_types:\n"
    "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
    "  s: {compute: {t0: 30ms, per_sample: 3ms}}\n"
    "nodes:\n"
    "  - {name: n0, link: {bandwidth: 12GB/s, latency: 5us}, devices: [{type: g, count: 3}, {type: s}]}\n";

/* Small and fast: 2,000 training samples, 500 test samples. */
#define SMALL "train_samples=2000,eval_samples=500"

typedef struct evals {
  int n;
  double t[64], loss[64], acc[64];
  int64_t step[64];
} evals;

static int eval_sink(void *ctx, double t, int64_t step, double loss, double acc, hs_diag *d) {
  evals *e = ctx;
  if (e->n < 64) {
    e->t[e->n] = t;
    e->step[e->n] = step;
    e->loss[e->n] = loss;
    e->acc[e->n] = acc;
    e->n++;
  }
  return 0;
}

typedef struct steps {
  int n, nan;
  double first, last; /* losses of the first and last step rows */
} steps;

static int step_sink(void *ctx, const hs_step_row *row, hs_diag *d) {
  steps *s = ctx;
  if (isnan(row->loss)) s->nan++;
  if (!s->n) s->first = row->loss;
  s->last = row->loss;
  s->n++;
  return 0;
}

static int simulate(const char *yaml, const char *policy, const char *conv, int64_t iters,
                    double target_acc, uint64_t seed, hs_sim_result *res, evals *ev, steps *st,
                    hs_diag *d) {
  hs_cluster_spec spec;
  memset(&spec, 0, sizeof spec);
  memset(res, 0, sizeof *res);
  int rc = hs_cluster_parse(&spec, "t.yaml", yaml, strlen(yaml), d);
  const hs_policy *pol;
  hs_params pp, cp;
  const hs_conv_model *cm = NULL;
  if (!rc) rc = hs_policy_parse(policy, &pol, &pp, d);
  if (!rc) rc = hs_conv_parse(conv, "mlp", NULL, &cm, &cp, d);
  if (!rc) {
    hs_sim_config cfg = {.cluster = &spec, .model = "mlp", .grad_bytes = 814120.0,
                         .dataset_size = 60000, .global_batch = 256, .policy = pol, .params = &pp,
                         .seed = seed, .max_iterations = iters, .conv = cm, .conv_params = &cp,
                         .target_accuracy = target_acc, .eval_sink = eval_sink, .eval_ctx = ev,
                         .sink = step_sink, .sink_ctx = st};
    rc = hs_sim_run(&cfg, res, d);
  }
  hs_cluster_spec_free(&spec);
  return rc;
}

/* proxy-1: SSGD on 4 workers for 50 steps each reduces the loss, and the same seed gives the
 * same evaluations bit for bit. */
static void test_ssgd_learns_and_is_deterministic(void) {
  hs_sim_result a, b;
  evals ea = {0}, eb = {0};
  steps sa = {0}, sb = {0};
  hs_diag d = {0};
  ASSERT_EQ(simulate(HOMO, "ssgd", "proxy:eval_every=10," SMALL, 50, 0, 7, &a, &ea, &sa, &d), 0);
  if (d.msg[0]) fprintf(stderr, "  %s\n", d.msg);
  ASSERT_EQ(simulate(HOMO, "ssgd", "proxy:eval_every=10," SMALL, 50, 0, 7, &b, &eb, &sb, &d), 0);
  ASSERT_EQ(ea.n, 5);
  ASSERT_EQ(eb.n, ea.n);
  for (int i = 0; i < ea.n && i < eb.n; i++) {
    ASSERT_EQ(ea.step[i], eb.step[i]);
    ASSERT(ea.loss[i] == eb.loss[i]);
    ASSERT(ea.acc[i] == eb.acc[i]);
  }
  ASSERT_EQ(sa.n, 200);
  ASSERT_EQ(sa.nan, 0);
  ASSERT(sa.first > 2.0);                       /* about ln 10 at the start */
  ASSERT(ea.loss[ea.n - 1] < 0.75 * sa.first);  /* the test loss fell */
  ASSERT(ea.loss[ea.n - 1] < ea.loss[0]);
  ASSERT(ea.acc[ea.n - 1] > 0.5);               /* far above chance (0.1) */
  ASSERT_NEAR(a.summary.final_loss, ea.loss[ea.n - 1], 0);
  ASSERT_NEAR(a.summary.final_accuracy, ea.acc[ea.n - 1], 0);
  hs_sim_result_free(&a);
  hs_sim_result_free(&b);
}

/* proxy-2: the push/pull path (asp, ps-bsp) and model averaging (local SGD) train too; another
 * seed gives other numbers. */
static void test_async_and_local_learn(void) {
  const char *pols[] = {"asp", "ps-bsp", "localsgd:tau=4"};
  int64_t iters[] = {200, 50, 12};
  double loss[3];
  for (int i = 0; i < 3; i++) {
    hs_sim_result r;
    evals e = {0};
    steps s = {0};
    hs_diag d = {0};
    int rc = simulate(HOMO, pols[i], "proxy:eval_every=1000," SMALL, iters[i], 0, 3, &r, &e, &s, &d);
    ASSERT_EQ(rc, 0);
    if (rc) fprintf(stderr, "  %s: %s\n", pols[i], d.msg);
    ASSERT_EQ(e.n, 1); /* only the final evaluation */
    ASSERT(r.summary.final_loss < 1.5);
    ASSERT(r.summary.final_accuracy > 0.5);
    loss[i] = r.summary.final_loss;
    hs_sim_result_free(&r);
  }
  ASSERT(loss[0] != loss[1] && loss[1] != loss[2]);
}

/* proxy-3: a target accuracy ends the run at an evaluation and sets time_to_target_s. */
static void test_target_accuracy(void) {
  hs_sim_result r;
  evals e = {0};
  steps s = {0};
  hs_diag d = {0};
  ASSERT_EQ(simulate(HOMO, "ssgd", "proxy:eval_every=5," SMALL, 1000, 0.6, 1, &r, &e, &s, &d), 0);
  ASSERT(r.summary.iterations < 1000);
  ASSERT_EQ(r.summary.iterations % 5, 0);
  ASSERT(r.summary.final_accuracy >= 0.6);
  ASSERT(e.n >= 1 && e.acc[e.n - 1] >= 0.6);
  for (int i = 0; i + 1 < e.n; i++) ASSERT(e.acc[i] < 0.6);
  ASSERT_NEAR(r.summary.time_to_target_s, r.summary.sim_time_s, 0);
  hs_sim_result_free(&r);
}

/* proxy-4: a gradient all-reduce through top-k with error feedback really changes the
 * training, and still learns. Driven directly (no policy yet sets a compressor on SSGD). */
static void test_compressed_allreduce(void) {
  double final[2];
  for (int k = 0; k < 2; k++) {
    const hs_conv_model *m;
    hs_params p;
    hs_diag d = {0};
    ASSERT_EQ(hs_conv_parse("proxy:" SMALL, "mlp", NULL, &m, &p, &d), 0);
    hs_conv_config c = {.model = "mlp", .dataset_size = 60000, .classes = 10, .global_batch = 128,
                        .n_workers = 2, .seed = 5, .params = &p};
    void *st = calloc(1, m->state_size);
    int rc = m->init(st, &c, &d);
    ASSERT_EQ(rc, 0);
    int ws[2] = {0, 1};
    hs_conv_op op = {.kind = HS_OP_ALLREDUCE, .what = HS_COMM_GRAD, .worker = -1, .ws = ws, .n = 2,
                     .compressor = k ? &hs_compressor_topk : NULL, .ratio = 0.05};
    double loss, acc;
    for (int w = 0; !rc && w < 2; w++) rc = m->add_worker(st, w, &d);
    for (int i = 0; !rc && i < 40; i++) {
      for (int w = 0; !rc && w < 2; w++) rc = m->step(st, w, 64, &loss, &d);
      if (!rc) rc = m->begin(st, 3, &op, &d);
      if (!rc) rc = m->end(st, 3, 0, &d);
    }
    ASSERT_EQ(rc, 0);
    if (rc) fprintf(stderr, "  %s\n", d.msg);
    ASSERT_EQ(m->evaluate(st, &loss, &acc, &d), 0);
    final[k] = loss;
    m->fini(st);
    free(st);
  }
  ASSERT(final[1] != final[0]);
  ASSERT(final[1] < 1.8);
}

/* proxy-5: more workers than the proxy supports is refused, naming the limit. */
static void test_worker_limit(void) {
  const char *big =
      "name: big\n"
      "network: {bandwidth: 10Gbps, latency: 20us}\n"
      "device_types:\n"
      "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
      "nodes:\n"
      "  - {name: n0, link: {bandwidth: 12GB/s, latency: 5us}, devices: [{type: g, count: 300}]}\n";
  hs_sim_result r;
  evals e = {0};
  steps s = {0};
  hs_diag d = {0};
  ASSERT_EQ(simulate(big, "ssgd", "proxy", 5, 0, 1, &r, &e, &s, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "at most 256 workers");
  hs_sim_result_free(&r);
  /* resnet18 has no proxy. */
  const hs_conv_model *m;
  hs_params p;
  ASSERT_EQ(hs_conv_parse("proxy", "resnet18", NULL, &m, &p, &d), 0);
  hs_conv_config c = {.model = "resnet18", .dataset_size = 50000, .classes = 10, .n_workers = 1, .params = &p};
  void *st = calloc(1, m->state_size);
  ASSERT_EQ(m->init(st, &c, &d), HS_EINVAL);
  m->fini(st);
  free(st);
}

/* Drives one proxy instance with one worker for `rounds` rounds of `local` steps of 64 samples:
 * GRAD: step, push GRAD, pull; MODEL: steps with local updates, push MODEL (weight wt), pull.
 * The global model's loss before and after. */
static int one_worker_rounds(hs_comm_what what, int rounds, int local, double wt, double *before,
                             double *after, hs_diag *d) {
  const hs_conv_model *m;
  hs_params p;
  int rc = hs_conv_parse("proxy:" SMALL, "mlp", NULL, &m, &p, d);
  if (rc) return rc;
  hs_conv_config c = {.model = "mlp", .dataset_size = 60000, .classes = 10, .global_batch = 64,
                      .n_workers = 1, .seed = 11, .params = &p};
  void *st = calloc(1, m->state_size);
  if (!st) return HS_ENOMEM;
  hs_conv_op push = {.kind = HS_OP_PUSH, .what = what, .ps_mode = HS_PS_APPLY, .worker = 0, .weight = wt};
  hs_conv_op pull = {.kind = HS_OP_PULL, .what = HS_COMM_MODEL, .worker = 0};
  double loss, acc;
  if (!(rc = m->init(st, &c, d)) && !(rc = m->add_worker(st, 0, d))) rc = m->evaluate(st, before, &acc, d);
  for (int r = 0; !rc && r < rounds; r++) {
    for (int k = 0; !rc && k < local; k++) {
      rc = m->step(st, 0, 64, &loss, d);
      if (!rc && what == HS_COMM_MODEL) rc = m->local_update(st, 0, d);
    }
    if (!rc) rc = m->begin(st, 1, &push, d);
    if (!rc) rc = m->end(st, 1, 0, d);
    if (!rc) rc = m->begin(st, 2, &pull, d);
    if (!rc) rc = m->end(st, 2, 0, d);
  }
  if (!rc) rc = m->evaluate(st, after, &acc, d);
  m->fini(st);
  free(st);
  return rc;
}

/* proxy-6: with one worker, a local update followed by a MODEL push and a pull is one SGD step:
 * the same global model as a GRAD push (up to float rounding), and several local steps per
 * push keep learning; a push's weight scales the change. */
static void test_model_push_identity(void) {
  hs_diag d = {0};
  double g0, g1, m0, m1, l0, l1, h0, h1;
  ASSERT_EQ(one_worker_rounds(HS_COMM_GRAD, 30, 1, 0, &g0, &g1, &d), 0);
  ASSERT_EQ(one_worker_rounds(HS_COMM_MODEL, 30, 1, 0, &m0, &m1, &d), 0);
  ASSERT_EQ(one_worker_rounds(HS_COMM_MODEL, 10, 3, 1, &l0, &l1, &d), 0);
  ASSERT_EQ(one_worker_rounds(HS_COMM_MODEL, 10, 3, 0.5, &h0, &h1, &d), 0);
  if (d.msg[0]) fprintf(stderr, "  %s\n", d.msg);
  ASSERT(g0 == m0 && m0 == l0);
  ASSERT(g1 < 0.8 * g0);
  ASSERT_NEAR(m1, g1, 1e-3 * g1);
  /* 30 steps in 10 rounds of 3 local steps: the same samples, the same SGD steps. */
  ASSERT_NEAR(l1, g1, 1e-3 * g1);
  ASSERT(h1 < h0 && h1 > l1);
}

/* One proxy instance of mlp for the keep_local test: `n_shards` workers' shards, workers
 * 0..n_workers-1 added; a worker beyond the shards reads shard w mod n_shards from its start. */
static int keep_open(const hs_conv_model **m, void **st, int n_shards, int n_workers, hs_diag *d) {
  hs_params p;
  int rc = hs_conv_parse("proxy:" SMALL, "mlp", NULL, m, &p, d);
  if (rc) return rc;
  hs_conv_config c = {.model = "mlp", .dataset_size = 60000, .classes = 10, .global_batch = 64,
                      .n_workers = n_shards, .seed = 13, .params = &p};
  if (!(*st = calloc(1, (*m)->state_size))) return HS_ENOMEM;
  rc = (*m)->init(*st, &c, d);
  for (int w = 0; !rc && w < n_workers; w++) rc = (*m)->add_worker(*st, w, d);
  return rc;
}

static int keep_step(const hs_conv_model *m, void *st, int w, hs_diag *d) {
  double loss;
  int rc = m->step(st, w, 32, &loss, d);
  return rc ? rc : m->local_update(st, w, d);
}

/* The loss of the model worker w holds: a MODEL all-reduce of w alone (weight 1: b = 0 + 1 * x_w,
 * exactly x_w) makes it the global model. */
static int keep_worker_loss(const hs_conv_model *m, void *st, int w, double *loss, hs_diag *d) {
  int ws[1] = {w};
  double one[1] = {1};
  hs_conv_op op = {.kind = HS_OP_ALLREDUCE, .what = HS_COMM_MODEL, .worker = -1, .ws = ws, .n = 1,
                   .weights = one};
  double acc;
  int rc = m->begin(st, 9, &op, d);
  if (!rc) rc = m->end(st, 9, 0, d);
  return rc ? rc : m->evaluate(st, loss, &acc, d);
}

/* proxy-8: an all-reduce of models with keep_local. Workers 0 and 1 take a local step, the
 * average x̄ starts, worker 0 takes another step (x_0 = s_0 - lr g), the average ends. With
 * keep_local worker 0 then holds x̄ + (x_0 - s_0) exactly, worker 1 (no step) x̄ exactly;
 * without it both hold x̄. The expected x̄ + (x_0 - s_0) is built in a second instance from
 * other operations: worker 2 is a clone of worker 0 (shard 0 from its start); a MODEL push
 * that is only accumulated moves its base to s_0, the plain average makes the global model x̄,
 * worker 2 steps, and a MODEL push applied on arrival adds its x_2 - s_0 to x̄, in the same
 * float operations. Models are compared by their evaluated loss, equal as doubles. */
static void test_keep_local_allreduce(void) {
  hs_diag d = {0};
  const hs_conv_model *m;
  void *a = NULL, *b = NULL;
  int ws[2] = {0, 1};
  double avg_loss = 0, l0 = 0, l1 = 0, l0_plain = 0, expect = 0, acc;
  for (int keep = 1; keep >= 0; keep--) {
    int rc = keep_open(&m, &a, 2, 2, &d);
    hs_conv_op ar = {.kind = HS_OP_ALLREDUCE, .what = HS_COMM_MODEL, .worker = -1, .ws = ws, .n = 2,
                     .keep_local = keep};
    if (!rc) rc = keep_step(m, a, 0, &d);
    if (!rc) rc = keep_step(m, a, 1, &d);
    if (!rc) rc = m->begin(a, 1, &ar, &d);
    if (!rc) rc = keep_step(m, a, 0, &d);
    if (!rc) rc = m->end(a, 1, 0, &d);
    if (!rc && keep) rc = m->evaluate(a, &avg_loss, &acc, &d);
    if (!rc) rc = keep_worker_loss(m, a, 0, keep ? &l0 : &l0_plain, &d);
    if (!rc && keep) rc = keep_worker_loss(m, a, 1, &l1, &d);
    ASSERT_EQ(rc, 0);
    if (rc) fprintf(stderr, "  %s\n", d.msg);
    if (a) m->fini(a);
    free(a);
    a = NULL;
  }
  int rc = keep_open(&m, &b, 2, 3, &d);
  hs_conv_op acc_push = {.kind = HS_OP_PUSH, .what = HS_COMM_MODEL, .ps_mode = HS_PS_ACCUMULATE, .worker = 2};
  hs_conv_op push = {.kind = HS_OP_PUSH, .what = HS_COMM_MODEL, .ps_mode = HS_PS_APPLY, .worker = 2};
  hs_conv_op ar = {.kind = HS_OP_ALLREDUCE, .what = HS_COMM_MODEL, .worker = -1, .ws = ws, .n = 2};
  for (int w = 0; !rc && w < 3; w++) rc = keep_step(m, b, w, &d);
  if (!rc) rc = m->begin(b, 1, &acc_push, &d);
  if (!rc) rc = m->end(b, 1, 0, &d);
  if (!rc) rc = m->begin(b, 2, &ar, &d);
  if (!rc) rc = m->end(b, 2, 0, &d);
  double avg_b = 0;
  if (!rc) rc = m->evaluate(b, &avg_b, &acc, &d);
  if (!rc) rc = keep_step(m, b, 2, &d);
  if (!rc) rc = m->begin(b, 3, &push, &d);
  if (!rc) rc = m->end(b, 3, 0, &d);
  if (!rc) rc = m->evaluate(b, &expect, &acc, &d);
  ASSERT_EQ(rc, 0);
  if (rc) fprintf(stderr, "  %s\n", d.msg);
  if (b) m->fini(b);
  free(b);
  ASSERT(avg_b == avg_loss);  /* both instances averaged the same two models */
  ASSERT(l0 == expect);       /* x_0 = x̄ + (x_0 - s_0), bit for bit */
  ASSERT(l1 == avg_loss);     /* no step while in flight: x_1 = x̄ */
  ASSERT(l0_plain == avg_loss); /* without keep_local the step is lost */
  ASSERT(l0 != avg_loss);
}

/* The ashl-3worker setting (traces/ashl-3worker.yaml): three workers slowed 2x/3x/4x in compute
 * and 4x/6x/8x in communication, and a parameter server. */
static const char *ASHL3 =
    "name: ashl3\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "parameter_server: {bandwidth: 10Gbps, latency: 20us, update_time: 2ms}\n"
    "device_types:\n"
    "  gpu: {memory: 11GiB, compute: {t0: 3ms, per_sample: 0.30ms}}\n"
    "nodes:\n"
    "  - {name: w0, devices: [{type: gpu, slowdown: 2.0, comm_slowdown: 4.0}]}\n"
    "  - {name: w1, devices: [{type: gpu, slowdown: 3.0, comm_slowdown: 6.0}]}\n"
    "  - {name: w2, devices: [{type: gpu, slowdown: 4.0, comm_slowdown: 8.0}]}\n";

/* proxy-7: the policies that push model deltas after local steps (ashl, adsp) train the global
 * model: its loss falls below its first evaluation (it rose to 2-10 when they pushed only the
 * last gradient of a round). */
static void test_model_delta_policies_learn(void) {
  const char *pols[] = {"ashl", "ashl:k_ahl=1", "adsp:period=0.5s,min_interval=0.05s"};
  int64_t iters[] = {60, 150, 60};
  for (int i = 0; i < 3; i++) {
    hs_sim_result r;
    evals e = {0};
    steps s = {0};
    hs_diag d = {0};
    int rc = simulate(ASHL3, pols[i], "proxy:eval_every=10," SMALL, iters[i], 0, 1, &r, &e, &s, &d);
    ASSERT_EQ(rc, 0);
    if (rc) fprintf(stderr, "  %s: %s\n", pols[i], d.msg);
    int learnt = e.n >= 3 && r.summary.final_loss < e.loss[0] && r.summary.final_accuracy > 0.6;
    ASSERT(learnt);
    if (!learnt)
      fprintf(stderr, "  %s: %d evals, first %.3f, final %.3f (accuracy %.3f)\n", pols[i], e.n,
              e.n ? e.loss[0] : NAN, r.summary.final_loss, r.summary.final_accuracy);
    hs_sim_result_free(&r);
  }
}

/* proxy-10: a worker that took the global model keeps it while another worker's push changes
 * the global one (the proxy shares the global vector until it changes): its next step computes
 * on the old model, exactly as in a run without the push, even after an evaluation loaded the
 * new model into the net; after a pull it computes on the new one. */
static void test_stale_model_kept(void) {
  double loss[3];
  for (int k = 0; k < 3; k++) {
    const hs_conv_model *m;
    hs_params p;
    hs_diag d = {0};
    ASSERT_EQ(hs_conv_parse("proxy:" SMALL, "mlp", NULL, &m, &p, &d), 0);
    hs_conv_config c = {.model = "mlp", .dataset_size = 60000, .classes = 10, .global_batch = 128,
                        .n_workers = 2, .seed = 9, .params = &p};
    void *st = calloc(1, m->state_size);
    int rc = m->init(st, &c, &d);
    hs_conv_op push = {.kind = HS_OP_PUSH, .what = HS_COMM_GRAD, .ps_mode = HS_PS_APPLY, .worker = 0};
    hs_conv_op pull = {.kind = HS_OP_PULL, .what = HS_COMM_MODEL, .worker = 1};
    double l, acc;
    for (int w = 0; !rc && w < 2; w++) rc = m->add_worker(st, w, &d);
    if (!rc) rc = m->step(st, 0, 64, &l, &d);
    if (!rc && k > 0 && !(rc = m->begin(st, 1, &push, &d))) rc = m->end(st, 1, 0, &d);
    if (!rc && k == 2 && !(rc = m->begin(st, 2, &pull, &d))) rc = m->end(st, 2, 0, &d);
    if (!rc) rc = m->evaluate(st, &l, &acc, &d);
    if (!rc) rc = m->step(st, 1, 64, &loss[k], &d);
    ASSERT_EQ(rc, 0);
    if (rc) fprintf(stderr, "  %s\n", d.msg);
    m->fini(st);
    free(st);
  }
  ASSERT(loss[1] == loss[0]);
  ASSERT(loss[2] != loss[0]);
}

int main(int argc, char **argv) {
  hs_gsl_init();
  const char *dir = getenv("HETSIM_FASHION_MNIST_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir ? dir : HS_FASHION_MNIST_DIR);
  char plain[1024];
  snprintf(plain, sizeof plain, "%s/train-images-idx3-ubyte", dir ? dir : HS_FASHION_MNIST_DIR);
  /* Without the files the proxy trains on the synthetic stand-in (nn_data.h): the real training
   * path runs in every test run. */
  if ((!dir || strcmp(dir, HS_FASHION_MNIST_SYNTHETIC)) && access(path, R_OK) && access(plain, R_OK)) {
    printf("Fashion-MNIST not found (%s): training on its synthetic stand-in\n", path);
    setenv("HETSIM_FASHION_MNIST_DIR", HS_FASHION_MNIST_SYNTHETIC, 1);
  }
  static const hs_test_case cases[] = {
      {"ssgd_learns_and_is_deterministic", test_ssgd_learns_and_is_deterministic},
      {"async_and_local_learn", test_async_and_local_learn},
      {"target_accuracy", test_target_accuracy},
      {"compressed_allreduce", test_compressed_allreduce},
      {"worker_limit", test_worker_limit},
      {"model_push_identity", test_model_push_identity},
      {"keep_local_allreduce", test_keep_local_allreduce},
      {"model_delta_policies_learn", test_model_delta_policies_learn},
      {"stale_model_kept", test_stale_model_kept},
      {NULL, NULL},
  };
  return hs_test_main("proxy", cases, argc, argv);
}
