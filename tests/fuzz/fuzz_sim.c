/* fuzz_sim: libFuzzer entry point for the simulator (sim/sim_run.c) under every policy.
 *
 * The input's first line chooses the job, the rest is a cluster file (core/core_config.c):
 *
 *     POLICY[:key=value,...] [BATCH [ITERATIONS [SEED]]] [conv] [MODEL]
 *
 * POLICY is a registered policy's name, or else its first byte picks one (modulo the number of
 * policies) and what follows a ':' in it is the parameter string. BATCH (default 64) is the
 * global batch, ITERATIONS (default 8, at most 20) the stop condition, SEED the run's seed;
 * `conv` adds the analytic convergence model (losses, evaluations). MODEL is a model of the zoo
 * (default mlp), whose numbers come from the zoo; nothing is stored or traced.
 *
 * A cluster that parses is simulated, and the simulation must end with 0 or a clean error (a
 * message, its code in the diag); a run's results must be finite and non-negative and agree
 * with each other (samples and steps summed over the workers, every worker's step records in
 * order and not overlapping), and a second run of the same job must give the same rows, summary
 * and workers bit for bit (sim_run.h's contract). A broken invariant traps. Inputs that would only be slow, not wrong, are refused before the run:
 * more than FS_MAX_WORKERS workers or FS_MAX_EVENTS events, parameters that ask for more work
 * per iteration than FS_MAX_UNITS (overlap buckets, ADSP's timer ticks, a big GRU), and runs of
 * more than FS_MAX_STEPS steps (the sink ends those, as `hetsim sim --max-step-rows` does).
 * Every input then runs in milliseconds; a timeout is a simulator that does not end.
 *
 * tests/fuzz/run.sh builds it; tests/test_fuzz_regress.c replays tests/fuzz/corpus/sim/ and
 * tests/fuzz/regress/sim/ through this function without libFuzzer. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_config.h"
#include "nn/nn_zoo.h"
#include "policies/pol_registry.h"
#include "sim/sim_conv.h"
#include "sim/sim_run.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FS_MAX_WORKERS 64
#define FS_MAX_EVENTS 64
#define FS_MAX_ITERATIONS 20
#define FS_MAX_BATCH 4096
#define FS_MAX_STEPS 10000
#define FS_MAX_SIM_TIME 1e4 /* s */
#define FS_MAX_UNITS 1e5     /* buckets, timer ticks, GRU multiply-adds */

/* A broken invariant traps; FS_DEBUG (a build for triage) prints it and goes on. */
#ifdef FS_DEBUG
#define FS_CHECK(c) \
  do { \
    if (!(c)) fprintf(stderr, "fuzz_sim.c:%d: %s\n", __LINE__, #c); \
  } while (0)
#else
#define FS_CHECK(c) \
  do { \
    if (!(c)) __builtin_trap(); \
  } while (0)
#endif

/* What the step sink saw: counts, each worker's last step, and a hash of every row. */
typedef struct fs_steps {
  int n_slots;               /* every worker the run can have */
  int64_t rows, samples;
  int64_t last_step[FS_MAX_WORKERS];
  double last_end[FS_MAX_WORKERS]; /* s: compute end of the worker's last step */
  uint64_t hash;             /* FNV-1a of the rows' fields, in order */
} fs_steps;

static void fs_hash(uint64_t *h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) *h = (*h ^ b[i]) * 0x100000001b3ULL;
}

