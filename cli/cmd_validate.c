/* hetsim validate RUN_ID: simulate a real run with the calibration of the same device and
 * measure the simulator's error.
 *
 * The cluster is rebuilt from the run: its workers and slowdown/leave events (the cluster file
 * stored with the run, or N equal workers), every device type's compute replaced by the chosen
 * step fit of the run's device (`compute: {calib: DEVICE}`) — the fit of "DEVICE (N workers)"
 * (`hetsim calib --concurrent N`: steps timed while N nets step at once, as the run's N worker
 * threads share the machine) when the calibration holds one, else the steps timed alone (the
 * calibrated step includes an SGD update, which the runtime's compute does not: it stands in
 * for what the runtime's compute does and the calibration does not time, gathering the batch
 * from the data set and loading it into the net, about as long for mlp at batch 64 on this
 * repository's VM: 51 + 8 us against an update of 67-76 us; docs/performance.md), lognormal
 * jitter with the spread of the
 * calibrated steps (step_jitter below: jitter_cv in the JSON), and the links set from
 * the device's communication calibration of the run's backend (cpu, or local: comm_backend in
 * the JSON; real/real_comm_calib.h times the local one through the backend): a ring all-reduce over N workers taking
 * alpha + M/beta becomes links with latency alpha/(2(N-1)) and bandwidth beta*2(N-1)/N (so the
 * simulator's ring formula gives back alpha + M/beta: hs_ring_link), and the parameter
 * server's link takes
 * the point-to-point one; alpha is the fit's, and beta is set so that alpha + M/beta is the
 * time measured at the run's message size M (comm_at below: allreduce_s and p2p_s in the
 * JSON). The runtime applies every reduced vector and every push to its
 * global model once, in one pass over the parameters before the workers go on; that pass is
 * the calibration's "update" phase (median over the batch sizes), added to the all-reduce's
 * alpha and taken as the parameter server's update time (update_s in the JSON), and its time to
 * add an accumulated push into its accumulator (another pass). Each hand-off
 * between the runtime's threads (a thread woken from a condition variable) costs the
 * calibrated hand-off latency (comm_sample op "wake", wake_s in the JSON), as many as the
 * run's backend says a round has (real_comm.h: the cpu backend three on an all-reduce's
 * critical path, added to its alpha, one on each parameter-server message, added to the link's
 * latency; the local backend none, its waits being inside the all-reduce it was timed by);
 * none with a calibration that lacks it. A run of one process per worker on the cpu backend
 * (real/real_rank.h) takes instead, where the calibration has it for the run's world size, the
 * calibration of its channel (backend "tcp", `hetsim calib` under a launcher):
 * its all-reduce and send/recv at the message, and per round the commands' control messages
 * (its "wake") and the ranks' hand-offs (the cpu's), as real_rank.h counts them (an apply's
 * command round, of ps-bsp, ksync and kasync, as the server's apply_latency); without it, it
 * is simulated as the threads' run and says so. The simulation
 * uses the same policy, parameters, seed and global batch, and the proxy convergence model
 * with the run's learning rate and data sizes, with the run's final loss as its target. It is
 * stored as a run of kind sim.
 *
 * The simulation runs exactly the real run's N iterations (so that both runs' totals cover the
 * same updates); when its evaluations do not reach the real run's final loss within them, a
 * continuation of the same simulation (deterministic: the same first N iterations) runs up to
 * 2N iterations with that loss as its target, only for the time to it, and is not stored.
 *
 * Errors (relative to the real run; stored in `validation`):
 * - per-iteration time: T_v is the first start of a step computed on model version v; over
 *   intervals of one round (consecutive versions seen in both runs that are multiples of R,
 *   the versions per round: 1 for a synchronous run, N for an asynchronous one, where each
 *   push makes a version and single versions come in bursts) the time per iteration is
 *   (T_v2 - T_v1)/(v2 - v1); the error of each interval is |sim - real| / real; median and p95
 *   (nearest rank) over the intervals. --window K also prints them over K rounds.
 * - mean iteration time: the mean over the same intervals of the simulated time per iteration
 *   over the real one's, minus 1 (signed: > 0 when the simulation is slower). It leaves out
 *   what comes before the first interval (start-up) and after the last (the last round).
 * - total time: the simulated run's time over the real run's measured training time (both
 *   summary.sim_time_s, both N iterations), minus 1 (signed): start-up and the last round in.
 * - distribution: the Wasserstein-1 distance between the empirical distributions of the two
 *   runs' per-iteration times over the same intervals, over the real mean (sim/sim_compare.h).
 * - time to final loss: the real run's first evaluation with loss <= its final loss, against
 *   the simulated run's first evaluation with loss <= that loss (NULL when the simulation never
 *   reached it within 2N iterations, or for models the proxy cannot train).
 *
 * The same question is answered once: the simulated run carries in its options a key, a hash
 * of every input of the simulation (the real run, the calibration's numbers as used, the
 * cluster, the policy, the convergence model, hetsim's version). When a complete simulated run
 * with the same key already validates this run, validate reuses it and its validation row
 * instead of storing a second one, and says so ("reused"); the errors are recomputed from the
 * stored rows and equal the stored ones. */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cal_device.h"
#include "cli/cli.h"
#include "cli/sweep_grid.h"
#include "core/core_buildinfo.h"
#include "core/core_config.h"
#include "core/core_json.h"
#include "core/core_perfmodel.h"
#include "core/core_hash.h"
#include "core/core_config_write.h"
#include "core/core_runopts.h"
#include "core/core_store.h"
#include "nn/nn_zoo.h"
#include "policies/pol_compress.h"
#include "policies/pol_registry.h"
#include "sim/sim_compare.h"
#include "real/real_comm.h"
#include "real/real_rank.h"
#include "sim/sim_conv.h"
#include "sim/sim_net.h"
#include "sim/sim_run.h"

static void usage(FILE *out) {
  fprintf(out,
"usage: hetsim validate RUN_ID [--db FILE] [--calib DB] [--window K] [--against RUN_ID2] [--json]\n"
"\n"
"Simulates the real run RUN_ID with the calibration of the same device (same policy, seed,\n"
"batch, workers and slowdown events), stores the simulated run and the errors in the\n"
"validation table, and prints the median and p95 per-iteration time error, the error of the\n"
"mean iteration time and of the total time (simulated / real - 1), the distance between the\n"
"two runs' iteration-time distributions (Wasserstein-1 over the real mean) and the error in\n"
"the time to the real run's final loss (relative errors; 0.05 = 5%%). A validation already\n"
"stored for the same inputs is reused, not stored again.\n"
"\n"
"  --db FILE      results database holding the run (default %s)\n"
"  --calib DB     database with the device's calibration (default: the --db database)\n"
"  --window K     also give the errors of per-iteration times averaged over windows of K\n"
"                 rounds (printed only; the stored errors are over single rounds). A round\n"
"                 is one model version for synchronous policies, about N versions (one\n"
"                 step per worker) for asynchronous ones\n"
"  --against RUN_ID2\n"
"                 also score the real run RUN_ID2 (the same command run again: same\n"
"                 policy, model, global batch, workers and cluster file) against RUN_ID\n"
"                 with the same errors: how well the machine reproduces its own rounds and\n"
"                 totals, the floor under the simulator's errors (printed only)\n"
"  --json         print one JSON object: run_id, sim_run_id, validation_id, reused,\n"
"                 median_iter_error, p95_iter_error, mean_iter_error, total_time_error,\n"
"                 iter_wasserstein, time_to_loss_error, intervals, versions_per_interval,\n"
"                 compute_calibration, compute_ratio (the run's computes over the\n"
"                 calibration's, over the workers the cluster file never slows; null when\n"
"                 it slows them all), type_calibrations (each device type's, for a run\n"
"                 whose types ran on devices of their own), launch (none for threads;\n"
"                 torchrun or mpirun: a multi-process run), comm_backend (tcp for a\n"
"                 multi-process run with a calibration of its channel, else the threads'\n"
"                 backend, as which it is then simulated), rank_message_s (tcp: one control\n"
"                 message between processes; else null), apply_latency_s (tcp: the\n"
"                 server's time to start an apply, 2 messages and a hand-off; else null),\n"
"                 compress_roundtrip_s and\n"
"                 compress_scale (the calibrated top-k round trip on the gradient, and\n"
"                 it over the compressor's cost model; null when not calibrated),\n"
"                 allreduce_world (the participants of the measured all-reduce taken),\n"
"                 cpus and cpu_sharers (the CPUs the run could use, and its worker\n"
"                 threads or ranks on that machine: more of them than CPUs are simulated\n"
"                 as that many compute slots; null when unknown), and with --window K:\n"
"                 window,\n"
"                 window_median_iter_error, window_p95_iter_error, with --against:\n"
"                 against_run_id, against_intervals, against_median_iter_error,\n"
"                 against_p95_iter_error, against_mean_iter_error,\n"
"                 against_total_time_error, against_iter_wasserstein\n"
"\n"
"exit status: 0 validated, 1 runtime failure, 2 bad usage or bad input.\n",
          HS_DEFAULT_DB);
}

