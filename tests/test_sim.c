/* Simulator tests: closed-form oracles (SSGD, ring and hierarchical all-reduce, ASP, PS-BSP,
 * SSP s=0 = BSP), determinism, membership changes, memory limits and event counts. */
#include <gsl/gsl_rng.h>
#include <stdlib.h>

#include "core/core_config.h"
#include "core/core_rng.h"
#include "policies/pol_compress.h"
#include "policies/pol_registry.h"
#include "sim/sim_net.h"
#include "sim/sim_run.h"
#include "tests/hs_test.h"

#define M_BYTES 44695848.0 /* resnet18's fp32 gradient */

typedef struct rows {
  int n, cap;
  hs_step_row *r;
} rows;

static int sink(void *ctx, const hs_step_row *row, hs_diag *d) {
  rows *rs = ctx;
  if (rs->n == rs->cap) {
    rs->cap = rs->cap ? 2 * rs->cap : 1024;
    rs->r = realloc(rs->r, (size_t)rs->cap * sizeof *rs->r);
  }
  rs->r[rs->n++] = *row;
  return 0;
}

typedef struct run {
  hs_cluster_spec spec;
  hs_params params;
  hs_sim_result res;
  rows rows;
  int rc;
  hs_diag d;
} run;

/* Runs `policy` on the YAML cluster text; stop after iters iterations (or at sim_time). */
static void simulate(run *r, const char *yaml, const char *policy, int64_t batch, int64_t iters,
                     double sim_time, uint64_t seed) {
  memset(r, 0, sizeof *r);
  r->rc = hs_cluster_parse(&r->spec, "test.yaml", yaml, strlen(yaml), &r->d);
  if (r->rc) {
    fprintf(stderr, "  cluster: %s\n", r->d.msg);
    return;
  }
  const hs_policy *pol;
  r->rc = hs_policy_parse(policy, &pol, &r->params, &r->d);
  if (r->rc) return;
  hs_sim_config cfg = {
      .cluster = &r->spec, .model = "resnet18", .grad_bytes = M_BYTES, .param_bytes = M_BYTES,
      .dataset_size = 50000, .global_batch = batch, .policy = pol, .params = &r->params,
      .seed = seed, .max_iterations = iters, .max_sim_time = sim_time, .sink = sink,
      .sink_ctx = &r->rows,
  };
  r->rc = hs_sim_run(&cfg, &r->res, &r->d);
}

static void run_free(run *r) {
  hs_sim_result_free(&r->res);
  hs_cluster_spec_free(&r->spec);
  free(r->rows.r);
}

/* Steps of one worker in order. */
static int worker_rows(const run *r, int w, const hs_step_row **out, int cap) {
  int n = 0;
  for (int i = 0; i < r->rows.n && n < cap; i++)
    if (r->rows.r[i].worker == w) out[n++] = &r->rows.r[i];
  return n;
}

static const char *HOMO_1NODE =
    "name: homo\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "device_types:\n"
    "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
    "nodes:\n"
    "  - {name: n0, link: {bandwidth: 12GB/s, latency: 5us}, devices: [{type: g, count: 4}]}\n";

static void test_ssgd_homogeneous_one_node(void) {
  run r;
  simulate(&r, HOMO_1NODE, "ssgd", 64, 50, 0, 1);
  ASSERT_EQ(r.rc, 0);
  double t = 0.010 + 0.001 * 16;
  double ring = 2.0 * 3 * (5e-6 + M_BYTES / (4 * 12e9));
  ASSERT_REL(r.res.summary.mean_iteration_s, t + ring, 1e-12);
  ASSERT_EQ(r.res.summary.iterations, 50);
  ASSERT_EQ(r.rows.n, 200);
  /* Every step of every worker lasts exactly one closed-form iteration. */
  for (int i = 0; i < r.rows.n; i++)
    ASSERT_REL(r.rows.r[i].comm_end_s - r.rows.r[i].start_s, t + ring, 1e-9);
  run_free(&r);
}

static const char *HETERO_2NODES =
    "name: hetero\n"
    "network: {bandwidth: 25Gbps, latency: 30us}\n"
    "device_types:\n"
    "  fast: {compute: {t0: 4ms, per_sample: 0.5ms}}\n"
    "  slow: {compute: {t0: 6ms, per_sample: 1.5ms}}\n"
    "nodes:\n"
    "  - {name: a, link: {bandwidth: 100GB/s, latency: 2us}, devices: [{type: fast, count: 3}]}\n"
    "  - {name: b, link: {bandwidth: 16GB/s, latency: 8us}, devices: [{type: slow}, {type: fast}]}\n";

static void test_ssgd_heterogeneous_two_nodes(void) {
  run r;
  /* 5 workers, batch 103: shares 21,21,21,20,20; worker 3 (slow, 20) is the straggler. */
  simulate(&r, HETERO_2NODES, "ssgd", 103, 20, 0, 7);
  ASSERT_EQ(r.rc, 0);
  double tmax = 0.006 + 0.0015 * 20;
  double a_link = 2e-6 + M_BYTES / (5 * 100e9), b_link = 8e-6 + M_BYTES / (5 * 16e9);
  double net = 30e-6 + M_BYTES / (5 * 25e9 / 8);
  double worst = fmax(fmax(a_link, b_link), net);
  double expect = tmax + 2.0 * 4 * worst;
  ASSERT_REL(r.res.summary.mean_iteration_s, expect, 1e-12);
  ASSERT_EQ(r.res.workers[0].initial_batch, 21);
  ASSERT_EQ(r.res.workers[4].initial_batch, 20);
  run_free(&r);
}

