/* Conformance of the runtimes under the policy interface: one scripted policy, and each registered
 * policy on a small scenario, driven through the simulator (sim/sim_run.c, the driver of the
 * runtime core), the threaded real runtime (real/real_run.c) and the multi-process one
 * (real/real_rank.c: rank 0 in this process, the other ranks forked, torchrun-style on
 * 127.0.0.1 with two free ports), both on the cpu backend with synthetic CIFAR-shaped data.
 * They must agree on what a policy sees and what is stored, up to timing: the same number of
 * iterations, the same sequence of callbacks per worker (kind, batch, tag) and of
 * communication completions, and the same step rows up to their times (worker, step, batch,
 * model version, staleness). tests/cli_real_ranks.sh drives the ranks through the CLI.
 * Runs in a few seconds: mobilenetv2 at batch 2 per worker on the cpu backend. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/core_config.h"
#include "nn/nn_data.h"
#include "nn/nn_zoo.h"
#include "policies/pol_compress.h"
#include "policies/pol_registry.h"
#include "real/real_comm.h"
#include "real/real_rank.h"
#include "real/real_rank_tcp.h"
#include "real/real_run.h"
#include "runtime/rt_core.h"
#include "sim/sim_run.h"
#include "tests/hs_test.h"

#define MODEL "mobilenetv2"
#define WORKERS 2
#define PER_WORKER 2
#define ROUNDS 4
#define POLICY_ROUNDS 2

static const char *CLUSTER =
    "name: conformance\n"
    "network: {bandwidth: 10Gbps, latency: 20us}\n"
    "device_types:\n"
    "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
    "nodes:\n"
    "  - {name: n0, link: {bandwidth: 12GB/s, latency: 5us}, devices: [{type: g, count: 2}]}\n";

/* --- what a runtime showed the policy, and what it stored --------------------------------- */

#define MAX_EV 256

typedef struct seen {
  char ev[WORKERS + 1][MAX_EV][48]; /* per worker; [WORKERS]: collectives, applies, timers */
  int n[WORKERS + 1];
  hs_step_row rows[MAX_EV];
  int n_rows;
} seen;

static void note(seen *s, int w, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(seen *s, int w, const char *fmt, ...) {
  int i = w >= 0 && w < WORKERS ? w : WORKERS;
  if (s->n[i] >= MAX_EV) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->ev[i][s->n[i]++], 48, fmt, ap);
  va_end(ap);
}

static int sink(void *ctx, const hs_step_row *row, hs_diag *d) {
  (void)d;
  seen *s = ctx;
  if (s->n_rows < MAX_EV) s->rows[s->n_rows++] = *row;
  return 0;
}

/* --- the scripted policy: rounds of compute on every worker, a local update on worker 0, an
 * all-reduce of gradients with explicit weights, a timer; the learning rate halves once ---- */

typedef struct script {
  seen *seen;
  int done, round;
} script;

static seen *g_seen; /* the run's record: the policy's state is the runtime's to allocate */

static int sc_round(script *s, hs_runtime *rt) {
  s->done = 0;
  for (int w = 0; w < WORKERS; w++) {
    int rc = hs_rt_compute(rt, w, PER_WORKER + w, (uint64_t)(100 * s->round + w));
    if (rc) return rc;
  }
  return 0;
}

static int sc_init(void *state, hs_runtime *rt, const hs_params *p) {
  (void)rt, (void)p;
  script *s = state;
  s->seen = g_seen;
  return 0;
}

static int sc_start(void *state, hs_runtime *rt) {
  script *s = state;
  int rc = hs_rt_timer(rt, 0.0, 7);
  return rc ? rc : sc_round(s, rt);
}

static int sc_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  script *s = state;
  note(s->seen, o->worker, "compute b=%d tag=%llu", o->batch, (unsigned long long)o->tag);
  if (o->worker == 0) {
    int rc = hs_rt_local_update(rt, 0);
    if (rc) return rc;
  }
  if (++s->done < WORKERS) return 0;
  static const int ws[WORKERS] = {0, 1};
  static const double wts[WORKERS] = {1.0, 3.0};
  hs_comm_opts co = {.what = HS_COMM_GRAD, .tag = (uint64_t)s->round};
  return hs_rt_allreduce(rt, ws, WORKERS, wts, &co);
}