#define bad(...) hs_cli_usage("validate", 0, __VA_ARGS__)


typedef struct real_run_row {
  char kind[8], status[16], policy[64], params[1024], model[64];
  char *cluster_text;
  hs_real_options opt;        /* the run's options (core_runopts.h) */
  int64_t global_batch, iterations;
  uint64_t seed;
  double final_loss;
  double total_s;             /* summary.sim_time_s: the measured training time; NaN if none */
} real_run_row;

/* Reads run id: 1 found, 0 not, < 0 on a database error (d says why). */
static int load_run(hs_store *st, int64_t id, real_run_row *r, hs_diag *d) {
  hs_run_record rec;
  int found = hs_store_run_get(st, id, &rec, d);
  if (found > 0) {
    snprintf(r->kind, sizeof r->kind, "%s", rec.kind);
    snprintf(r->status, sizeof r->status, "%s", rec.status);
    snprintf(r->policy, sizeof r->policy, "%s", rec.policy);
    snprintf(r->params, sizeof r->params, "%s", rec.params);
    snprintf(r->model, sizeof r->model, "%s", rec.model);
    r->cluster_text = rec.cluster_text;
    rec.cluster_text = NULL;
    r->global_batch = rec.global_batch;
    r->seed = rec.seed;
    /* The real run's options through their one reader; text that is not JSON reads as none
     * (the checks below then say what is missing). */
    hs_diag od = {0};
    if (hs_real_options_parse(rec.options_json, &r->opt, &od)) memset(&r->opt, 0, sizeof r->opt);
    r->iterations = rec.iterations;
    r->final_loss = rec.last_loss;
    r->total_s = rec.total_s;
  }
  hs_run_record_free(&rec);
  return found;
}

/* The device's fitted cpu communication model for `op`, nearest world size first. */
static int comm_fit(hs_store *st, const char *device, const char *backend, const char *op, int world, double *alpha,
                    double *beta) {
  hs_diag d = {0};
  return hs_store_comm_fit(st, device, backend, op, world, alpha, beta, &d);
}

/* The device's measured cpu time of `op` for a message of `bytes` (the world size nearest
 * `world`), log-log interpolated between the two measured sizes around it (the nearest two at
 * either end). Between threads the time per byte grows with the message as it leaves the
 * caches (here 40 GB/s at 4 KiB, 10 GB/s at 1 MiB, 1.4 GB/s at 64 MiB for p2p), so the fitted
 * alpha + n/beta line misses the run's one message size by up to 3x; the measurement at that
 * size does not. Returns 1 when found. */
static int comm_at(hs_store *st, const char *device, const char *backend, const char *op, int world, double bytes,
                   double *t) {
  hs_diag d = {0};
  return hs_store_comm_time_at(st, device, backend, op, world, bytes, t, &d);
}

/* The device's newest measured hand-off latency (comm_sample op "wake", cal_comm.h). Returns
 * 1 when found. */
static int wake_time(hs_store *st, const char *device, double *t) {
  hs_diag d = {0};
  return hs_store_comm_latest(st, device, "cpu", "wake", 2, t, &d);
}

/* The median of n > 0 ascending values. */
static double median_sorted(const double *v, int n) {
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The device's calibrated SGD update of the model (phase "update" of `hetsim calib`: one pass
 * over the parameters, the same at every batch): the median over its timed batch sizes of
 * their median update time, in seconds. Returns 1 when found. */
static int update_time(hs_store *st, const char *device, const char *model, double *out) {
  double v[64];
  hs_diag d = {0};
  int n = hs_store_calib_medians(st, device, model, "update", v, 64, &d);
  if (n <= 0) return n;
  *out = median_sorted(v, n);
  return 1;
}

/* The spread of the device's calibrated step times as the simulator's jitter
 * (hs_perf_jitter_load). Returns 1 when found, 0 when not, -1 on an error. */