static const char *HIER =
    "name: hier\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "device_types:\n"
    "  g: {compute: {t0: 1ms, per_sample: 0.1ms}}\n"
    "nodes:\n"
    "  - {name: a, link: {bandwidth: 50GB/s, latency: 3us}, devices: [{type: g, count: 4}]}\n"
    "  - {name: b, link: {bandwidth: 50GB/s, latency: 3us}, devices: [{type: g, count: 4}]}\n"
    "  - {name: c, link: {bandwidth: 20GB/s, latency: 4us}, devices: [{type: g, count: 2}]}\n";

/* hs_ring_link inverts the ring: a cluster whose links it set prices the ring all-reduce
 * of its n workers at alpha + m/beta, for every message size. */
static void test_ring_link_inverts_ring(void) {
  static const char *Y = "name: r\nnetwork: {bandwidth: 1GB/s, latency: 1us}\ndevice_types:\n"
                         "  g: {compute: {t0: 1ms, per_sample: 0.1ms}}\nnodes:\n"
                         "  - {name: a, link: {bandwidth: 1GB/s, latency: 1us}, devices: [{type: g, count: 3}]}\n"
                         "  - {name: b, link: {bandwidth: 1GB/s, latency: 1us}, devices: [{type: g, count: 2}]}\n";
  hs_cluster_spec spec;
  hs_diag d;
  ASSERT_EQ(hs_cluster_parse(&spec, "r.yaml", Y, strlen(Y), &d), 0);
  double alpha = 37e-6, beta = 2.5e9;
  hs_link_spec l = hs_ring_link(alpha, beta, 5);
  ASSERT_REL(l.latency, alpha / 8, 1e-15);
  ASSERT_REL(l.bandwidth, beta * 8 / 5, 1e-15);
  spec.network = l;
  for (int i = 0; i < spec.n_nodes; i++) spec.nodes[i].link = l;
  hs_netm net;
  ASSERT_EQ(hs_netm_open(&net, &spec), 0);
  hs_netm_peer peers[5];
  int ws[5];
  for (int i = 0; i < 5; i++) {
    peers[i] = (hs_netm_peer){.node = spec.workers[i].node, .comm_slowdown = 1.0};
    ws[i] = i;
  }
  for (double m = 1; m < 1e10; m *= 97) ASSERT_REL(hs_netm_ring_time(&net, peers, ws, 5, m), alpha + m / beta, 1e-13);
  hs_netm_close(&net);
  hs_cluster_spec_free(&spec);
}

static void test_ring_and_hierarchical_closed_forms(void) {
  hs_cluster_spec spec;
  hs_diag d;
  ASSERT_EQ(hs_cluster_parse(&spec, "hier.yaml", HIER, strlen(HIER), &d), 0);
  hs_netm net;
  ASSERT_EQ(hs_netm_open(&net, &spec), 0);
  hs_netm_peer peers[10];
  int ws[10];
  for (int i = 0; i < 10; i++) {
    peers[i] = (hs_netm_peer){.node = spec.workers[i].node, .comm_slowdown = 1.0};
    ws[i] = i;
  }
  double m = 1e8, beta = 10e9 / 8;
  /* Ring over 10: links inside a (50GB/s), b, c (20GB/s) and three network hops. */
  double worst = fmax(fmax(3e-6 + m / (10 * 50e9), 4e-6 + m / (10 * 20e9)), 20e-6 + m / (10 * beta));
  ASSERT_REL(hs_netm_ring_time(&net, peers, ws, 10, m), 2.0 * 9 * worst, 1e-14);
  /* Hierarchical: intra max over nodes of (g-1)(a + m/(g b)), then a ring over 3 nodes. */
  double intra = fmax(3 * (3e-6 + m / (4 * 50e9)), 1 * (4e-6 + m / (2 * 20e9)));
  double inter = 2.0 * 2 * (20e-6 + m / (3 * beta));
  ASSERT_REL(hs_netm_hier_time(&net, peers, ws, 10, m), 2 * intra + inter, 1e-14);
  /* A slowed worker divides the bandwidth of both of its ring links. */
  peers[9].comm_slowdown = 4.0;
  double slow = fmax(worst, 20e-6 + m / (10 * beta / 4));
  ASSERT_REL(hs_netm_ring_time(&net, peers, ws, 10, m), 2.0 * 9 * slow, 1e-14);
  /* One participant: nothing to send. */
  ASSERT_EQ(hs_netm_ring_time(&net, peers, ws, 1, m), 0);
  hs_netm_close(&net);

  /* And through the simulator: ssgd with algo=hier. */
  run r;
  simulate(&r, HIER, "ssgd:algo=hier", 100, 10, 0, 1);
  ASSERT_EQ(r.rc, 0);
  double t = 0.001 + 0.0001 * 10;
  double mi = M_BYTES;
  double hi = 2 * fmax(3 * (3e-6 + mi / (4 * 50e9)), 4e-6 + mi / (2 * 20e9)) +
              2.0 * 2 * (20e-6 + mi / (3 * beta));
  ASSERT_REL(r.res.summary.mean_iteration_s, t + hi, 1e-12);
  run_free(&r);
  hs_cluster_spec_free(&spec);
}