static int sc_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  script *s = state;
  note(s->seen, o->worker, "comm kind=%d tag=%llu", (int)o->kind, (unsigned long long)o->tag);
  note(s->seen, -1, "version %llu of round %d", (unsigned long long)o->version, s->round);
  for (int w = 0; w < WORKERS; w++)
    if (hs_rt_worker_version(rt, w) != o->version)
      note(s->seen, -1, "worker %d behind at %llu", w, (unsigned long long)o->version);
  if (++s->round == 2) {
    int rc = hs_rt_set_lr(rt, -1, 0.005);
    if (rc) return rc;
  }
  return sc_round(s, rt);
}

static int sc_on_timer(void *state, hs_runtime *rt, uint64_t tag) {
  (void)rt;
  script *s = state;
  note(s->seen, -1, "timer %llu", (unsigned long long)tag);
  return 0;
}

static const hs_param_spec no_params[] = {{NULL, 0, NULL, 0, 0, NULL, NULL}};

static const hs_policy scripted = {
    .version = HS_POLICY_VERSION,
    .name = "scripted",
    .description = "conformance script",
    .source = "tests/test_runtime_conformance.c",
    .params = no_params,
    .state_size = sizeof(script),
    .init = sc_init,
    .start = sc_start,
    .on_compute = sc_on_compute,
    .on_comm = sc_on_comm,
    .on_timer = sc_on_timer,
};

/* --- the two drivers ----------------------------------------------------------------------- */

typedef struct outcome {
  int rc;
  int64_t iterations;
  hs_diag d;
} outcome;

static outcome run_sim(const hs_policy *pol, const hs_params *params, int64_t global_batch, int64_t iters, seen *s) {
  outcome out = {0};
  hs_cluster_spec spec;
  memset(&spec, 0, sizeof spec);
  if ((out.rc = hs_cluster_parse(&spec, "conformance.yaml", CLUSTER, strlen(CLUSTER), &out.d))) return out;
  hs_model_stats zs;
  hs_zoo_stats(MODEL, &zs, NULL);
  double bytes = 4.0 * (double)zs.params;
  hs_sim_config cfg = {.cluster = &spec, .model = MODEL, .grad_bytes = bytes, .param_bytes = bytes,
                       .dataset_size = 256, .global_batch = global_batch, .policy = pol, .params = params,
                       .seed = 5, .max_iterations = iters, .sink = sink, .sink_ctx = s};
  hs_sim_result res;
  g_seen = s;
  out.rc = hs_sim_run(&cfg, &res, &out.d);
  out.iterations = res.summary.iterations;
  hs_sim_result_free(&res);
  hs_cluster_spec_free(&spec);
  return out;
}

static outcome run_threads(const hs_policy *pol, const hs_params *params, int64_t global_batch, int64_t iters,
                           seen *s) {
  outcome out = {0};
  hs_cluster_spec spec;
  memset(&spec, 0, sizeof spec);
  hs_dataset *train = NULL;
  if ((out.rc = hs_cluster_parse(&spec, "conformance.yaml", CLUSTER, strlen(CLUSTER), &out.d)) ||
      (out.rc = hs_data_synthetic_cifar(&train, 256, 5, &out.d)))
    goto done;
  /* A calibrated step model, so that no probe runs before the run. */
  hs_perf_model perf = {.form = HS_PERF_LINEAR, .p = {0.01, 0.001}};
  hs_real_config cfg = {.cluster = &spec, .model = MODEL, .device = "cpu", .comm = &hs_real_comm_cpu,
                        .timeout_s = 60, .train = train, .global_batch = global_batch, .policy = pol,
                        .params = params, .seed = 5, .lr = 0.01, .max_iterations = iters, .perf = &perf,
                        .sink = sink, .sink_ctx = s, .pin = HS_PIN_NONE};
  hs_real_result res;
  g_seen = s;
  out.rc = hs_real_run(&cfg, &res, &out.d);
  out.iterations = res.summary.iterations;
  hs_real_result_free(&res);
done:
  hs_data_close(train);
  hs_cluster_spec_free(&spec);
  return out;
}