static int fs_sink(void *ctx, const hs_step_row *r, hs_diag *d) {
  fs_steps *st = ctx;
  FS_CHECK(r->worker >= 0 && r->worker < st->n_slots);
  FS_CHECK(r->batch >= 0 && r->step >= 0);
  FS_CHECK(isfinite(r->start_s) && r->start_s >= 0);
  FS_CHECK(isfinite(r->compute_end_s) && r->compute_end_s >= r->start_s);
  FS_CHECK(isnan(r->comm_end_s) || (isfinite(r->comm_end_s) && r->comm_end_s >= r->compute_end_s));
  FS_CHECK(isfinite(r->wait_s) && r->wait_s >= 0);
  FS_CHECK(isnan(r->loss) || isfinite(r->loss));
  if (r->worker >= 0 && r->worker < st->n_slots) {
    /* A worker's steps come in order and do not overlap. */
    FS_CHECK(r->step > st->last_step[r->worker]);
    FS_CHECK(r->start_s >= st->last_end[r->worker]);
    st->last_step[r->worker] = r->step;
    st->last_end[r->worker] = r->compute_end_s;
  }
  double t[5] = {r->start_s, r->compute_end_s, r->comm_end_s, r->wait_s, r->loss};
  int64_t k[4] = {r->worker, r->step, r->batch, r->model_version};
  fs_hash(&st->hash, t, sizeof t);
  fs_hash(&st->hash, k, sizeof k);
  st->rows++;
  st->samples += r->batch;
  if (st->rows > FS_MAX_STEPS)
    return hs_diag_set(d, HS_ELIMIT, "more than %d steps", FS_MAX_STEPS);
  return 0;
}

static int fs_eval_sink(void *ctx, double time_s, int64_t step, double loss, double accuracy,
                        hs_diag *d) {
  FS_CHECK(isfinite(time_s) && time_s >= 0 && step >= 0);
  FS_CHECK(isnan(loss) || isfinite(loss));
  FS_CHECK(isnan(accuracy) || (accuracy >= 0 && accuracy <= 1));
  return 0;
}

/* The job's first line, split. */
typedef struct fs_job {
  char spec[256];            /* "name:params" for hs_policy_parse */
  int64_t batch, iterations;
  uint64_t seed;
  int conv;
  const char *model;         /* a name of the zoo */
} fs_job;

/* Reads the first line (len bytes at line, no newline) into job; 0, or -1 to refuse it. */
static int fs_job_parse(const char *line, size_t len, fs_job *job) {
  char buf[512];
  if (len >= sizeof buf) return -1;
  memcpy(buf, line, len);
  buf[len] = '\0';
  *job = (fs_job){.batch = 64, .iterations = 8, .seed = 1, .model = "mlp"};
  char *save = NULL, *tok = strtok_r(buf, " ", &save);
  if (!tok) return -1;
  const hs_policy *const *list = hs_policy_list();
  int n = 0;
  while (list[n]) n++;
  const char *colon = strchr(tok, ':');
  size_t name_len = colon ? (size_t)(colon - tok) : strlen(tok);
  const hs_policy *pol = NULL;
  for (int i = 0; i < n && !pol; i++)
    if (strlen(list[i]->name) == name_len && !strncmp(list[i]->name, tok, name_len)) pol = list[i];
  if (!pol) pol = list[(unsigned char)tok[0] % n];
  int k = snprintf(job->spec, sizeof job->spec, "%s%s", pol->name, colon ? colon : "");
  if (k < 0 || (size_t)k >= sizeof job->spec) return -1;
  int pos = 0;
  while ((tok = strtok_r(NULL, " ", &save)) != NULL) {
    if (!strcmp(tok, "conv")) {
      job->conv = 1;
      continue;
    }
    if (hs_zoo_find(tok)) {
      job->model = hs_zoo_find(tok)->name;
      continue;
    }
    char *end;
    long long v = strtoll(tok, &end, 10);
    if (*end || end == tok) return -1;
    if (pos == 0) job->batch = v;
    else if (pos == 1) job->iterations = v;
    else if (pos == 2) job->seed = (uint64_t)v;
    else return -1;
    pos++;
  }
  if (job->batch < 1 || job->batch > FS_MAX_BATCH) return -1;
  if (job->iterations < 1 || job->iterations > FS_MAX_ITERATIONS) return -1;
  return 0;
}

/* Whether the policy's parameters ask for more than FS_MAX_UNITS of work in one iteration or
 * over the run (legitimate, but slow): gradient buckets of an overlapped all-reduce, ADSP's
 * loss-sampling timer ticks up to FS_MAX_SIM_TIME, the GRU predictor's hidden^2 * bptt. */