static void test_overlap_single_bucket_equals_no_overlap(void) {
  run a, b, c;
  simulate(&a, HETERO_2NODES, "ssgd", 100, 10, 0, 1);
  simulate(&b, HETERO_2NODES, "ssgd:overlap=1,bucket=1GiB", 100, 10, 0, 1);
  simulate(&c, HETERO_2NODES, "ssgd:overlap=1,bucket=4MiB", 100, 10, 0, 1);
  ASSERT_EQ(a.rc, 0);
  ASSERT_EQ(b.rc, 0);
  ASSERT_EQ(c.rc, 0);
  ASSERT_REL(b.res.summary.sim_time_s, a.res.summary.sim_time_s, 1e-12);
  /* Small buckets hide communication behind the backward pass, but never compute. */
  ASSERT(c.res.summary.sim_time_s < a.res.summary.sim_time_s);
  ASSERT(c.res.summary.mean_iteration_s > 0.006 + 0.0015 * 20);
  run_free(&a);
  run_free(&b);
  run_free(&c);
}

/* Three workers of one node that has two compute slots: SSGD's round holds two steps one after
 * the other (the third waits for a slot), plus the all-reduce; ASP's updates come at two per
 * step; a node with as many slots as workers is the node without. */
static void test_compute_slots(void) {
#define THREE_SHARED(SLOTS)                                      \
  "name: shared\n"                                                \
  "network: {bandwidth: 1000000Gbps, latency: 0s}\n"              \
  "parameter_server: {bandwidth: 1000000Gbps, latency: 0s}\n"     \
  "device_types:\n"                                               \
  "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"                 \
  "nodes:\n"                                                      \
  "  - name: n0\n"                                                \
  "    link: {bandwidth: 1000000Gbps, latency: 0s}\n" SLOTS       \
  "    devices: [{type: g, count: 3}]\n"
  const char *none = THREE_SHARED(""), *two = THREE_SHARED("    compute_slots: 2\n"),
             *many = THREE_SHARED("    compute_slots: 3\n");
#undef THREE_SHARED
  run a, b, c, pa, pb;
  simulate(&a, none, "ssgd", 60, 10, 0, 1);
  simulate(&b, two, "ssgd", 60, 10, 0, 1);
  simulate(&c, many, "ssgd", 60, 10, 0, 1);
  simulate(&pa, none, "asp", 60, 30, 0, 1);
  simulate(&pb, two, "asp", 60, 30, 0, 1);
  ASSERT_EQ(a.rc, 0);
  ASSERT_EQ(b.rc, 0);
  ASSERT_EQ(c.rc, 0);
  ASSERT_EQ(pa.rc, 0);
  ASSERT_EQ(pb.rc, 0);
  double step = 0.010 + 0.001 * 20; /* 30 ms */
  ASSERT_REL(a.res.summary.mean_iteration_s, step, 1e-3);
  ASSERT_REL(b.res.summary.mean_iteration_s, 2 * step, 1e-3);
  ASSERT_EQ(c.res.summary.sim_time_s, a.res.summary.sim_time_s);
  /* The wait is the worker's idle time before its step, not compute: busy time is unchanged. */
  double busy_a = 0, busy_b = 0;
  for (int i = 0; i < 3; i++) busy_a += a.res.workers[i].busy_s, busy_b += b.res.workers[i].busy_s;
  ASSERT_REL(busy_b, busy_a, 1e-9);
  const hs_step_row *r[16];
  int n = worker_rows(&b, 2, r, 16);
  ASSERT(n >= 2);
  if (n >= 2) ASSERT_REL(r[0]->start_s, step, 1e-9); /* worker 2 waited for worker 0's slot */
  /* Many slots (the heap): 1,000 workers on 300 slots step in ceil(1000 / 300) = 4 waves. */
  const char *big = "name: big\n"
                    "network: {bandwidth: 1000000Gbps, latency: 0s}\n"
                    "device_types:\n"
                    "  g: {compute: {t0: 9ms, per_sample: 1ms}}\n"
                    "nodes:\n"
                    "  - {name: n0, link: {bandwidth: 1000000Gbps, latency: 0s}, compute_slots: 300,"
                    " devices: [{type: g, count: 1000}]}\n";
  run h;
  simulate(&h, big, "ssgd", 1000, 5, 0, 1); /* a sample each: 10 ms steps */
  ASSERT_EQ(h.rc, 0);
  ASSERT_REL(h.res.summary.mean_iteration_s, 4 * 0.010, 1e-3);
  run_free(&h);
  /* ASP: 3 updates per 30 ms step without slots, 2 with two (ASP's first round aside). */
  ASSERT_REL(pa.res.summary.mean_iteration_s, step / 3, 0.05);
  ASSERT_REL(pb.res.summary.mean_iteration_s, step / 2, 0.05);
  run_free(&a);
  run_free(&b);
  run_free(&c);
  run_free(&pa);
  run_free(&pb);
}

/* A bucket of one byte would cut resnet18's gradient into 44.7 M buckets: refused, saying so. */
static void test_overlap_too_many_buckets(void) {
  run r;
  simulate(&r, HETERO_2NODES, "ssgd:overlap=1,bucket=1", 100, 10, 0, 1);
  ASSERT_EQ(r.rc, HS_EINVAL);
  ASSERT_CONTAINS(r.d.msg, "buckets of 1 bytes; at most 1048576");
  run_free(&r);
}

/* A sink that fails with a code of its own (positive, not an HS_E* one) after 3 rows. */
static int sink_fails(void *ctx, const hs_step_row *row, hs_diag *d) {
  (void)row;
  int *n = ctx;
  if (++*n > 3) return hs_diag_set(d, 7, "sink full");
  return 0;
}