/* Two free consecutive loopback ports: MASTER_PORT (the comm's star) and MASTER_PORT + 1 (the
 * control channel), as the multi-process runtime takes them. -1 when none was found. */
static int free_port_pair(void) {
  for (int tries = 0; tries < 100; tries++) {
    int a = socket(AF_INET, SOCK_STREAM, 0), b = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (a >= 0 && b >= 0 && !bind(a, (struct sockaddr *)&sa, sizeof sa) &&
        !getsockname(a, (struct sockaddr *)&sa, &len) && ntohs(sa.sin_port) < 65535) {
      sa.sin_port = htons((uint16_t)(ntohs(sa.sin_port) + 1));
      if (!bind(b, (struct sockaddr *)&sa, sizeof sa)) port = ntohs(sa.sin_port) - 1;
    }
    if (a >= 0) close(a);
    if (b >= 0) close(b);
    if (port > 0) return port;
  }
  return -1;
}

/* The multi-process runtime on loopback, as torchrun starts it (RANK, WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT): rank 0 (the coordinator, which runs the policy and stores the rows) in this
 * process, ranks 1.. forked, one per worker; with `server`, one rank more: rank 0 is then the
 * parameter server and worker w is rank w + 1. Every rank must end with 0. */
static outcome run_ranks(const hs_policy *pol, const hs_params *params, int64_t global_batch, int64_t iters,
                         int server, seen *s) {
  outcome out = {0};
  hs_cluster_spec spec;
  memset(&spec, 0, sizeof spec);
  hs_dataset *train = NULL;
  int world = WORKERS + (server ? 1 : 0), port = free_port_pair();
  pid_t kids[WORKERS + 1];
  int n_kids = 0;
  if ((out.rc = hs_cluster_parse(&spec, "conformance.yaml", CLUSTER, strlen(CLUSTER), &out.d)) ||
      (out.rc = hs_data_synthetic_cifar(&train, 256, 5, &out.d)))
    goto done;
  if (port < 0) {
    out.rc = hs_diag_set(&out.d, HS_ERUNTIME, "no two free loopback ports");
    goto done;
  }
  hs_perf_model perf = {.form = HS_PERF_LINEAR, .p = {0.01, 0.001}};
  hs_real_config cfg = {.cluster = &spec, .model = MODEL, .device = "cpu", .comm = &hs_real_comm_tcp_rank,
                        .timeout_s = 60, .train = train, .global_batch = global_batch, .policy = pol,
                        .params = params, .seed = 5, .lr = 0.01, .max_iterations = iters, .perf = &perf,
                        .sink = sink, .sink_ctx = s, .pin = HS_PIN_NONE};
  char ws[16], ps[16], rs[16];
  snprintf(ws, sizeof ws, "%d", world);
  snprintf(ps, sizeof ps, "%d", port);
  setenv("WORLD_SIZE", ws, 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", ps, 1);
  fflush(stdout);
  fflush(stderr);
  for (int r = 1; r < world; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      snprintf(rs, sizeof rs, "%d", r);
      setenv("RANK", rs, 1);
      hs_real_launch l;
      hs_real_result res;
      hs_diag d = {0};
      int rc = hs_real_launch_read(&l, world, &d);
      if (!rc) rc = hs_real_rank_run(&cfg, &l, &res, &d);
      if (rc) fprintf(stderr, "  rank %d: %s\n", r, d.msg);
      _exit(rc ? 1 : 0);
    }
    if (pid < 0) {
      out.rc = hs_diag_set(&out.d, HS_ERUNTIME, "fork: %s", strerror(errno));
      break;
    }
    kids[n_kids++] = pid;
  }
  if (!out.rc) {
    setenv("RANK", "0", 1);
    hs_real_launch l;
    hs_real_result res;
    g_seen = s;
    if (!(out.rc = hs_real_launch_read(&l, world, &out.d))) {
      out.rc = hs_real_rank_run(&cfg, &l, &res, &out.d);
      out.iterations = res.summary.iterations;
      hs_real_result_free(&res);
    }
  }
  for (int i = 0; i < n_kids; i++) {
    int st = 0;
    if (waitpid(kids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
      if (!out.rc) out.rc = hs_diag_set(&out.d, HS_ERUNTIME, "rank %d did not end with 0 (status %d)", i + 1, st);
    }
  }
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("MASTER_ADDR");
  unsetenv("MASTER_PORT");
done:
  hs_data_close(train);
  hs_cluster_spec_free(&spec);
  return out;
}

static double hs_test_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --- the tests ---------------------------------------------------------------------------- */

static int row_cmp(const void *a, const void *b) {
  const hs_step_row *x = a, *y = b;
  if (x->worker != y->worker) return x->worker - y->worker;
  return (x->step > y->step) - (x->step < y->step);
}

/* What a runtime (`name`) showed the scripted policy and stored, against the simulator's (a,
 * rows sorted): the same callbacks in the same order, per worker and for the collectives, and
 * the same step rows up to their times. */
static void same_as_sim(const seen *a, seen *b, const char *name) {
  for (int i = 0; i <= WORKERS; i++) {
    ASSERT_EQ(a->n[i], b->n[i]);
    for (int k = 0; k < a->n[i] && k < b->n[i]; k++)
      if (strcmp(a->ev[i][k], b->ev[i][k])) {
        fprintf(stderr, "  lane %d event %d: sim \"%s\", %s \"%s\"\n", i, k, a->ev[i][k], name, b->ev[i][k]);
        ASSERT(0);
      }
  }
  ASSERT(a->n[WORKERS] >= ROUNDS);
  qsort(b->rows, (size_t)b->n_rows, sizeof b->rows[0], row_cmp);
  ASSERT_EQ(a->n_rows, b->n_rows);
  ASSERT(a->n_rows >= WORKERS * ROUNDS);
  for (int k = 0; k < a->n_rows && k < b->n_rows; k++) {
    const hs_step_row *x = &a->rows[k], *y = &b->rows[k];
    ASSERT_EQ(x->worker, y->worker);
    ASSERT_EQ(x->step, y->step);
    ASSERT_EQ(x->batch, y->batch);
    ASSERT_EQ(x->model_version, y->model_version);
    ASSERT_EQ(x->staleness, y->staleness);
    ASSERT(x->compute_end_s >= x->start_s && y->compute_end_s >= y->start_s);
  }
}

/* The scripted policy through the three drivers: the simulator, the threads and the ranks (one
 * process per worker on loopback). */
static void test_scripted_policy_same_in_all(void) {
  hs_params none;
  memset(&none, 0, sizeof none);
  seen *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *c = calloc(1, sizeof *c);
  outcome sa = run_sim(&scripted, &none, WORKERS * PER_WORKER, ROUNDS, a);
  outcome rb = run_threads(&scripted, &none, WORKERS * PER_WORKER, ROUNDS, b);
  outcome rc = run_ranks(&scripted, &none, WORKERS * PER_WORKER, ROUNDS, 0, c);
  if (sa.rc) fprintf(stderr, "  sim: %s\n", sa.d.msg);
  if (rb.rc) fprintf(stderr, "  threads: %s\n", rb.d.msg);
  if (rc.rc) fprintf(stderr, "  ranks: %s\n", rc.d.msg);
  ASSERT_EQ(sa.rc, 0);
  ASSERT_EQ(rb.rc, 0);
  ASSERT_EQ(rc.rc, 0);
  ASSERT_EQ(sa.iterations, ROUNDS);
  ASSERT_EQ(rb.iterations, ROUNDS);
  ASSERT_EQ(rc.iterations, ROUNDS);
  qsort(a->rows, (size_t)a->n_rows, sizeof a->rows[0], row_cmp);
  same_as_sim(a, b, "threads");
  same_as_sim(a, c, "ranks");
  free(a);
  free(b);
  free(c);
}

/* --- compression: the same compressed sends in the threads and the ranks -------------------
 * Rounds of compute on every worker, then the gradients sent through top-k at g_cz_density
 * (0: uncompressed): with g_cz_server, pushed to the server (accumulated, one apply, every
 * worker pulls), else all-reduced. */

static double g_cz_density;
static int g_cz_server;

typedef struct cz_state {
  int done, round;
} cz_state;

static int cz_round(cz_state *s, hs_runtime *rt) {
  s->done = 0;
  for (int w = 0; w < WORKERS; w++) {
    int rc = hs_rt_compute(rt, w, PER_WORKER, (uint64_t)s->round);
    if (rc) return rc;
  }
  return 0;
}

static int cz_start(void *state, hs_runtime *rt) { return cz_round(state, rt); }

static hs_comm_opts cz_send(void) {
  hs_comm_opts o = {.what = HS_COMM_GRAD, .ps_mode = HS_PS_ACCUMULATE};
  if (g_cz_density > 0) o.compressor = &hs_compressor_topk, o.ratio = g_cz_density;
  return o;
}

static int cz_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  cz_state *s = state;
  hs_comm_opts co = cz_send();
  if (g_cz_server) return hs_rt_push(rt, o->worker, &co);
  if (++s->done < WORKERS) return 0;
  static const int ws[WORKERS] = {0, 1};
  return hs_rt_allreduce(rt, ws, WORKERS, NULL, &co);
}