static int fs_too_costly(const hs_policy *pol, const hs_params *p, double grad_bytes) {
  if (!strcmp(pol->name, "ssgd") && hs_params_get(p, "overlap") != 0 &&
      grad_bytes / hs_params_get(p, "bucket") > FS_MAX_UNITS)
    return 1;
  if (!strcmp(pol->name, "adsp") &&
      FS_MAX_SIM_TIME / (hs_params_get(p, "period") / hs_params_get(p, "samples")) > FS_MAX_UNITS)
    return 1;
  if (!strcmp(pol->name, "predbatch")) {
    double h = hs_params_get(p, "hidden");
    if (h * h * hs_params_get(p, "bptt") > FS_MAX_UNITS) return 1;
  }
  return 0;
}

static int fs_bad(double x) { return !isfinite(x) || x < 0; }

/* The invariants of a run that ended without an error. */
static void fs_check(const hs_sim_result *res, const hs_cluster_spec *spec, const fs_job *job,
                     const fs_steps *st) {
  const hs_summary *m = &res->summary;
  FS_CHECK(res->status == HS_SIM_COMPLETE || res->status == HS_SIM_STALLED);
  FS_CHECK(res->n_workers >= spec->n_workers && res->n_workers <= st->n_slots && res->workers);
  FS_CHECK(!fs_bad(m->sim_time_s) && m->sim_time_s <= FS_MAX_SIM_TIME);
  FS_CHECK(m->iterations >= 0 && m->iterations <= job->iterations);
  FS_CHECK(m->samples >= 0 && m->events >= 0 && m->workers == res->n_workers);
  FS_CHECK(isnan(m->mean_iteration_s) || !fs_bad(m->mean_iteration_s));
  FS_CHECK(isnan(m->samples_per_s) || !fs_bad(m->samples_per_s));
  FS_CHECK(isnan(m->wait_fraction) || (m->wait_fraction >= 0 && m->wait_fraction <= 1));
  FS_CHECK(isnan(m->final_loss) || isfinite(m->final_loss));
  int64_t steps = 0, samples = 0;
  for (int i = 0; res->workers && i < res->n_workers; i++) {
    const hs_sim_worker_stats *w = &res->workers[i];
    FS_CHECK(w->type >= 0 && w->type < spec->n_types && w->node >= 0 && w->node < spec->n_nodes);
    FS_CHECK(!fs_bad(w->joined_at) && w->joined_at <= m->sim_time_s);
    FS_CHECK(isnan(w->left_at) || (!fs_bad(w->left_at) && w->left_at >= w->joined_at));
    FS_CHECK(w->steps >= 0 && w->samples >= 0 && w->initial_batch >= 0);
    FS_CHECK(!fs_bad(w->busy_s) && !fs_bad(w->comm_s) && !fs_bad(w->wait_s));
    steps += w->steps;
    samples += w->samples;
  }
  FS_CHECK(samples == m->samples);
  FS_CHECK(steps >= st->rows && samples >= st->samples); /* a step in flight has no row yet */
}