/* The sinks' contract: a non-zero return ends the run; before 2026-11-29 a positive one was
 * read as a policy's success on its way back, and the run went on. */
static void test_sink_positive_code_ends_run(void) {
  hs_cluster_spec spec;
  hs_diag d = {0};
  ASSERT_EQ(hs_cluster_parse(&spec, "t.yaml", HOMO_1NODE, strlen(HOMO_1NODE), &d), 0);
  const char *policies[] = {"ssgd", "asp", "adsp"};
  for (int i = 0; i < 3; i++) {
    const hs_policy *pol;
    hs_params params;
    ASSERT_EQ(hs_policy_parse(policies[i], &pol, &params, &d), 0);
    int n = 0;
    hs_sim_config cfg = {.cluster = &spec, .model = "resnet18", .grad_bytes = M_BYTES, .param_bytes = M_BYTES,
                         .dataset_size = 50000, .global_batch = 64, .policy = pol, .params = &params, .seed = 1,
                         .max_iterations = 50, .sink = sink_fails, .sink_ctx = &n};
    hs_sim_result res;
    hs_diag sd = {0};
    ASSERT_EQ(hs_sim_run(&cfg, &res, &sd), HS_ERUNTIME);
    ASSERT_CONTAINS(sd.msg, "sink full");
    ASSERT_EQ(n, 4);
    hs_sim_result_free(&res);
  }
  hs_cluster_spec_free(&spec);
}

static const char *PS_FAST_SERVER =
    "name: ps\n"
    "network: {bandwidth: 10Gbps, latency: 50us}\n"
    "parameter_server: {bandwidth: 100000Gbps, latency: 50us}\n"
    "device_types:\n"
    "  a: {compute: {t0: 20ms, per_sample: 1ms}}\n"
    "  b: {compute: {t0: 30ms, per_sample: 3ms}}\n"
    "nodes:\n"
    "  - {name: n0, devices: [{type: a, count: 2}]}\n"
    "  - {name: n1, devices: [{type: b, count: 2}]}\n";

static void test_asp_throughput_server_not_bottleneck(void) {
  run r;
  simulate(&r, PS_FAST_SERVER, "asp", 64, 0, 30.0, 1);
  ASSERT_EQ(r.rc, 0);
  double xfer = 50e-6 + M_BYTES / (10e9 / 8);
  double cyc_a = 0.020 + 0.016 + 2 * xfer, cyc_b = 0.030 + 0.048 + 2 * xfer;
  /* Every step of a worker takes exactly its own cycle: compute, push, pull. */
  const hs_step_row *st[4096];
  int n = worker_rows(&r, 0, st, 4096);
  ASSERT(n > 10);
  for (int i = 1; i < n; i++) ASSERT_REL(st[i]->start_s - st[i - 1]->start_s, cyc_a, 1e-9);
  n = worker_rows(&r, 3, st, 4096);
  for (int i = 1; i < n; i++) ASSERT_REL(st[i]->start_s - st[i - 1]->start_s, cyc_b, 1e-9);
  /* So the update rate is the sum of the workers' rates. */
  double rate = 2 / cyc_a + 2 / cyc_b;
  ASSERT_REL((double)r.res.summary.iterations / 30.0, rate, 0.01);
  /* Staleness is recorded: with 4 workers, pushes see others' updates. */
  int stale = 0;
  for (int i = 0; i < r.rows.n; i++) stale |= r.rows.r[i].staleness > 0;
  ASSERT(stale);
  run_free(&r);
}

/* parameter_server.pull: two identical workers under asp, the server 5 ms an update. at_once
 * (the default): a pull leaves with the updates applied so far, so after the first round the
 * workers are half a round apart and every push is one version stale. after_updates: a pull
 * waits for the updates queued before it (one lane in arrival order), so both workers pull the
 * version that holds both pushes and start together: the pushes are 0 and 1 versions stale. */
static void test_ps_pull_after_updates(void) {
#define PULL_YAML                                                                             \
      "name: ps\n"                                                                              \
      "network: {bandwidth: 10Gbps, latency: 50us}\n"                                          \
      "parameter_server: {bandwidth: 10Gbps, latency: 50us, update_time: 5ms%s}\n"             \
      "device_types:\n"                                                                        \
      "  a: {compute: {t0: 20ms, per_sample: 1ms}}\n"                                          \
      "nodes:\n"                                                                               \
      "  - {name: n0, devices: [{type: a, count: 2}]}\n"
  char yaml[512];
  run r[2];
  for (int k = 0; k < 2; k++) {
    snprintf(yaml, sizeof yaml, PULL_YAML, k ? ", pull: after_updates" : "");
    simulate(&r[k], yaml, "asp", 32, 200, 0, 1);
    ASSERT_EQ(r[k].rc, 0);
  }
  double mean[2];
  int together[2];
  for (int k = 0; k < 2; k++) {
    const hs_step_row *a[256], *b[256];
    int na = worker_rows(&r[k], 0, a, 256), nb = worker_rows(&r[k], 1, b, 256);
    long sum = 0;
    for (int i = 0; i < r[k].rows.n; i++) sum += r[k].rows.r[i].staleness;
    mean[k] = (double)sum / r[k].rows.n;
    together[k] = 0; /* later steps both workers start on the same version */
    for (int i = 1; i < na && i < nb; i++) together[k] += a[i]->model_version == b[i]->model_version;
    printf("  pull %s: mean staleness %.3f, %d of %d later steps on the same version, %.4f s\n",
           k ? "after_updates" : "at_once", mean[k], together[k], (na < nb ? na : nb) - 1,
           r[k].res.summary.sim_time_s);
  }
  ASSERT(mean[0] > 0.98);
  ASSERT(mean[1] > 0.45 && mean[1] < 0.55);
  ASSERT_EQ(together[0], 0);
  ASSERT(together[1] >= 90);
  /* Waiting for the other's update makes each round longer. */
  ASSERT(r[1].res.summary.sim_time_s > r[0].res.summary.sim_time_s);
  run_free(&r[0]);
  run_free(&r[1]);
#undef PULL_YAML
}