static int cz_on_comm(void *state, hs_runtime *rt, const hs_comm_obs *o) {
  cz_state *s = state;
  hs_comm_opts pull = {.what = HS_COMM_MODEL};
  if (o->kind == HS_OP_PUSH) {
    if (++s->done < WORKERS) return 0;
    s->done = 0;
    return hs_rt_apply(rt, &pull);
  }
  if (o->kind == HS_OP_APPLY) {
    for (int w = 0; w < WORKERS; w++) {
      int rc = hs_rt_pull(rt, w, &pull);
      if (rc) return rc;
    }
    return 0;
  }
  if (o->kind == HS_OP_PULL && ++s->done < WORKERS) return 0;
  s->round++;
  return cz_round(s, rt);
}

static const hs_policy compressed = {
    .version = HS_POLICY_VERSION,
    .name = "compressed",
    .description = "gradients sent through top-k",
    .source = "tests/test_runtime_conformance.c",
    .params = no_params,
    .state_size = sizeof(cz_state),
    .start = cz_start,
    .on_compute = cz_on_compute,
    .on_comm = cz_on_comm,
};

/* The largest difference of the step losses of x and y (rows sorted alike), after round 0. */
static double loss_gap(seen *x, seen *y) {
  qsort(x->rows, (size_t)x->n_rows, sizeof x->rows[0], row_cmp);
  qsort(y->rows, (size_t)y->n_rows, sizeof y->rows[0], row_cmp);
  ASSERT_EQ(x->n_rows, y->n_rows);
  double gap = 0;
  for (int k = 0; k < x->n_rows && k < y->n_rows; k++) {
    ASSERT_EQ(x->rows[k].worker, y->rows[k].worker);
    ASSERT_EQ(x->rows[k].step, y->rows[k].step);
    if (x->rows[k].step > 0) gap = fmax(gap, fabs(x->rows[k].loss - y->rows[k].loss));
  }
  return gap;
}