/* Runs cfg with a fresh sink; the sink's record in *st, the result in *res. */
static int fs_run(hs_sim_config *cfg, fs_steps *st, hs_sim_result *res, hs_diag *d) {
  int n_slots = st->n_slots;
  memset(st, 0, sizeof *st);
  st->n_slots = n_slots;
  st->hash = 0xcbf29ce484222325ULL;
  for (int i = 0; i < FS_MAX_WORKERS; i++) st->last_step[i] = -1;
  cfg->sink_ctx = st;
  return hs_sim_run(cfg, res, d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  const char *nl = memchr(text, '\n', size);
  if (!nl) return 0;
  fs_job job;
  if (fs_job_parse(text, (size_t)(nl - text), &job)) return 0;
  const char *yaml = nl + 1;
  size_t ylen = size - (size_t)(yaml - text);

  hs_cluster_spec spec;
  hs_diag d = {0};
  if (hs_cluster_parse(&spec, "fuzz.yaml", yaml, ylen, &d)) {
    hs_cluster_spec_free(&spec);
    return 0;
  }
  const hs_policy *pol;
  hs_params params;
  hs_model_stats ms;
  const hs_model_info *mi = hs_zoo_find(job.model);
  const hs_conv_model *conv = NULL;
  hs_params conv_params;
  int unnamed = 0;
  fs_steps st = {.n_slots = hs_cluster_all_workers(&spec)};
  /* What `hetsim sim` refuses before a run (a bad policy, a form for another model) or cannot
   * do here (calibrated or profiled compute) is no concern of this harness. */
  if (st.n_slots > FS_MAX_WORKERS || spec.n_events > FS_MAX_EVENTS || !mi ||
      hs_zoo_stats(job.model, &ms, &d) || hs_policy_parse(job.spec, &pol, &params, &d) ||
      fs_too_costly(pol, &params, (double)ms.grad_bytes) ||
      hs_cluster_resolve_compute(&spec, job.model, ms.train_flops_per_sample, &unnamed, &d) ||
      (job.conv && hs_conv_parse("analytic", job.model, NULL, &conv, &conv_params, &d))) {
    hs_cluster_spec_free(&spec);
    return 0;
  }
  for (int t = 0; t < spec.n_types; t++)
    if (spec.types[t].compute.kind != HS_COMPUTE_INLINE) {
      hs_cluster_spec_free(&spec);
      return 0;
    }
  if (spec.network_calib.name[0] || spec.jitter_calib.name[0]) {
    hs_cluster_spec_free(&spec);
    return 0;
  }
  for (int i = 0; i < spec.n_nodes; i++)
    if (spec.nodes[i].link_calib.name[0]) {
      hs_cluster_spec_free(&spec);
      return 0;
    }

  hs_sim_config cfg = {
      .cluster = &spec, .model = job.model, .train_flops_per_sample = ms.train_flops_per_sample,
      .grad_bytes = (double)ms.grad_bytes, .act_bytes_per_sample = ms.act_bytes_per_sample,
      .param_bytes = 4.0 * (double)ms.params, .dataset_size = mi->dataset_train_size,
      .global_batch = job.batch, .policy = pol, .params = &params, .seed = job.seed,
      .max_iterations = job.iterations, .max_sim_time = FS_MAX_SIM_TIME, .sink = fs_sink,
      .conv = conv, .conv_params = conv ? &conv_params : NULL,
      .eval_sink = conv ? fs_eval_sink : NULL,
  };
  /* Twice: the same configuration and seed must give the same run, bit for bit. */
  fs_steps st2 = st;
  hs_sim_result res, res2;
  hs_diag sd = {0}, sd2 = {0};
  int rc = fs_run(&cfg, &st, &res, &sd);
  int rc2 = fs_run(&cfg, &st2, &res2, &sd2);
#ifdef FS_DEBUG
  fprintf(stderr, "%s b=%lld it=%lld: rc %d %s; status %d iters %lld steps %lld t %g\n", job.spec,
          (long long)job.batch, (long long)job.iterations, rc, sd.msg, (int)res.status,
          (long long)res.summary.iterations, (long long)st.rows, res.summary.sim_time_s);
#endif
  FS_CHECK(rc2 == rc && st2.rows == st.rows && st2.hash == st.hash && !strcmp(sd.msg, sd2.msg));
  if (rc) {
    FS_CHECK(sd.msg[0] != '\0' && sd.code == rc); /* a failure says why */
  } else {
    fs_check(&res, &spec, &job, &st);
    res.summary.wall_s = res2.summary.wall_s = 0;
    FS_CHECK(res2.n_workers == res.n_workers && res2.status == res.status);
    FS_CHECK(!memcmp(&res2.summary, &res.summary, sizeof res.summary));
    for (int i = 0; i < res.n_workers && i < res2.n_workers; i++) {
      const hs_sim_worker_stats *w = &res.workers[i], *w2 = &res2.workers[i];
      double t[6] = {w->joined_at, w->left_at, w->busy_s, w->comm_s, w->wait_s, 0};
      double t2[6] = {w2->joined_at, w2->left_at, w2->busy_s, w2->comm_s, w2->wait_s, 0};
      FS_CHECK(!memcmp(t, t2, sizeof t) && w->steps == w2->steps && w->samples == w2->samples &&
               w->initial_batch == w2->initial_batch && w->type == w2->type && w->node == w2->node);
    }
  }
  hs_sim_result_free(&res);
  hs_sim_result_free(&res2);
  hs_cluster_spec_free(&spec);
  return 0;
}