/* ps-bsp, 4 workers, 10 rounds on a slow server whose times are `server` (the parameter_server
 * keys after its link): four flows share the server's 1 Gbit/s, so each push and each pull takes
 * a + 4M/b_s, and a round takes the step, both transfers and server_s of the server's own work.
 * The run ends at the 10th apply, before the last pull. */
static void check_ps_bsp_rounds(const char *server, double server_s) {
  char yaml[512];
  snprintf(yaml, sizeof yaml,
           "name: ps\n"
           "network: {bandwidth: 10Gbps, latency: 50us}\n"
           "parameter_server: {bandwidth: 1Gbps, latency: 100us, %s}\n"
           "device_types:\n"
           "  a: {compute: {t0: 20ms, per_sample: 1ms}}\n"
           "nodes:\n"
           "  - {name: n0, devices: [{type: a, count: 4}]}\n",
           server);
  run r;
  simulate(&r, yaml, "ps-bsp", 64, 10, 0, 1);
  ASSERT_EQ(r.rc, 0);
  double x = 100e-6 + 4 * M_BYTES / (1e9 / 8);
  double iter = 0.020 + 0.016 + 2 * x + server_s;
  const hs_step_row *st[64];
  for (int w = 0; w < 4; w++) {
    int n = worker_rows(&r, w, st, 64);
    ASSERT_EQ(n, 10);
    for (int i = 1; i < n; i++) ASSERT_REL(st[i]->start_s - st[i - 1]->start_s, iter, 1e-9);
  }
  ASSERT_REL(r.res.summary.sim_time_s, 10 * iter - x, 1e-9);
  run_free(&r);
}

static void test_ps_bsp_server_bottleneck(void) { check_ps_bsp_rounds("update_time: 0s", 0); }

/* accumulate_time: the server adds each accumulated push into its accumulator, one at a time,
 * before the apply (update_time). The four pushes arrive together (they share the server's
 * link), so a round takes 4 accumulations and the apply more; 0 leaves it as above. */
static void test_ps_bsp_accumulate_time(void) {
  check_ps_bsp_rounds("update_time: 0.5ms, accumulate_time: 1ms", 4 * 1e-3 + 0.5e-3);
}

/* apply_latency: the apply starts that long after the policy asked for it (its command's round
 * trip), once per round on top of the accumulations and the apply. */
static void test_ps_bsp_apply_latency(void) {
  check_ps_bsp_rounds("update_time: 0.5ms, accumulate_time: 1ms, apply_latency: 0.3ms", 4 * 1e-3 + 0.5e-3 + 0.3e-3);
}

/* A real run's replica (`hetsim validate`): one worker computes once and pushes its gradient
 * through top-k at density 0.1. By default the compression takes the cost model's time times
 * the worker's slowdown (2 here) and the compressed bytes travel; with compress_scale 100 it
 * takes 100 model times whatever the slowdown; with dense_wire the gradient's fp32 bytes
 * travel as well. */
static int cz_start(void *state, hs_runtime *rt) {
  (void)state;
  return hs_rt_compute(rt, 0, 16, 0);
}
static int cz_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  (void)state, (void)o;
  hs_comm_opts push = {.what = HS_COMM_GRAD, .compressor = &hs_compressor_topk, .ratio = 0.1};
  return hs_rt_push(rt, 0, &push);
}
static const hs_param_spec cz_params[] = {{NULL, 0, NULL, 0, 0, NULL, NULL}};
static const hs_policy cz_policy = {.version = HS_POLICY_VERSION, .name = "cz", .description = "one compressed push",
                                    .source = "tests/test_sim.c", .params = cz_params, .state_size = 1,
                                    .start = cz_start, .on_compute = cz_on_compute};

static double cz_time(double scale, int dense) {
  static const char *one =
      "name: one\n"
      "network: {bandwidth: 80Gbps, latency: 10us}\n"
      "parameter_server: {bandwidth: 8Gbps, latency: 100us}\n"
      "device_types:\n"
      "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
      "nodes:\n"
      "  - {name: n0, devices: [{type: g, count: 1, slowdown: 2}]}\n";
  hs_cluster_spec spec;
  hs_diag d = {0};
  memset(&spec, 0, sizeof spec);
  ASSERT_EQ(hs_cluster_parse(&spec, "one.yaml", one, strlen(one), &d), 0);
  hs_params none;
  memset(&none, 0, sizeof none);
  hs_sim_config cfg = {.cluster = &spec, .model = "resnet18", .grad_bytes = M_BYTES, .param_bytes = M_BYTES,
                       .dataset_size = 50000, .global_batch = 16, .policy = &cz_policy, .params = &none,
                       .seed = 1, .max_iterations = 1, .compress_scale = scale, .dense_wire = dense};
  hs_sim_result res;
  int rc = hs_sim_run(&cfg, &res, &d);
  if (rc) fprintf(stderr, "  %s\n", d.msg);
  ASSERT_EQ(rc, 0);
  double t = res.summary.sim_time_s;
  hs_sim_result_free(&res);
  hs_cluster_spec_free(&spec);
  return t;
}