/* The ranks send what the threads send: with a compressed gradient, pushed or all-reduced, their
 * step losses are the threads' (within the all-reduce's summation order), and not those of the
 * same runs uncompressed. */
static void test_compressed_same_in_threads_and_ranks(void) {
  hs_params none;
  memset(&none, 0, sizeof none);
  for (g_cz_server = 0; g_cz_server <= 1; g_cz_server++) {
    seen *thr = calloc(1, sizeof *thr), *rk = calloc(1, sizeof *rk), *plain = calloc(1, sizeof *plain);
    g_cz_density = 0.01;
    outcome a = run_threads(&compressed, &none, WORKERS * PER_WORKER, ROUNDS, thr);
    outcome b = run_ranks(&compressed, &none, WORKERS * PER_WORKER, ROUNDS, g_cz_server, rk);
    g_cz_density = 0;
    outcome c = run_threads(&compressed, &none, WORKERS * PER_WORKER, ROUNDS, plain);
    if (a.rc || b.rc || c.rc) fprintf(stderr, "  threads: %s; ranks: %s; plain: %s\n", a.d.msg, b.d.msg, c.d.msg);
    ASSERT_EQ(a.rc, 0);
    ASSERT_EQ(b.rc, 0);
    ASSERT_EQ(c.rc, 0);
    double same = loss_gap(thr, rk), other = loss_gap(thr, plain);
    printf("     %s: compressed threads vs ranks %.3g, vs uncompressed %.3g\n",
           g_cz_server ? "pushed" : "all-reduced", same, other);
    ASSERT(same < 1e-5);
    ASSERT(other > 1e-4);
    free(thr);
    free(rk);
    free(plain);
  }
}