static int step_jitter(hs_store *st, const char *device, const char *model, double *cv) {
  hs_diag d = {0};
  int rc = hs_perf_jitter_load(st, device, model, cv, &d);
  return rc == 0 ? 1 : rc == HS_ENOTFOUND ? 0 : -1;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Whether worker w of the cluster computes at its device's own speed throughout: no
 * slowdown at the start and no slowdown event that sets another. */
static int unslowed(const hs_cluster_spec *spec, int w) {
  if (spec->workers[w].slowdown != 1.0) return 0;
  for (int i = 0; i < spec->n_events; i++) {
    const hs_event_spec *e = &spec->events[i];
    if (e->kind == HS_EVENT_SLOWDOWN && e->worker == w && e->slowdown >= 0 && e->slowdown != 1.0) return 0;
  }
  return 1;
}

/* How the run's computes compare with the calibration: the median over the real run's steps
 * of compute / (calibrated step - update), i.e. its forward and backward passes (and loading
 * the batch) against the calibration's at the step's batch. Near 1 when the machine ran at
 * the calibration's speed; the per-iteration errors cannot be smaller than its distance from
 * 1. Only the steps of workers that the cluster file never slows down count (an emulated
 * slowdown stretches a compute on purpose); NaN when every worker is slowed. */
static double compute_ratio(hs_store *store, int64_t run, const hs_perf_model *pm, double upd,
                            const hs_cluster_spec *spec) {
  unsigned char *use = malloc(spec->n_workers > 0 ? (size_t)spec->n_workers : 1);
  if (!use) return NAN;
  for (int w = 0; w < spec->n_workers; w++) use[w] = (unsigned char)unslowed(spec, w);
  hs_step_compute *steps;
  hs_diag d = {0};
  int64_t ns = hs_store_step_computes(store, run, &steps, &d);
  double *r = ns > 0 ? malloc((size_t)ns * sizeof *r) : NULL;
  size_t n = 0;
  for (int64_t i = 0; r && i < ns; i++) {
    int w = steps[i].worker;
    if (w < 0 || w >= spec->n_workers || !use[w]) continue;
    double want = hs_perf_eval(pm, steps[i].batch) - upd;
    if (!(want > 0)) continue;
    r[n++] = steps[i].compute_s / want;
  }
  free(steps);
  free(use);
  double med = NAN;
  if (n) {
    qsort(r, n, sizeof *r, cmp_double);
    med = median_sorted(r, (int)n);
  }
  free(r);
  return med;
}

static void json_parts(hs_json *j, const char *key, const double part[3]) {
  static const char *const names[3] = {"compute_s", "comm_s", "idle_s"};
  hs_json_key(j, key);
  hs_json_object_begin(j);
  for (int i = 0; i < 3; i++) {
    hs_json_key(j, names[i]);
    if (isnan(part[i])) hs_json_null(j);
    else hs_json_double(j, part[i]);
  }
  hs_json_object_end(j);
}

/* Model versions per round of the real run (one step per worker): 1 when the run is
 * synchronous (at least N - 0.1 steps per iteration, that is per version made, on average:
 * every worker steps from each version), N otherwise (an asynchronous policy: each push makes a
 * version). Counted over the versions made, not over those the steps started from: asp's
 * workers run partly in step on one machine, so many of its versions are never started from,
 * and the distinct versions among the steps (the count until 2026-11-28) put runs of 2 workers
 * on either side of N - 0.1 (1.75 to 1.95 steps per distinct version). */
static int64_t round_versions(hs_store *store, int64_t run, int workers, int64_t iterations) {
  int64_t steps, versions;
  hs_diag d = {0};
  if (iterations <= 0 || hs_store_step_version_counts(store, run, &steps, &versions, &d)) return 1;
  double per_version = (double)steps / (double)iterations;
  return per_version >= workers - 0.1 ? 1 : workers;
}

/* Compares the per-iteration times of run cmp_id with those of run ref_id over intervals of
 * `stride` versions that both runs saw (versions that are multiples of stride), paired by
 * interval (sim_compare.h). With fewer than two common versions out->n is 0 and every figure
 * NaN. Returns 0, or -1 when the step rows could not be read (d says why). */
static int iter_compare(hs_store *store, int64_t ref_id, int64_t cmp_id, int64_t stride, hs_iter_compare *out,
                        hs_diag *d) {
  int64_t *rv, *sv;
  double *rt, *stt;
  int64_t nr = hs_store_version_starts(store, ref_id, &rv, &rt, d);
  int64_t ns = nr < 0 ? -1 : hs_store_version_starts(store, cmp_id, &sv, &stt, d);
  if (ns < 0) sv = NULL, stt = NULL;
  int64_t m = 0;
  double *dr = NULL, *ds = NULL;
  int rc = nr < 0 || ns < 0 ? -1 : 0;
  if (!rc && nr > 1 && ns > 1) {
    dr = malloc((size_t)nr * sizeof *dr);
    ds = malloc((size_t)nr * sizeof *ds);
    if (!dr || !ds) rc = hs_diag_set(d, HS_ENOMEM, "out of memory for %lld versions", (long long)nr);
  }
  if (!rc && dr) {
    int64_t j = 0, pv = -1;
    double prt = 0, pst = 0;
    for (int64_t i = 0; i < nr; i++) {
      while (j < ns && sv[j] < rv[i]) j++;
      if (j == ns) break;
      if (sv[j] != rv[i] || rv[i] % stride) continue;
      if (pv >= 0) {
        dr[m] = (rt[i] - prt) / (double)(rv[i] - pv);
        ds[m] = (stt[j] - pst) / (double)(rv[i] - pv);
        m++;
      }
      pv = rv[i];
      prt = rt[i];
      pst = stt[j];
    }
  }
  if (!rc && hs_iter_compare_times(dr, ds, (size_t)m, out, d)) rc = -1;
  if (rc) hs_iter_compare_times(NULL, NULL, 0, out, NULL); /* every figure NaN */
  free(dr);
  free(ds);
  free(rv);
  free(rt);
  free(sv);
  free(stt);
  return rc;
}

/* b / a - 1, NaN unless both are positive. */
static double rel_diff(double b, double a) { return a > 0 && b > 0 ? b / a - 1 : NAN; }

/* Adds the text of a printf format to an FNV-1a 64 hash. */
static uint64_t key_add(uint64_t h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static uint64_t key_add(uint64_t h, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (k < 0) return h;
  h = hs_fnv64(h, buf, (size_t)k < sizeof buf ? (size_t)k : sizeof buf - 1);
  return hs_fnv64(h, "\n", 1);
}

/* The key of a validation's simulation: FNV-1a 64 over every input the simulation is built
 * from, in hex-float form so that any change of a number changes it: the real run, hetsim's
 * version, the compute calibration (its name and fits, with their measured points), the cluster
 * as rebuilt (its text and the links, jitter and update time set from the calibration), the
 * policy and its parameters, seed, global batch, iterations and the convergence model. */
static uint64_t sim_key(long long id, const char *cdev, const hs_perf_model *perf, int n_types,
                        const hs_cluster_spec *spec, const char *text, const char *pspec,
                        const real_run_row *r, const char *cspec, double cscale) {
  uint64_t h = key_add(HS_FNV64_INIT, "hetsim validate 1 %s run %lld", HETSIM_VERSION, id);
  h = key_add(h, "%s", cdev);
  for (int t = 0; t < n_types; t++) {
    const hs_perf_model *m = &perf[t];
    h = key_add(h, "%d %a %a %a %a %d %d", (int)m->form, m->p[0], m->p[1], m->p[2], m->p[3], m->max_batch, m->n_points);
    for (int i = 0; i < m->n_points; i++) h = key_add(h, "%d %a", m->pt_batch[i], m->pt_s[i]);
  }
  h = key_add(h, "%s", text);
  h = key_add(h, "%a %a %a %a %a %a %d", spec->network.bandwidth, spec->network.latency, spec->ps.link.bandwidth,
              spec->ps.link.latency, spec->ps.update_time, spec->jitter_cv, (int)spec->ps.pull);
  /* The server's accumulation and an apply's command round (later changes; a key without them
   * stays). */
  if (spec->ps.accumulate_time > 0) h = key_add(h, "accumulate %a", spec->ps.accumulate_time);
  if (spec->ps.apply_latency > 0) h = key_add(h, "apply latency %a", spec->ps.apply_latency);
  for (int i = 0; i < spec->n_nodes; i++) h = key_add(h, "%a %a", spec->nodes[i].link.bandwidth, spec->nodes[i].link.latency);
  /* Several nodes' workers simulated on the first (a later change; a key of one node stays). */
  if (spec->n_nodes > 1) h = key_add(h, "all on node 0");
  if (spec->nodes[0].compute_slots > 0) h = key_add(h, "slots %d", spec->nodes[0].compute_slots);
  /* The real runtimes' compression (2026-11-29): sent as fp32, at the calibrated speed. */
  h = key_add(h, "dense wire, compress %a", cscale);
  return key_add(h, "%s %llu %lld %lld %s", pspec, (unsigned long long)r->seed, (long long)r->global_batch,
                 (long long)r->iterations, cspec);
}

int hs_cmd_validate(int argc, char **argv) {
  static const struct option opts[] = {
      {"db", required_argument, NULL, 'd'}, {"calib", required_argument, NULL, 'c'},
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'},
      {"window", required_argument, NULL, 'w'}, {"against", required_argument, NULL, 'a'},
      {NULL, 0, NULL, 0},
  };
  const char *dbp = HS_DEFAULT_DB, *calibp = NULL;
  int json = 0, c;
  int64_t window = 1, against = 0;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'd': dbp = optarg; break;
    case 'c': calibp = optarg; break;
    case 'j': json = 1; break;
    case 'w': {
      char *wend;
      long long k = strtoll(optarg, &wend, 10);
      if (!*optarg || *wend || k < 1 || k > 1000000) return bad("--window: expected a positive integer, got \"%s\"", optarg);
      window = k;
      break;
    }
    case 'a':
      if (hs_cli_parse_run_id(optarg, &against)) return bad("--against: expected a run id (a positive integer), got \"%s\"", optarg);
      break;
    case 'h': usage(stdout); return 0;
    default: return bad("unknown or incomplete option \"%s\"; run `hetsim validate --help`", argv[optind - 1]);
    }
  }
  if (optind != argc - 1) return bad("%s", "expected one RUN_ID; run `hetsim validate --help`");
  int64_t run_id;
  if (hs_cli_parse_run_id(argv[optind], &run_id)) return bad("RUN_ID: expected a positive integer, got \"%s\"", argv[optind]);
  long long id = run_id;

  hs_diag d = {0};
  int status = 2, rc;
  hs_store *store = NULL, *cstore = NULL;
  real_run_row r;
  memset(&r, 0, sizeof r);
  hs_cluster_spec spec;
  memset(&spec, 0, sizeof spec);
  int have_spec = 0;
  char *gen = NULL;           /* the cluster file written for a run that had none */
  hs_perf_model *perf = NULL;
  hs_sim_result res;
  memset(&res, 0, sizeof res);
  hs_cli_run sim = {0}; /* the simulated run as stored (cli.h) */
  if ((rc = hs_store_open(&store, dbp, 0, &d))) {
    fprintf(stderr, "hetsim validate: %s\n", d.msg);
    return hs_exit_code(rc) == 2 || rc == HS_ENOTFOUND ? 2 : 1;
  }
  int found = load_run(store, id, &r, &d);
  if (found <= 0) {
    if (found < 0) fprintf(stderr, "hetsim validate: %s\n", d.msg);
    else fprintf(stderr, "hetsim validate: %s has no run %lld\n", dbp, id);
    status = found < 0 ? 1 : 2;
    goto out;
  }
  if (strcmp(r.kind, "real")) {
    fprintf(stderr, "hetsim validate: run %lld is a %s run; validate takes a real run (hetsim real)\n", id, r.kind);
    goto out;
  }
  if (strcmp(r.status, "complete")) {
    fprintf(stderr, "hetsim validate: run %lld is %s, not complete; validate a complete run\n", id, r.status);
    goto out;
  }
  if (!r.opt.device_name[0] || r.opt.workers < 1 || r.iterations < 1) {
    fprintf(stderr, "hetsim validate: run %lld lacks its device, workers or iterations in its options\n", id);
    goto out;
  }
  if (against) {
    /* The second run must be the same experiment, checked before anything is simulated. */
    real_run_row a;
    memset(&a, 0, sizeof a);
    int afound = against == id ? 0 : load_run(store, against, &a, &d);
    const char *why = against == id ? "is RUN_ID itself"
                      : afound < 0  ? d.msg
                      : !afound     ? "is not in the database"
                      : strcmp(a.kind, "real") || strcmp(a.status, "complete") ? "is not a complete real run"
                      : strcmp(a.policy, r.policy) || strcmp(a.params, r.params) ? "ran another policy or parameters"
                      : strcmp(a.model, r.model) || a.global_batch != r.global_batch || a.opt.workers != r.opt.workers
                          ? "ran another model, global batch or number of workers"
                      : (!a.cluster_text != !r.cluster_text) || (a.cluster_text && strcmp(a.cluster_text, r.cluster_text))
                          ? "ran on another cluster file"
                          : NULL;
    free(a.cluster_text);
    if (why) {
      fprintf(stderr, "hetsim validate: --against %lld: run %lld %s\n", (long long)against, (long long)against, why);
      status = afound < 0 ? 1 : 2;
      goto out;
    }
  }
  if (calibp) {
    if ((rc = hs_store_open(&cstore, calibp, HS_STORE_READONLY, &d))) {
      fprintf(stderr, "hetsim validate: --calib %s: %s\n", calibp, d.msg);
      goto out;
    }
  }
  /* Where the calibration is read: --calib, else the run's own database. */
  hs_store *perf_store = cstore ? cstore : store;

  /* The cluster: the run's own file, or N equal workers on one node. The latter stays YAML
   * text: it is stored as the simulated run's cluster_text (so that `hetsim sim` can replay it)
   * and hashed into the validation key, which earlier validations' keys must keep matching. */
  const char *text = r.cluster_text;
  if (!text) {
    /* The run's bare cluster, written by the one writer of cluster files (core_config_write.h);
     * its numbers are placeholders that the calibration replaces below. */
    hs_link_spec link = {.bandwidth = 1e9, .latency = 1e-6};
    const char *cname, *tname; /* the names the run was stored with (a cpu run's as ever) */
    hs_cli_real_cluster_name(r.opt.backend, &cname, &tname);
    hs_device_type dev_type = {.compute = {.kind = HS_COMPUTE_INLINE, .t0 = 1e-3, .per_sample = 1e-3}};
    snprintf(dev_type.name, sizeof dev_type.name, "%s", tname);
    hs_node_spec host = {.name = "host", .link = link};
    int nw = r.opt.workers > 0 ? r.opt.workers : 0;
    hs_worker_spec *ws = calloc(nw > 0 ? (size_t)nw : 1, sizeof *ws);
    if (!ws) {
      fprintf(stderr, "hetsim validate: out of memory\n");
      status = 1;
      goto out;
    }
    for (int w = 0; w < nw; w++) ws[w] = (hs_worker_spec){.type = 0, .node = 0, .slowdown = 1, .comm_slowdown = 1};
    hs_cluster_spec threads = {.network = link, .n_types = 1, .types = &dev_type,
                               .n_nodes = 1, .nodes = &host, .n_workers = nw, .workers = ws};
    snprintf(threads.name, sizeof threads.name, "%s", cname);
    rc = hs_cluster_write_yaml(&threads, &gen, NULL, &d);
    free(ws);
    if (rc) {
      fprintf(stderr, "hetsim validate: run %lld: %s\n", id, d.msg);
      status = 1;
      goto out;
    }
    text = gen;
  }
  if ((rc = hs_cluster_parse(&spec, "stored cluster", text, strlen(text), &d))) {
    fprintf(stderr, "hetsim validate: run %lld: %s\n", id, d.msg);
    goto out;
  }
  have_spec = 1;
  int n = spec.n_workers;
  /* The device as the run used it: N workers stepping at once (`hetsim calib --concurrent N`,
   * stored as "NAME (N workers)") when that calibration exists, else the device alone. */
  char shared[256];
  hs_cal_device_shared_name(shared, sizeof shared, r.opt.device_name, n);
  hs_perf_model probe_pm;
  hs_diag pd = {0};
  const char *cdev = n > 1 && !hs_perf_load(perf_store, shared, r.model, &probe_pm, NULL, &pd) ? shared : r.opt.device_name;
  double a_ar = 0, b_ar = 1, a_p2p = 0, b_p2p = 1;
  /* The links as the run's backend moves bytes: the cpu backend's as `hetsim calib --device cpu`
   * times its kernels; the local backend's as `hetsim calib --device cuda:I` times it through
   * the backend (real/real_comm_calib.h), stored as backend "local". */
  const hs_real_comm_ops *backend = hs_real_comm_find(r.opt.backend[0] ? r.opt.backend : "cpu", &d);
  if (!backend || !strcmp(backend->name, "nccl")) {
    fprintf(stderr, "hetsim validate: run %lld ran on backend \"%s\"; validate takes runs of the cpu and local "
            "backends (no NCCL communication calibration yet)\n", id, r.opt.backend);
    goto out;
  }
  const char *cb = backend->name;
  /* A multi-process run (real/real_rank.h) moved its bytes over TCP between processes and its
   * commands over a control channel: with a calibration of that channel (backend "tcp",
   * `hetsim calib --device cpu` under a launcher of as many processes) it is simulated with it
   * below; without one, as the threads' run over the same backend, and the output says so. */
  int multi = r.opt.launch[0] && strcmp(r.opt.launch, "none") != 0;
  const char *comm_dev = cdev;
  if (cdev != r.opt.device_name && comm_fit(perf_store, cdev, cb, "p2p", 2, &a_p2p, &b_p2p) <= 0) comm_dev = r.opt.device_name;
  if ((n > 1 && comm_fit(perf_store, comm_dev, cb, "allreduce", n, &a_ar, &b_ar) <= 0) ||
      comm_fit(perf_store, comm_dev, cb, "p2p", 2, &a_p2p, &b_p2p) <= 0) {
    fprintf(stderr, "hetsim validate: no %s communication model for device \"%s\" in %s; "
            "run `hetsim calib --device %s --model %s%s` first\n", cb, r.opt.device_name, calibp ? calibp : dbp,
            strcmp(cb, "cpu") ? r.opt.device : "cpu", r.model, n > 2 && strcmp(cb, "cpu") ? " --comm-world N" : "");
    goto out;
  }
  /* The multi-process channel's calibration, where there is one for the run's world: its
   * all-reduce and send/recv replace the threads' (the device's own name: `hetsim calib` under
   * a launcher times the channel, not steps shared by N workers), and each round also costs
   * the messages and hand-offs of the commands that start its operations (real_rank.h). */
  double rank_msg = 0;
  int tcp = 0;
  if (multi && !strcmp(cb, "cpu")) {
    double a1 = 0, b1 = 1, a2 = 0, b2 = 1;
    hs_diag td = {0};
    if ((n < 2 || comm_fit(perf_store, r.opt.device_name, "tcp", "allreduce", n, &a1, &b1) > 0) &&
        comm_fit(perf_store, r.opt.device_name, "tcp", "p2p", 2, &a2, &b2) > 0 &&
        hs_store_comm_latest(perf_store, r.opt.device_name, "tcp", "wake", 2, &rank_msg, &td) > 0) {
      tcp = 1;
      cb = "tcp";
      comm_dev = r.opt.device_name;
      a_ar = a1, b_ar = b1, a_p2p = a2, b_p2p = b2;
    }
  }
  /* At the run's message size (the model's gradient, or model, in fp32), the measured time
   * (comm_at) replaces the line's: alpha stays when below it, beta then gives the rest. */
  hs_model_stats ms;
  hs_diag md = {0};
  int stats_rc = hs_zoo_stats(r.model, &ms, &md);
  double msg = stats_rc ? 0 : (double)ms.grad_bytes, t_at;
  int ar_world = 0; /* the participants of the measured all-reduce taken; 0: the fit's */
  if (n > 1 && msg > 0 && comm_at(perf_store, comm_dev, cb, "allreduce", n, msg, &t_at) > 0) {
    if (!(a_ar >= 0 && a_ar < t_at)) a_ar = 0;
    b_ar = msg / (t_at - a_ar);
    hs_diag wd = {0};
    if (hs_store_comm_world(perf_store, comm_dev, cb, "allreduce", n, &ar_world, &wd) <= 0) ar_world = 0;
  }
  if (msg > 0 && comm_at(perf_store, comm_dev, cb, "p2p", 2, msg, &t_at) > 0) {
    if (!(a_p2p >= 0 && a_p2p < t_at)) a_p2p = 0;
    b_p2p = msg / (t_at - a_p2p);
  }
  /* The runtime applies each reduced vector or push to its global model once (one pass over
   * the parameters, under its lock, before the participants go on): the calibrated update
   * phase, added to every all-reduce and taken as the parameter server's update time. */
  double upd = 0;
  if (update_time(perf_store, cdev, r.model, &upd) <= 0 && update_time(perf_store, r.opt.device_name, r.model, &upd) <= 0) upd = 0;
  /* The runtime's hand-offs between threads, each the calibrated wake-up (0 for a
   * calibration older than the "wake" op), as many as the cpu backend counts per all-reduce
   * and per server message (real_comm.h). */
  double wake = 0;
  int have_wake = wake_time(perf_store, comm_dev, &wake) > 0 || wake_time(perf_store, r.opt.device_name, &wake) > 0;
  /* On the cpu, the workers' threads (a multi-process run: the processes on rank 0's machine,
   * the server's included) may have been more than the CPUs the run could use. A step shorter
   * than the scheduler's time slice then runs to its end once it has a CPU, and the others
   * wait their turn: the simulation gives the node as many compute slots as the run had CPUs
   * (docs/performance.md, "CPU sharing"). `hetsim calib --concurrent N` timed each step as N
   * nets shared the machine, which holds the sharing of caches and memory, not that wait. */
  int sharers = multi ? r.opt.local_ranks : hs_cluster_all_workers(&spec);
  int crowded = !strcmp(r.opt.device, "cpu") && r.opt.cpus > 0 && sharers > r.opt.cpus;
  /* hetsim real runs every worker on this machine, whatever nodes the cluster file names (the
   * runtimes emulate compute and comm slowdowns, not links between nodes): the simulation puts
   * them all, joiners too, on the first node, whose link the calibrated ring becomes. */
  for (int w = 0; w < spec.n_workers; w++) spec.workers[w].node = 0;
  for (int i = 0; i < spec.n_events; i++)
    if (spec.events[i].kind == HS_EVENT_JOIN) spec.events[i].node = 0;
  for (int i = 0; i < spec.n_nodes; i++) spec.nodes[i].compute_slots = 0;
  if (crowded) spec.nodes[0].compute_slots = r.opt.cpus;
  /* What a round costs beyond the bytes: the threads' hand-offs (the backend's count), or the
   * multi-process runtime's command messages and its ranks' hand-offs (real_rank.h). */
  double ar_msgs = tcp ? HS_REAL_RANK_OPS_PER_ALLREDUCE * HS_REAL_RANK_MESSAGES_PER_OP : 0;
  double p2p_msgs = tcp ? HS_REAL_RANK_OPS_PER_MESSAGE * HS_REAL_RANK_MESSAGES_PER_OP : 0;
  double ar_hand = tcp ? HS_REAL_RANK_OPS_PER_ALLREDUCE * HS_REAL_RANK_HANDOFFS_PER_OP : backend->handoffs_per_allreduce;
  double p2p_hand = tcp ? HS_REAL_RANK_OPS_PER_MESSAGE * HS_REAL_RANK_HANDOFFS_PER_OP : backend->handoffs_per_message;
  hs_link_spec ring = {.bandwidth = b_ar, .latency = 0};
  if (n > 1) ring = hs_ring_link(a_ar + upd + ar_hand * wake + ar_msgs * rank_msg, b_ar, n);
  spec.network = ring;
  for (int i = 0; i < spec.n_nodes; i++) spec.nodes[i].link = ring;
  /* The simulator caps a parameter-server transfer on the worker's side at the network's
   * bandwidth (sim_run.c), and the runtime's workers copy at the measured send/recv's speed:
   * with every worker on one node the network carries nothing else, so it takes that speed
   * where it is the faster. Until 2026-11-28 the ring's all-reduce bandwidth capped every push
   * and pull (0.13 ms instead of 0.016 for mlp's 0.8 MB here); a cluster file of several nodes
   * kept that cap, and its workers apart, a while longer. */
  if (b_p2p > spec.network.bandwidth) spec.network.bandwidth = b_p2p;
  spec.ps.link = (hs_link_spec){.bandwidth = b_p2p, .latency = a_p2p + p2p_hand * wake + p2p_msgs * rank_msg};
  spec.ps.update_time = upd;
  /* The runtime's server adds each accumulated push into its accumulator in one pass over the
   * parameters (rt_model.h, hs_runtime_model_push), as long as an update takes. */
  spec.ps.accumulate_time = upd;
  /* A multi-process run's policy applies (ps-bsp, ksync, kasync) by a command to the server's
   * rank and its report back, on the round's critical path (real_rank.h). */
  spec.ps.apply_latency = tcp ? HS_REAL_RANK_MESSAGES_PER_OP * rank_msg + HS_REAL_RANK_HANDOFFS_PER_OP * wake : 0;
  /* hetsim real's server (a lane of the threaded runtime, rank 0's server thread) serves one
   * request at a time in arrival order: a pull waits for the updates queued before it. Unless
   * the run's cluster file says otherwise, the simulation's server does the same; with 2
   * workers it then gives the real staleness (0.50 against 0.51-0.53; at_once 0.997). Its time
   * errors against at_once are not settled (docs/performance.md, "Staleness of asp"). */
  if (!spec.ps.pull_given) spec.ps.pull = HS_PS_PULL_AFTER_UPDATES;
  /* The steps' spread as the calibration saw it: with N workers waiting for each other, the
   * slowest of N steps sets a synchronous round, longer than the median step. */
  double jitter = 0;
  if (step_jitter(perf_store, cdev, r.model, &jitter) <= 0) jitter = 0;
  spec.jitter_cv = jitter;
  /* The real runtimes compress on the host (real/real_worker.h) and send the result as fp32:
   * each compression takes the round trip `hetsim calib` timed (calib/cal_compress.h) on the
   * length nearest the model's gradient, as a multiple of the cost model's reference device,
   * 0 (the reference device's time) without one. */
  double cscale = 0, c_setting = 0, c_t = 0;
  int64_t c_elems = 0;
  hs_diag czd = {0};
  if (!stats_rc && (hs_store_compress_latest(perf_store, cdev, hs_compressor_topk.name, ms.grad_bytes / 4, &c_setting,
                                             &c_elems, &c_t, &czd) > 0 ||
                    hs_store_compress_latest(perf_store, r.opt.device_name, hs_compressor_topk.name,
                                             ms.grad_bytes / 4, &c_setting, &c_elems, &c_t, &czd) > 0)) {
    hs_block cb_blk = hs_compress_flat_block((double)c_elems);
    double model_s = hs_compress_seconds(&hs_compressor_topk, &cb_blk, 1, c_setting);
    if (model_s > 0) cscale = c_t / model_s;
  }
  if (!(perf = calloc((size_t)spec.n_types, sizeof *perf))) {
    fprintf(stderr, "hetsim validate: out of memory\n");
    status = 1;
    goto out;
  }
  int n_own_types = 0; /* types that ran on a device of their own with its own calibration */
  for (int t = 0; t < spec.n_types; t++) {
    /* Every device type computes as the calibration says, whatever forms the file gave (its
     * per-model forms included): the calibration of --device's (cdev), or, for a type whose
     * workers ran on a device of their own (`real_device`, recorded in type_devices) other
     * than --device's, that device's own: a partition of a GPU ("NAME (16 SMs)") steps on SMs
     * no other worker shares, so it is timed alone. */
    const char *tdev = cdev;
    for (int k = 0; k < r.opt.n_type_devices; k++)
      if (!strcmp(r.opt.type_devices[k].type, spec.types[t].name) &&
          strcmp(r.opt.type_devices[k].device_name, r.opt.device_name))
        tdev = r.opt.type_devices[k].device_name;
    n_own_types += tdev != cdev;
    free(spec.types[t].per_model);
    spec.types[t].per_model = NULL;
    spec.types[t].n_per_model = 0;
    memset(&spec.types[t].compute, 0, sizeof spec.types[t].compute);
    spec.types[t].compute.kind = HS_COMPUTE_CALIB;
    size_t cl = sizeof spec.types[t].compute.calib, nl = strlen(tdev);
    if (nl >= cl) nl = cl - 1;
    memcpy(spec.types[t].compute.calib, tdev, nl);
    spec.types[t].compute.calib[nl] = 0;
    spec.types[t].max_batch = 0;
    spec.types[t].memory = 0;
    if ((rc = hs_perf_load(perf_store, tdev, r.model, &perf[t], NULL, &d))) {
      const char *own = NULL; /* the type's device as the run's cluster file wrote it */
      for (int k = 0; tdev != cdev && k < r.opt.n_type_devices; k++)
        if (!strcmp(r.opt.type_devices[k].device_name, tdev)) own = r.opt.type_devices[k].device;
      if (own)
        fprintf(stderr, "hetsim validate: device type %s ran on %s: %s; run `hetsim calib --device %s --model %s` "
                "first\n", spec.types[t].name, own, d.msg, own, r.model);
      else
        fprintf(stderr, "hetsim validate: %s; run `hetsim calib --device cpu --model %s` first\n", d.msg, r.model);
      goto out;
    }
  }

  const hs_policy *pol;
  hs_params params;
  char pspec[1200];
  snprintf(pspec, sizeof pspec, "%s%s%s", r.policy, r.params[0] ? ":" : "", r.params);
  if ((rc = hs_policy_parse(pspec, &pol, &params, &d))) {
    fprintf(stderr, "hetsim validate: run %lld: %s\n", id, d.msg);
    goto out;
  }
  const hs_model_info *mi = hs_zoo_find(r.model);
  if (!mi || stats_rc) {
    fprintf(stderr, "hetsim validate: run %lld: unknown model %s\n", id, r.model);
    goto out;
  }
  /* The proxy convergence model trains the same model on the same data, when it can: a
   * Fashion-MNIST model. Other runs (resnet18 on the GPU's partitions, on CIFAR-shaped data)
   * are validated on time alone. */
  const hs_conv_model *conv = NULL;
  hs_params cparams;
  char cspec[256];
  int64_t every = r.opt.eval_every > 0 ? r.opt.eval_every : r.iterations;
  snprintf(cspec, sizeof cspec, "proxy:lr=%.17g,eval_every=%lld,eval_samples=%lld,train_samples=%lld",
           r.opt.lr, (long long)every, (long long)(r.opt.eval_samples > 10000 ? 10000 : r.opt.eval_samples),
           (long long)r.opt.train_samples);
  hs_diag cd = {0};
  if (isnan(r.final_loss) || !hs_conv_proxy_supports(r.model, spec.n_workers) ||
      hs_conv_parse(cspec, r.model, NULL, &conv, &cparams, &cd))
    conv = NULL;

  /* The same question asked again gets the same answer: reuse a stored simulation with the
   * same inputs (their key) instead of storing a second one. */
  char key[17];
  snprintf(key, sizeof key, "%016llx",
           (unsigned long long)sim_key(id, cdev, perf, spec.n_types, &spec, text, pspec, &r,
                                       conv ? cspec : "none", cscale));
  int64_t vid = 0;
  double sim_total = NAN, sim_ttl = NAN;
  int reused = hs_store_validation_find(store, id, key, &vid, &sim.id, &sim_total, &sim_ttl, &d);
  if (reused < 0) {
    fprintf(stderr, "hetsim validate: %s\n", d.msg);
    status = 1;
    goto out;
  }

  hs_sim_config cfg = {
      .cluster = &spec, .model = r.model, .grad_bytes = (double)ms.grad_bytes,
      .param_bytes = 4.0 * (double)ms.params, .dataset_size = r.opt.train_samples > 0 ? r.opt.train_samples : mi->dataset_train_size,
      .global_batch = r.global_batch, .policy = pol, .params = &params, .seed = r.seed,
      .max_iterations = r.iterations, .sink = hs_cli_run_step_sink, .sink_ctx = &sim, .perf = perf,
      .conv = conv, .conv_params = conv ? &cparams : NULL,
      .eval_sink = conv ? hs_cli_eval_sink : NULL, .eval_ctx = &sim.evals,
      .compress_scale = cscale, .dense_wire = 1,
  };
  if (!reused) {
    char command[256], options[1024];
    snprintf(command, sizeof command, "hetsim validate %lld", id);
    /* The simulated run's options through their one writer (core_runopts.h). */
    hs_validate_options vo = {.validates = id, .iterations = r.iterations,
                              .target_loss = conv ? r.final_loss : NAN, .grad_bytes = (int64_t)ms.grad_bytes};
    snprintf(vo.convergence, sizeof vo.convergence, "%s", conv ? "proxy" : "none");
    memcpy(vo.validation_key, key, sizeof vo.validation_key);
    if ((rc = hs_validate_options_format(&vo, options, sizeof options, &d))) {
      fprintf(stderr, "hetsim validate: %s\n", d.msg);
      status = 1;
      goto out;
    }
    hs_run_info info = {.kind = "sim", .policy = pol->name, .params = r.params, .cluster_name = spec.name,
                        .cluster_text = text, .model = r.model, .global_batch = r.global_batch,
                        .seed = r.seed, .options_json = options, .command = command};
    sim = (hs_cli_run){.store = store, .info = &info, .store_steps = 1};
    if ((rc = hs_cli_run_begin(&sim, &d))) {
      fprintf(stderr, "hetsim validate: storing the simulated run: %s\n", d.msg);
      status = 1;
      goto out;
    }
    rc = hs_sim_run(&cfg, &res, &d);
    /* The time to the real run's final loss: the first evaluation that reaches it, else a
     * continuation of the same simulation up to 2N iterations with it as the target (the same
     * first N iterations: the simulation is deterministic), not stored. */
    for (int64_t i = 0; conv && !rc && i < sim.evals.n && isnan(sim_ttl); i++)
      if (sim.evals.r[i].loss <= r.final_loss) sim_ttl = sim.evals.r[i].time_s;
    if (conv && !rc && isnan(sim_ttl)) {
      hs_sim_config more = cfg;
      more.max_iterations = 2 * r.iterations;
      more.target_loss = r.final_loss;
      more.sink = NULL;
      more.eval_sink = NULL;
      hs_sim_result mres;
      rc = hs_sim_run(&more, &mres, &d);
      if (!rc) sim_ttl = mres.summary.time_to_target_s;
      hs_sim_result_free(&mres);
    }
    if (!rc) {
      res.summary.time_to_target_s = sim_ttl;
      sim_total = res.summary.sim_time_s;
    }
    hs_diag sd = {0};
    /* No worker rows: a validation's simulated run has never stored them. */
    int src = hs_cli_run_finish(&sim, rc ? "failed" : "complete", rc ? NULL : &res.summary, rc ? d.msg : NULL,
                                NULL, 0, &sd);
    if (rc || src) {
      fprintf(stderr, "hetsim validate: simulating run %lld: %s\n", id, rc ? d.msg : sd.msg);
      status = 1;
      goto out;
    }
  }

  double ttl = NAN, real_ttl = NAN;
  double cratio = compute_ratio(store, id, &perf[0], upd, &spec);
  int64_t per_round = round_versions(store, id, n, r.iterations);
  hs_iter_compare ic = {0}, wc = {0}, ac = {0};
  int crc = iter_compare(store, id, sim.id, per_round, &ic, &d);
  if (!crc && window > 1) crc = iter_compare(store, id, sim.id, per_round * window, &wc, &d);
  if (!crc && against) crc = iter_compare(store, id, against, per_round, &ac, &d);
  if (crc) {
    fprintf(stderr, "hetsim validate: reading the runs' steps: %s\n", d.msg);
    status = 1;
    goto out;
  }
  double total_err = rel_diff(sim_total, r.total_s);
  double against_total = NAN;
  if (against) {
    real_run_row a;
    memset(&a, 0, sizeof a);
    /* Totals compare only runs of the same number of iterations. */
    if (load_run(store, against, &a, &d) > 0 && a.iterations == r.iterations) against_total = rel_diff(a.total_s, r.total_s);
    free(a.cluster_text);
  }
  if (conv) {
    hs_diag ed = {0};
    if (hs_store_eval_first_below(store, id, r.final_loss * (1 + 1e-12), &real_ttl, &ed) <= 0) real_ttl = NAN;
    if (real_ttl > 0 && !isnan(sim_ttl)) ttl = fabs(sim_ttl - real_ttl) / real_ttl;
  }
  if (!reused) {
    hs_validation_row vr = {.run_id = id, .sim_run_id = sim.id, .median_iter_error = ic.median_error,
                            .p95_iter_error = ic.p95_error, .time_to_loss_error = ttl,
                            .mean_iter_error = ic.mean_error, .total_time_error = total_err,
                            .iter_wasserstein = ic.wasserstein_rel};
    if ((rc = hs_store_validation_add(store, &vr, &vid, &d))) {
      fprintf(stderr, "hetsim validate: %s\n", d.msg);
      status = 1;
      goto out;
    }
  }
  double rpart[3], spart[3];
  hs_diag pd2 = {0};
  hs_store_step_parts(store, id, rpart, &pd2);
  hs_store_step_parts(store, sim.id, spart, &pd2);
  /* How stale the applied pushes were (0 for a synchronous policy): an asynchronous run's
   * convergence depends on it as much as on its speed. */
  double rstale = NAN, sstale = NAN;
  hs_store_step_mean_staleness(store, id, &rstale, &pd2);
  hs_store_step_mean_staleness(store, sim.id, &sstale, &pd2);
  if (json) {
    hs_json j;
    hs_json_init(&j, stdout, 1);
    hs_json_object_begin(&j);
    hs_json_key(&j, "run_id"); hs_json_int(&j, id);
    hs_json_key(&j, "sim_run_id"); hs_json_int(&j, sim.id);
    hs_json_key(&j, "validation_id"); hs_json_int(&j, vid);
    hs_json_key(&j, "reused"); hs_json_bool(&j, reused);
    hs_json_key(&j, "policy"); hs_json_string(&j, pol->name);
    hs_json_key(&j, "device"); hs_json_string(&j, r.opt.device_name);
    hs_json_key(&j, "compute_calibration"); hs_json_string(&j, cdev);
    if (n_own_types) {
      /* Only for a run whose types ran on devices of their own: the calibration of each type. */
      hs_json_key(&j, "type_calibrations");
      hs_json_object_begin(&j);
      for (int t = 0; t < spec.n_types; t++) {
        hs_json_key(&j, spec.types[t].name);
        hs_json_string(&j, spec.types[t].compute.calib);
      }
      hs_json_object_end(&j);
    }
    hs_json_key(&j, "update_s"); hs_json_double(&j, upd);
    hs_json_key(&j, "comm_backend"); hs_json_string(&j, cb);
    hs_json_key(&j, "launch"); hs_json_string(&j, multi ? r.opt.launch : "none");
    hs_json_key(&j, "message_bytes"); hs_json_double(&j, msg);
    hs_json_key(&j, "allreduce_s"); if (n > 1) hs_json_double(&j, a_ar + msg / b_ar); else hs_json_null(&j);
    hs_json_key(&j, "allreduce_world"); if (ar_world > 0) hs_json_int(&j, ar_world); else hs_json_null(&j);
    hs_json_key(&j, "p2p_s"); hs_json_double(&j, a_p2p + msg / b_p2p);
    hs_json_key(&j, "wake_s"); if (have_wake) hs_json_double(&j, wake); else hs_json_null(&j);
    hs_json_key(&j, "rank_message_s"); if (tcp) hs_json_double(&j, rank_msg); else hs_json_null(&j);
    hs_json_key(&j, "apply_latency_s"); if (tcp) hs_json_double(&j, spec.ps.apply_latency); else hs_json_null(&j);
    hs_json_key(&j, "jitter_cv"); hs_json_double(&j, jitter);
    hs_json_key(&j, "compress_roundtrip_s"); if (cscale > 0) hs_json_double(&j, c_t); else hs_json_null(&j);
    hs_json_key(&j, "compress_scale"); if (cscale > 0) hs_json_double(&j, cscale); else hs_json_null(&j);
    hs_json_key(&j, "cpus"); if (r.opt.cpus > 0) hs_json_int(&j, r.opt.cpus); else hs_json_null(&j);
    hs_json_key(&j, "cpu_sharers"); if (r.opt.cpus > 0 && sharers > 0) hs_json_int(&j, sharers); else hs_json_null(&j);
    hs_json_key(&j, "compute_ratio"); if (isnan(cratio)) hs_json_null(&j); else hs_json_double(&j, cratio);
    json_parts(&j, "real_step", rpart);
    json_parts(&j, "sim_step", spart);
    hs_json_key(&j, "real_mean_staleness"); if (isnan(rstale)) hs_json_null(&j); else hs_json_double(&j, rstale);
    hs_json_key(&j, "sim_mean_staleness"); if (isnan(sstale)) hs_json_null(&j); else hs_json_double(&j, sstale);
    hs_json_key(&j, "intervals"); hs_json_int(&j, ic.n);
    hs_json_key(&j, "versions_per_interval"); hs_json_int(&j, per_round);
    if (window > 1) {
      hs_json_key(&j, "window"); hs_json_int(&j, window);
      hs_json_key(&j, "window_intervals"); hs_json_int(&j, wc.n);
      hs_json_key(&j, "window_median_iter_error"); hs_json_double(&j, wc.median_error);
      hs_json_key(&j, "window_p95_iter_error"); hs_json_double(&j, wc.p95_error);
    }
    if (against) {
      hs_json_key(&j, "against_run_id"); hs_json_int(&j, against);
      hs_json_key(&j, "against_intervals"); hs_json_int(&j, ac.n);
      hs_json_key(&j, "against_median_iter_error"); hs_json_double(&j, ac.median_error);
      hs_json_key(&j, "against_p95_iter_error"); hs_json_double(&j, ac.p95_error);
      hs_json_key(&j, "against_mean_iter_error"); hs_json_double(&j, ac.mean_error);
      hs_json_key(&j, "against_total_time_error"); hs_json_double(&j, against_total);
      hs_json_key(&j, "against_iter_wasserstein"); hs_json_double(&j, ac.wasserstein_rel);
    }
    hs_json_key(&j, "median_iter_error"); hs_json_double(&j, ic.median_error);
    hs_json_key(&j, "p95_iter_error"); hs_json_double(&j, ic.p95_error);
    hs_json_key(&j, "mean_iter_error"); hs_json_double(&j, ic.mean_error);
    hs_json_key(&j, "real_mean_iter_s"); hs_json_double(&j, ic.ref_mean);
    hs_json_key(&j, "sim_mean_iter_s"); hs_json_double(&j, ic.cmp_mean);
    hs_json_key(&j, "total_time_error"); hs_json_double(&j, total_err);
    hs_json_key(&j, "real_total_s"); hs_json_double(&j, r.total_s);
    hs_json_key(&j, "sim_total_s"); hs_json_double(&j, sim_total);
    hs_json_key(&j, "iter_wasserstein"); hs_json_double(&j, ic.wasserstein_rel);
    hs_json_key(&j, "time_to_loss_error"); hs_json_double(&j, ttl);
    hs_json_key(&j, "real_time_to_loss_s"); hs_json_double(&j, real_ttl);
    hs_json_key(&j, "sim_time_to_loss_s"); hs_json_double(&j, sim_ttl);
    hs_json_key(&j, "final_loss"); hs_json_double(&j, r.final_loss);
    hs_json_object_end(&j);
  } else {
    printf("validation %lld of real run %lld (%s on %s), simulated as run %lld%s\n", (long long)vid, id,
           pol->name, r.opt.device_name, (long long)sim.id,
           reused ? " (reused: stored by an earlier validate with the same inputs)" : "");
    if (tcp)
      printf("  runtime                    one process per worker (%s): the tcp channel as `hetsim calib` timed it "
             "under a launcher of %d processes\n", r.opt.launch, n);
    else if (multi)
      printf("  runtime                    one process per worker (%s): its TCP all-reduce and control messages "
             "are not calibrated for %d processes (`hetsim calib --device cpu` started as the run was times them); "
             "simulated as the threads over the %s backend, so expect it short\n", r.opt.launch, n, cb);
    if (crowded)
      printf("  CPU sharing                %d %s on %d CPU%s%s: simulated as %d compute slot%s, a step waiting for "
             "one when all are taken\n", sharers, multi ? "processes" : "worker threads", r.opt.cpus,
             r.opt.cpus == 1 ? "" : "s", multi ? " (the server's included)" : "", r.opt.cpus, r.opt.cpus == 1 ? "" : "s");
    printf("  compute calibration        %s%s\n", cdev,
           cdev == r.opt.device_name && n > 1 ? " (steps timed alone; `hetsim calib --concurrent N` times them as N workers share the machine)" : "");
    for (int t = 0; n_own_types && t < spec.n_types; t++)
      printf("    device type %-14s %s\n", spec.types[t].name, spec.types[t].compute.calib);
    printf("  global model update        %.4g ms per all-reduce or push (calibrated update phase)\n", upd * 1e3);
    if (n > 1 && ar_world > 0 && ar_world != n)
      printf("  all-reduce of %.4g MB      %.4g ms (measured at the size over %d participants, %s backend; the run "
             "had %d: `hetsim calib --comm-world %d` times that)\n", msg / 1e6, (a_ar + msg / b_ar) * 1e3, ar_world,
             cb, n, n);
    else if (n > 1)
      printf("  all-reduce of %.4g MB      %.4g ms (measured at the size, %s backend)\n", msg / 1e6, (a_ar + msg / b_ar) * 1e3, cb);
    printf("  send or receive of %.4g MB %.4g ms (measured at the size, %s backend)\n", msg / 1e6, (a_p2p + msg / b_p2p) * 1e3, cb);
    if (tcp)
      printf("  control message            %.4g ms each, %g per all-reduce, %g per server message, %d per apply "
             "(calibrated)\n", rank_msg * 1e3, ar_msgs, p2p_msgs, HS_REAL_RANK_MESSAGES_PER_OP);
    if (have_wake)
      printf("  thread hand-off            %.4g ms each, %g per all-reduce, %g per server message%s (calibrated)\n",
             wake * 1e3, ar_hand, p2p_hand, tcp ? ", 1 per apply" : "");
    else
      printf("  thread hand-off            not calibrated (a calibration older than it): none charged\n");
    printf("  step time jitter           cv %.3f (lognormal, from the calibrated steps' 10th-90th percentiles)\n", jitter);
    if (cscale > 0)
      printf("  compression (if any)       %s %g on %lld floats %.4g ms a round trip (calibrated, %.3g times the cost "
             "model's reference device), sent as fp32 as the real runtimes do\n", hs_compressor_topk.name, c_setting,
             (long long)c_elems, c_t * 1e3, cscale);
    else
      printf("  compression (if any)       not calibrated: the cost model's reference device (`hetsim calib --device "
             "cpu` on this host times it); sent as fp32 as the real runtimes do\n");
    if (!isnan(cratio))
      printf("  real compute / calibrated  %.3f (median over the steps; 1 = the machine ran at the calibration's speed)\n", cratio);
    printf("  per step, real / simulated compute %.4g / %.4g ms, communication %.4g / %.4g ms, idle %.4g / %.4g ms (means)\n",
           rpart[0] * 1e3, spart[0] * 1e3, rpart[1] * 1e3, spart[1] * 1e3, rpart[2] * 1e3, spart[2] * 1e3);
    if (rstale > 0 || sstale > 0)
      printf("  staleness of the updates   real %.3g, simulated %.3g versions behind (means over the steps)\n", rstale,
             sstale);
    printf("  per-iteration time error   median %.4f, p95 %.4f over %lld intervals of one round (%lld version%s)\n",
           ic.median_error, ic.p95_error, (long long)ic.n, (long long)per_round, per_round == 1 ? "" : "s");
    printf("  mean iteration time        real %.4g ms, simulated %.4g ms: error %+.4f (over the same intervals)\n",
           ic.ref_mean * 1e3, ic.cmp_mean * 1e3, ic.mean_error);
    printf("  total time                 real %.4g s, simulated %.4g s: error %+.4f (%lld iterations, start-up included)\n",
           r.total_s, sim_total, total_err, (long long)r.iterations);
    printf("  iteration-time distance    %.4f of the real mean (Wasserstein-1 between the two runs' per-iteration times)\n",
           ic.wasserstein_rel);
    if (against) {
      char label[64];
      snprintf(label, sizeof label, "real run %lld against it", (long long)against);
      printf("  %-27smedian %.4f, p95 %.4f over %lld intervals, mean %+.4f, total %+.4f, distance %.4f"
             " (the machine's own floor)\n", label, ac.median_error, ac.p95_error, (long long)ac.n, ac.mean_error,
             against_total, ac.wasserstein_rel);
    }
    if (window > 1)
      printf("  over windows of %lld rounds median %.4f, p95 %.4f over %lld intervals\n", (long long)window,
             wc.median_error, wc.p95_error, (long long)wc.n);
    if (!conv) printf("  time to final loss error   not measured (no loss, or a model the proxy cannot train)\n");
    else if (isnan(ttl)) printf("  time to final loss error   not reached: the simulation never got to loss %.6g\n", r.final_loss);
    else printf("  time to final loss error   %.4f (real %.6g s, simulated %.6g s, loss %.6g)\n", ttl, real_ttl,
                sim_ttl, r.final_loss);
  }
  status = 0;

out:
  hs_sim_result_free(&res);
  hs_cli_run_free(&sim);
  free(perf);
  free(r.cluster_text);
  free(gen);
  if (have_spec) hs_cluster_spec_free(&spec);
  hs_store_close(cstore);
  hs_store_close(store);
  return status;
}