static void test_real_compression(void) {
  hs_block b = hs_compress_flat_block(M_BYTES / 4);
  double model = hs_compress_seconds(&hs_compressor_topk, &b, 1, 0.1);
  double wire = hs_compress_bytes(&hs_compressor_topk, &b, 1, 0.1);
  double ref = cz_time(0, 0), scaled = cz_time(100, 0), dense = cz_time(100, 1);
  ASSERT_REL(scaled - ref, (100 - 2) * model, 1e-9);
  /* The push's bytes at the server link's 1 GB/s. */
  ASSERT_REL(dense - scaled, (M_BYTES - wire) / 1e9, 1e-9);
}

static void test_ssp_s0_equals_bsp(void) {
  static const char *het =
      "name: ps\n"
      "network: {bandwidth: 10Gbps, latency: 50us}\n"
      "parameter_server: {bandwidth: 5Gbps, latency: 100us}\n"
      "device_types:\n"
      "  a: {compute: {t0: 20ms, per_sample: 1ms}}\n"
      "  b: {compute: {t0: 10ms, per_sample: 2ms}}\n"
      "nodes:\n"
      "  - {name: n0, devices: [{type: a, count: 2}, {type: b, count: 1}]}\n"
      "jitter: {cv: 0.2}\n";
  run bsp, ssp;
  simulate(&bsp, het, "ps-bsp", 60, 25, 0, 3);
  simulate(&ssp, het, "ssp:s=0", 60, 25 * 3, 0, 3);
  ASSERT_EQ(bsp.rc, 0);
  ASSERT_EQ(ssp.rc, 0);
  ASSERT_REL(ssp.res.summary.sim_time_s, bsp.res.summary.sim_time_s, 1e-12);
  ASSERT_EQ(ssp.rows.n, bsp.rows.n);
  for (int i = 0; i < bsp.rows.n && i < ssp.rows.n; i++) {
    ASSERT_EQ(ssp.rows.r[i].worker, bsp.rows.r[i].worker);
    ASSERT_REL(ssp.rows.r[i].start_s, bsp.rows.r[i].start_s, 1e-12);
  }
  /* A looser bound lets fast workers run ahead: more updates in the same time. */
  run loose;
  simulate(&loose, het, "ssp:s=3", 60, 0, ssp.res.summary.sim_time_s, 3);
  ASSERT_EQ(loose.rc, 0);
  ASSERT(loose.res.summary.iterations > ssp.res.summary.iterations);
  run_free(&bsp);
  run_free(&ssp);
  run_free(&loose);
}

static void test_localsgd_rounds(void) {
  run r;
  simulate(&r, HOMO_1NODE, "localsgd:tau=5", 64, 4, 0, 1);
  ASSERT_EQ(r.rc, 0);
  ASSERT_EQ(r.res.summary.iterations, 4);
  ASSERT_EQ(r.rows.n, 4 * 4 * 5);
  double t = 0.010 + 0.001 * 16, ring = 2.0 * 3 * (5e-6 + M_BYTES / (4 * 12e9));
  ASSERT_REL(r.res.summary.mean_iteration_s, 5 * t + ring, 1e-12);
  run_free(&r);
}

/* Field by field: the struct has padding, which a designated initializer leaves unspecified.
 * Doubles compare by bits, so that NaN (no loss) equals NaN and nothing is rounded away. */
static int same_bits(double x, double y) { return memcmp(&x, &y, sizeof x) == 0; }

static int rows_equal(const rows *a, const rows *b) {
  if (a->n != b->n) return 0;
  for (int i = 0; i < a->n; i++) {
    const hs_step_row *x = &a->r[i], *y = &b->r[i];
    if (x->worker != y->worker || x->step != y->step || x->batch != y->batch ||
        !same_bits(x->start_s, y->start_s) || !same_bits(x->compute_end_s, y->compute_end_s) ||
        !same_bits(x->comm_end_s, y->comm_end_s) || !same_bits(x->wait_s, y->wait_s) ||
        x->model_version != y->model_version || x->staleness != y->staleness ||
        !same_bits(x->loss, y->loss))
      return 0;
  }
  return 1;
}

/* Six equal workers with lognormal compute jitter (cv 0.3): the determinism and jitter-stream
 * tests' cluster. */
static const char *const jit =
    "name: jit\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "device_types:\n"
    "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
    "nodes:\n"
    "  - {name: n0, devices: [{type: g, count: 6}]}\n"
    "jitter: {cv: 0.3}\n";

static void test_determinism(void) {
  const char *pols[] = {"ssgd", "asp", "ssp:s=2", "ps-bsp", "localsgd:tau=3"};
  for (int p = 0; p < 5; p++) {
    run a, b, c;
    simulate(&a, jit, pols[p], 60, 30, 0, 42);
    simulate(&b, jit, pols[p], 60, 30, 0, 42);
    simulate(&c, jit, pols[p], 60, 30, 0, 43);
    ASSERT_EQ(a.rc, 0);
    ASSERT(a.rows.n > 0);
    if (!rows_equal(&a.rows, &b.rows)) HS_FAIL_AT("%s: same seed gave different rows", pols[p]);
    if (rows_equal(&a.rows, &c.rows)) HS_FAIL_AT("%s: different seeds gave identical rows", pols[p]);
    run_free(&a);
    run_free(&b);
    run_free(&c);
  }
}