/* Every registered policy on the small scenario: the three runtimes run it to the same number
 * of iterations, and the synchronous ones store the same step rows up to timing. A
 * parameter-server policy runs on the ranks with a server rank (one process more), as the
 * ranks' refusal without one asks. */
static void test_every_policy_same_iterations(void) {
  for (const hs_policy *const *pp = hs_policy_list(); *pp; pp++) {
    const hs_policy *pol = *pp;
    hs_params params;
    hs_diag d = {0};
    /* The small scenario: ADSP's periods shrink from a minute to a second, to fit its steps. */
    const char *arg = !strcmp(pol->name, "adsp") ? "adsp:period=1s,min_interval=0.1s,research=10s" : pol->name;
    int rc = hs_policy_parse(arg, &pol, &params, &d);
    if (rc) fprintf(stderr, "  %s: %s\n", arg, d.msg);
    ASSERT_EQ(rc, 0);
    seen *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *c = calloc(1, sizeof *c);
    double t0 = hs_test_now();
    outcome sa = run_sim(pol, &params, WORKERS * PER_WORKER, POLICY_ROUNDS, a);
    outcome rb = run_threads(pol, &params, WORKERS * PER_WORKER, POLICY_ROUNDS, b);
    outcome rr = run_ranks(pol, &params, WORKERS * PER_WORKER, POLICY_ROUNDS, 0, c);
    int server = rr.rc == HS_EUNSUPPORTED && strstr(rr.d.msg, "needs a server rank");
    if (server) {
      memset(c, 0, sizeof *c);
      rr = run_ranks(pol, &params, WORKERS * PER_WORKER, POLICY_ROUNDS, 1, c);
    }
    printf("     %-15s %lld iterations, %.2f s (ranks%s)\n", pol->name, (long long)rb.iterations,
           hs_test_now() - t0, server ? " with a server rank" : "");
    if (sa.rc || rb.rc || rr.rc || sa.iterations != rb.iterations || sa.iterations != rr.iterations)
      fprintf(stderr, "  %s: sim rc %d (%s) %lld iterations; threads rc %d (%s) %lld iterations; ranks rc %d (%s) %lld "
              "iterations\n", pol->name, sa.rc, sa.d.msg, (long long)sa.iterations, rb.rc, rb.d.msg,
              (long long)rb.iterations, rr.rc, rr.d.msg, (long long)rr.iterations);
    ASSERT_EQ(sa.rc, 0);
    ASSERT_EQ(rb.rc, 0);
    ASSERT_EQ(rr.rc, 0);
    ASSERT_EQ(sa.iterations, POLICY_ROUNDS);
    ASSERT_EQ(rb.iterations, POLICY_ROUNDS);
    ASSERT_EQ(rr.iterations, POLICY_ROUNDS);
    if (!strcmp(pol->name, "ssgd") || !strcmp(pol->name, "localsgd") || !strcmp(pol->name, "ps-bsp")) {
      qsort(a->rows, (size_t)a->n_rows, sizeof a->rows[0], row_cmp);
      for (seen *x = b; x; x = x == b ? c : NULL) {
        qsort(x->rows, (size_t)x->n_rows, sizeof x->rows[0], row_cmp);
        ASSERT_EQ(a->n_rows, x->n_rows);
        for (int k = 0; k < a->n_rows && k < x->n_rows; k++) {
          ASSERT_EQ(a->rows[k].worker, x->rows[k].worker);
          ASSERT_EQ(a->rows[k].batch, x->rows[k].batch);
          ASSERT_EQ(a->rows[k].model_version, x->rows[k].model_version);
        }
      }
    }
    free(a);
    free(b);
    free(c);
  }
}

/* A policy that all-reduces over worker 1 alone: the ranks refuse it (worker 0's replica is the
 * model they evaluate), in their words, and the run fails with every rank ending. */
static int sub_start(void *state, hs_runtime *rt) {
  (void)state;
  return hs_rt_compute(rt, 0, PER_WORKER, 1);
}
static int sub_on_compute(void *state, hs_runtime *rt, const hs_step_obs *o) {
  (void)state, (void)o;
  static const int ws[1] = {1};
  return hs_rt_allreduce(rt, ws, 1, NULL, NULL);
}
static const hs_policy subset = {
    .version = HS_POLICY_VERSION,
    .name = "subset",
    .description = "an all-reduce over worker 1 alone",
    .source = "tests/test_runtime_conformance.c",
    .params = no_params,
    .state_size = 1,
    .start = sub_start,
    .on_compute = sub_on_compute,
};

static void test_ranks_refuse_what_they_cannot(void) {
  hs_params none;
  memset(&none, 0, sizeof none);
  seen *c = calloc(1, sizeof *c);
  outcome rr = run_ranks(&subset, &none, WORKERS * PER_WORKER, ROUNDS, 0, c);
  ASSERT_EQ(rr.rc, HS_EUNSUPPORTED);
  ASSERT_STR(rr.d.msg, "policy subset: an all-reduce without worker 0 is not supported by the multi-process real "
                       "runtime (worker 0's replica is the model the run evaluates)");
  free(c);
}

/* Each runtime says what it cannot do before the run, in words naming the policy's parameter
 * or the cluster file's line; what it can do passes. */