/* Each worker's compute jitter comes from its own stream of the run's seed (core_rng.h): the
 * step times of worker w are the model's times scaled by the draws of hs_rng_stream(seed, w)
 * with hs_rng_lognormal_unit, in step order, whatever the other workers draw. */
static void test_jitter_streams(void) {
  const char *pols[] = {"ssgd", "asp"};
  for (int p = 0; p < 2; p++) {
    run r;
    simulate(&r, jit, pols[p], 60, 30, 0, 42);
    ASSERT_EQ(r.rc, 0);
    int checked = 0;
    for (int w = 0; w < 6; w++) {
      const hs_step_row *mine[64];
      int n = worker_rows(&r, w, mine, 64);
      ASSERT(n >= 1);
      gsl_rng *g = hs_rng_stream(42, (uint64_t)w);
      ASSERT(g != NULL);
      for (int i = 0; i < n; i++) {
        ASSERT_EQ(mine[i]->step, (int64_t)i);
        double want = (0.010 + 0.001 * mine[i]->batch) * hs_rng_lognormal_unit(g, 0.3);
        ASSERT_NEAR(mine[i]->compute_end_s - mine[i]->start_s, want, 1e-12);
        checked++;
      }
      gsl_rng_free(g);
    }
    ASSERT(checked >= 30);
    run_free(&r);
  }
}

static void test_join_and_leave(void) {
  static const char *dyn =
      "name: dyn\n"
      "network: {bandwidth: 10Gbps, latency: 20us}\n"
      "device_types:\n"
      "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
      "nodes:\n"
      "  - {name: n0, link: {bandwidth: 12GB/s, latency: 5us}, devices: [{type: g, count: 4}]}\n"
      "events:\n"
      "  - {at: 1s, worker: 3, slowdown: 3.0}\n"
      "  - {at: 2s, leave: 3}\n"
      "  - {at: 3s, join: {type: g, node: n0}}\n";
  const char *pols[] = {"ssgd", "asp", "ssp:s=1", "ps-bsp", "localsgd:tau=2"};
  for (int p = 0; p < 5; p++) {
    run r;
    simulate(&r, dyn, pols[p], 64, 0, 5.0, 1);
    if (r.rc) HS_FAIL_AT("%s: %s", pols[p], r.d.msg);
    ASSERT_EQ(r.res.n_workers, 5);
    ASSERT_NEAR(r.res.workers[3].left_at, 2.0, 1e-12);
    ASSERT(r.res.workers[4].joined_at >= 3.0);
    ASSERT(r.res.workers[4].steps > 0);
    /* No step of the departed worker starts after it left. */
    for (int i = 0; i < r.rows.n; i++)
      if (r.rows.r[i].worker == 3 && r.rows.r[i].start_s >= 2.0)
        HS_FAIL_AT("%s: worker 3 started a step at %g after leaving", pols[p], r.rows.r[i].start_s);
    run_free(&r);
  }
  /* localsgd: a worker that leaves in the middle of its local steps ends its round early. */
  static const char *mid =
      "name: mid\n"
      "device_types:\n"
      "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
      "nodes:\n"
      "  - {devices: [{type: g, count: 2}]}\n"
      "events:\n"
      "  - {at: 0.03s, leave: 1}\n";
  run m;
  simulate(&m, mid, "localsgd:tau=10", 32, 3, 0, 1);
  if (m.rc) HS_FAIL_AT("localsgd leave mid-round: %s", m.d.msg);
  ASSERT_EQ(m.res.summary.iterations, 3);
  ASSERT_EQ(m.res.workers[1].steps, 2);
  run_free(&m);
  /* ps-bsp: a worker that leaves between the apply and its next step does not hold the
   * round up. Step: 26 ms compute, ~35 ms push, so worker 1 leaves while pulling after the
   * first apply. */
  static const char *bsp =
      "name: bsp\n"
      "network: {bandwidth: 10Gbps, latency: 20us}\n"
      "device_types:\n"
      "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
      "nodes:\n"
      "  - {devices: [{type: g, count: 2}]}\n"
      "events:\n"
      "  - {at: 0.1s, leave: 1}\n";
  simulate(&m, bsp, "ps-bsp", 32, 5, 0, 1);
  if (m.rc) HS_FAIL_AT("ps-bsp leave after apply: %s", m.d.msg);
  ASSERT_EQ(m.res.status, HS_SIM_COMPLETE);
  ASSERT_EQ(m.res.summary.iterations, 5);
  ASSERT_EQ(m.res.workers[1].steps, 1);
  run_free(&m);
  /* ssgd: while worker 3 is slowed 3x, iterations are slower; after it leaves, the three left
   * take the global batch between them. */
  run r;
  simulate(&r, dyn, "ssgd", 64, 0, 5.0, 1);
  const hs_step_row *st[1024];
  int n = worker_rows(&r, 0, st, 1024);
  int saw21 = 0;
  for (int i = 0; i < n; i++) saw21 |= st[i]->batch == 22 || st[i]->batch == 21;
  ASSERT(saw21);
  run_free(&r);
}