static void test_caps_refused_before_the_run(void) {
  const hs_policy *pol;
  hs_params p;
  hs_diag d = {0};
  ASSERT_EQ(hs_policy_parse("ssgd:algo=hier", &pol, &p, &d), 0);
  ASSERT_EQ(hs_runtime_check_caps(pol, &p, NULL, HS_SIM_CAPS, "simulated", &d), 0);
  ASSERT_EQ(hs_runtime_check_caps(pol, &p, NULL, HS_REAL_THREADS_CAPS, "threaded real", &d), HS_EUNSUPPORTED);
  ASSERT_STR(d.msg, "policy ssgd: algo=hier (hierarchical all-reduce) is not supported by the threaded real runtime");
  /* lbcal's overlap (model averaging beside local steps) is not a bucketed all-reduce. */
  ASSERT_EQ(hs_policy_parse("lbcal:overlap=1", &pol, &p, &d), 0);
  ASSERT_EQ(hs_runtime_check_caps(pol, &p, NULL, HS_REAL_THREADS_CAPS, "threaded real", &d), 0);
  ASSERT_EQ(hs_policy_parse("localsgd:algo=hier", &pol, &p, &d), 0);
  ASSERT_EQ(hs_runtime_check_caps(pol, &p, NULL, HS_REAL_RANKS_CAPS, "multi-process real", &d), HS_EUNSUPPORTED);
  ASSERT_CONTAINS(d.msg, "algo=hier");
  ASSERT_EQ(hs_policy_parse("ashl", &pol, &p, &d), 0);
  ASSERT_EQ(hs_runtime_check_caps(pol, &p, NULL, HS_REAL_THREADS_CAPS, "threaded real", &d), 0);
  static const char *LEAVE = "name: leave\n"
                             "network: {bandwidth: 10Gbps, latency: 20us}\n"
                             "device_types:\n"
                             "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
                             "nodes:\n"
                             "  - {name: n0, devices: [{type: g, count: 2}]}\n"
                             "events:\n"
                             "  - {at: 1s, leave: 1}\n";
  hs_cluster_spec spec;
  memset(&spec, 0, sizeof spec);
  ASSERT_EQ(hs_cluster_parse(&spec, "leave.yaml", LEAVE, strlen(LEAVE), &d), 0);
  ASSERT_EQ(hs_policy_parse("ssgd", &pol, &p, &d), 0);
  ASSERT_EQ(hs_runtime_check_caps(pol, &p, &spec, HS_REAL_THREADS_CAPS, "threaded real", &d), 0);
  ASSERT_EQ(hs_runtime_check_caps(pol, &p, &spec, HS_REAL_RANKS_CAPS, "multi-process real", &d), 0);
  ASSERT_EQ(hs_real_rank_check_events(&spec, 0, &d), 0);
  hs_cluster_spec_free(&spec);
  /* Worker 0 may leave the ranks only where a server rank holds the model. */
  static const char *LEAVE0 = "name: leave0\n"
                              "network: {bandwidth: 10Gbps, latency: 20us}\n"
                              "device_types:\n"
                              "  g: {compute: {t0: 10ms, per_sample: 1ms}}\n"
                              "nodes:\n"
                              "  - {name: n0, devices: [{type: g, count: 2}]}\n"
                              "events:\n"
                              "  - {at: 1s, leave: 0}\n";
  memset(&spec, 0, sizeof spec);
  ASSERT_EQ(hs_cluster_parse(&spec, "leave0.yaml", LEAVE0, strlen(LEAVE0), &d), 0);
  ASSERT_EQ(hs_real_rank_check_events(&spec, 1, &d), 0);
  ASSERT_EQ(hs_real_rank_check_events(&spec, 0, &d), HS_EUNSUPPORTED);
  ASSERT_CONTAINS(d.msg, "leave0.yaml:8:5: worker 0 leaves: without --server-rank");
  hs_cluster_spec_free(&spec);
}

/* Without a calibration the threads time steps once per device: the workers on one device share
 * the fit of the first of them (hs_real_first_on_device). */
static void test_first_on_device(void) {
  const char *devs[] = {"cuda:0/sm=16", NULL, "cuda:0/sm=48", "cuda:0/sm=16", "cuda:0", "cuda:0/sm=48"};
  hs_real_config cfg = {.device = "cuda:0", .worker_devices = devs};
  ASSERT_STR(hs_real_worker_device(&cfg, 1), "cuda:0"); /* no device of its own: --device's */
  ASSERT_STR(hs_real_worker_device(&cfg, 2), "cuda:0/sm=48");
  static const int first[] = {0, 1, 2, 0, 1, 2};
  for (int w = 0; w < 6; w++) ASSERT_EQ(hs_real_first_on_device(&cfg, w), first[w]);
  /* Without devices of their own, every worker is on --device: one fit, worker 0's. */
  cfg.worker_devices = NULL;
  for (int w = 0; w < 6; w++) ASSERT_EQ(hs_real_first_on_device(&cfg, w), 0);
}

static const hs_test_case cases[] = {
    {"first_on_device", test_first_on_device},
    {"caps_refused_before_the_run", test_caps_refused_before_the_run},
    {"scripted_policy_same_in_all", test_scripted_policy_same_in_all},
    {"every_policy_same_iterations", test_every_policy_same_iterations},
    {"ranks_refuse_what_they_cannot", test_ranks_refuse_what_they_cannot},
    {"compressed_same_in_threads_and_ranks", test_compressed_same_in_threads_and_ranks},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("runtime_conformance", cases, argc, argv); }