static void test_memory_limit(void) {
  static const char *small =
      "name: small\n"
      "device_types:\n"
      "  g: {max_batch: 8, compute: {t0: 10ms, per_sample: 1ms}}\n"
      "nodes:\n"
      "  - {devices: [{type: g, count: 2}]}\n";
  run r;
  simulate(&r, small, "ssgd", 32, 5, 0, 1);
  ASSERT_EQ(r.rc, HS_EINVAL);
  ASSERT_CONTAINS(r.d.msg, "memory limit 8");
  ASSERT_EQ(r.rows.n, 0);
  run_free(&r);
  simulate(&r, small, "ssgd", 16, 5, 0, 1);
  ASSERT_EQ(r.rc, 0);
  run_free(&r);
  /* From memory and activation size: (1 GiB - 4 * 100 MB) / 10 MB per sample. */
  hs_device_type t = {.memory = 1073741824.0};
  ASSERT_EQ(hs_sim_max_batch(&t, 100e6, 10e6), 67);
  t.memory = 100e6;
  ASSERT_EQ(hs_sim_max_batch(&t, 100e6, 10e6), -1);
}

static void test_collective_costs_linear_events(void) {
  /* 1,000 workers, 10 iterations: one event per compute step and one per all-reduce. */
  static const char *big =
      "name: big\n"
      "network: {bandwidth: 100Gbps, latency: 5us}\n"
      "device_types:\n"
      "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
      "nodes:\n"
      "  - {name: n0, devices: [{type: g, count: 500}]}\n"
      "  - {name: n1, devices: [{type: g, count: 500}]}\n";
  run r;
  simulate(&r, big, "ssgd", 32000, 10, 0, 1);
  ASSERT_EQ(r.rc, 0);
  ASSERT_EQ(r.res.summary.events, 10 * 1000 + 10);
  run_free(&r);
}

static void test_shared_link_max_min(void) {
  hs_shared_link l;
  hs_shared_link_init(&l, 100.0);
  ASSERT_EQ(hs_shared_link_add(&l, 1, 1000, 10.0), 0);  /* capped below the fair share */
  ASSERT_EQ(hs_shared_link_add(&l, 2, 1000, 1000.0), 0);
  ASSERT_EQ(hs_shared_link_add(&l, 3, 1000, 1000.0), 0);
  double t = hs_shared_link_rates(&l, 0.0);
  /* Flow 1 keeps 10; flows 2 and 3 split the other 90. */
  ASSERT_NEAR(t, 1000 / 45.0, 1e-12);
  hs_shared_link_advance(&l, t);
  int64_t done[4];
  ASSERT_EQ(hs_shared_link_reap(&l, done, 4), 2);
  t = hs_shared_link_rates(&l, t);
  /* Flow 1 alone, still limited by its own cap. */
  ASSERT_NEAR(t, 1000 / 45.0 + (1000 - 10 * 1000 / 45.0) / 10.0, 1e-9);
  hs_shared_link_free(&l);
}

static void test_stop_conditions(void) {
  run r;
  simulate(&r, HOMO_1NODE, "ssgd", 64, 0, 1.0, 1);
  ASSERT_EQ(r.rc, 0);
  ASSERT_EQ(r.res.status, HS_SIM_COMPLETE);
  ASSERT_NEAR(r.res.summary.sim_time_s, 1.0, 1e-12);
  run_free(&r);
  /* All workers leave: the run stalls rather than spinning. */
  static const char *gone =
      "name: gone\n"
      "device_types:\n"
      "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
      "nodes:\n"
      "  - {devices: [{type: g}]}\n"
      "events:\n"
      "  - {at: 0.5s, leave: 0}\n";
  simulate(&r, gone, "asp", 8, 1000000, 0, 1);
  ASSERT_EQ(r.rc, 0);
  ASSERT_EQ(r.res.status, HS_SIM_STALLED);
  run_free(&r);
}

static const hs_test_case cases[] = {
    {"ssgd_homogeneous_one_node", test_ssgd_homogeneous_one_node},
    {"ssgd_heterogeneous_two_nodes", test_ssgd_heterogeneous_two_nodes},
    {"ring_and_hierarchical_closed_forms", test_ring_and_hierarchical_closed_forms},
    {"ring_link_inverts_ring", test_ring_link_inverts_ring},
    {"overlap_single_bucket_equals_no_overlap", test_overlap_single_bucket_equals_no_overlap},
    {"overlap_too_many_buckets", test_overlap_too_many_buckets},
    {"compute_slots", test_compute_slots},
    {"sink_positive_code_ends_run", test_sink_positive_code_ends_run},
    {"asp_throughput_server_not_bottleneck", test_asp_throughput_server_not_bottleneck},
    {"ps_bsp_server_bottleneck", test_ps_bsp_server_bottleneck},
    {"ps_bsp_accumulate_time", test_ps_bsp_accumulate_time},
    {"ps_bsp_apply_latency", test_ps_bsp_apply_latency},
    {"ps_pull_after_updates", test_ps_pull_after_updates},
    {"ssp_s0_equals_bsp", test_ssp_s0_equals_bsp},
    {"real_compression", test_real_compression},
    {"localsgd_rounds", test_localsgd_rounds},
    {"determinism", test_determinism},
    {"jitter_streams", test_jitter_streams},
    {"join_and_leave", test_join_and_leave},
    {"memory_limit", test_memory_limit},
    {"collective_costs_linear_events", test_collective_costs_linear_events},
    {"shared_link_max_min", test_shared_link_max_min},
    {"stop_conditions", test_stop_conditions},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  hs_gsl_init();
  return hs_test_main("sim", cases, argc, argv);
}
