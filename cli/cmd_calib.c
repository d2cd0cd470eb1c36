/* hetsim calib: time real training steps on a device, fit performance models, store both; and
 * `hetsim calib import`: the same tables from profiles measured elsewhere (calib/cal_import.h).
 *
 * Every input is checked, and the device opened, before the database is touched, so that bad
 * input (an unknown model, a GPU this machine lacks, a bad profile) leaves nothing in the
 * database. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib/cal_device.h"
#include "calib/cal_import.h"
#include "calib/cal_run.h"
#include "cli/cli.h"
#include "core/core_deadline.h"
#include "core/core_json.h"
#include "core/core_progress.h"
#include "core/core_store.h"
#include "core/core_units.h"
#include "nn/nn_net.h"
#include "nn/nn_zoo.h"
#include "real/real_comm_calib.h"
#include "real/real_rank_tcp.h"

/* The one piece of process-wide state: a signal handler can reach nothing else. 1: SIGINT or
 * SIGTERM; 2: --time-limit reached (set by the limit's thread). */
static volatile sig_atomic_t calib_interrupted;
static void on_sigint(int sig) { calib_interrupted = 1; }

/* --time-limit: a thread that sets calib_interrupted to 2 at the deadline, unless the command
 * ends first. The calibration polls the flag between timed steps, as it does for SIGINT: it
 * stops after the step in progress, with what it stored kept. */
typedef struct time_limit {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct timespec deadline; /* CLOCK_MONOTONIC */
  int over, started;
  pthread_t th;
} time_limit;

static void *time_limit_main(void *arg) {
  time_limit *t = arg;
  pthread_mutex_lock(&t->mu);
  while (!t->over && pthread_cond_timedwait(&t->cv, &t->mu, &t->deadline) != ETIMEDOUT) {
  }
  if (!t->over) calib_interrupted = 2;
  pthread_mutex_unlock(&t->mu);
  return NULL;
}

/* Starts the limit's thread (seconds > 0); 0, or an errno when the thread cannot start. */
static int time_limit_start(time_limit *t, double seconds) {
  memset(t, 0, sizeof *t);
  if (!(seconds > 0)) return 0;
  hs_cond_init_monotonic(&t->cv);
  pthread_mutex_init(&t->mu, NULL);
  hs_deadline_in(&t->deadline, seconds);
  int rc = pthread_create(&t->th, NULL, time_limit_main, t);
  t->started = rc == 0;
  return rc;
}

static void time_limit_stop(time_limit *t) {
  if (!t->started) return;
  pthread_mutex_lock(&t->mu);
  t->over = 1;
  pthread_cond_signal(&t->cv);
  pthread_mutex_unlock(&t->mu);
  pthread_join(t->th, NULL);
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  t->started = 0;
}

enum { MAX_MODELS = 16, MAX_BATCHES = 64 };
static const int default_batches[] = {8, 16, 32, 64, 128, 256};

static void usage(FILE *out) {
  fprintf(out,
"usage: hetsim calib --device cpu|cuda:I|cuda:I/sm=N [--model NAME]... [--batches LIST]\n"
"                    [--db FILE] [--json] [--warmup N] [--min-reps N] [--max-reps N]\n"
"                    [--rel-tol X] [--comm | --no-comm] [--comm-max BYTES] [--comm-world N]\n"
"                    [--threads N] [--concurrent N] [--pin auto|none] [--name NAME] [--redo]\n"
"                    [--seed S]\n"
"       hetsim calib import FILE... [--db FILE] [--as NAME] [--json]\n"
"                    (profiles measured elsewhere; `hetsim calib import --help`)\n"
"\n"
"Times training steps (forward, backward, update and the whole step) of each model on the\n"
"device over a sweep of batch sizes, a few steps per size in passes over all sizes (so that a\n"
"slow spell of the machine spreads over every size; a size whose step times fall in two\n"
"groups is timed again), fits t(b) (linear, cubic, piecewise, saturating) and\n"
"keeps the form with the smallest error on held-out batch sizes; on the cpu also times the\n"
"threaded all-reduce and memcpy transfers and fits alpha + n/beta, and the latency of one\n"
"thread waking another (the runtime's hand-off), and the round trip of top-k compression on\n"
"each model's gradient (as the real runtimes compress an update). Everything goes to the\n"
"database; a rerun skips the points already stored (resume) and refits.\n"
"\n"
"  --device DEV      cpu, cuda:I (GPU I) or cuda:I/sm=N (a partition of N SMs)\n"
"  --model NAME      model from `hetsim models`; repeat or comma-separate (default mlp,cnn)\n"
"  --batches LIST    batch sizes, e.g. 8,16,32,64 (default 8,16,32,64,128,256); at least 3;\n"
"                    the sweep stops at the first that runs out of memory\n"
"  --db FILE         database (default %s)\n"
"  --json            print the result as one JSON object on stdout\n"
"  --warmup N        untimed steps before a batch's first timed ones (default 3); one more\n"
"                    untimed step after each switch between batch sizes\n"
"  --min-reps N      timed steps at least (default 5)\n"
"  --max-reps N      timed steps at most (default 50)\n"
"  --rel-tol X       stop a batch size once the 95%% confidence interval of its median step\n"
"                    time lies within X of the median (relative, default 0.02)\n"
"  --comm, --no-comm time communication or not (default on: on the cpu the cpu backend's,\n"
"                    on a GPU the local backend's all-reduce and send/recv; --no-comm\n"
"                    also leaves out the compression)\n"
"  --comm-max BYTES  largest message, sizes 4KiB, 16KiB, ... (default 64MiB)\n"
"  --comm-world N    threads of the timed all-reduce (default 2; a GPU: at most 64)\n"
"  --threads N       cpu: threads per net (default 1)\n"
"  --concurrent N    time each step while N-1 other nets step at the same time, each on its\n"
"                    own thread, as N workers of `hetsim real --backend cpu` share the\n"
"                    machine; stored as device \"NAME (N workers)\", which `hetsim validate`\n"
"                    uses for runs of N workers (default 1: the step alone)\n"
"  --pin auto|none   auto (default): on the cpu, the concurrent nets' threads and the\n"
"                    all-reduce's, one per CPU when they fit, as `hetsim real --pin auto`\n"
"                    pins its workers; none: left to the scheduler (for runs with --pin none)\n"
"  --name NAME       device name to store (default: the CPU or GPU model name)\n"
"  --redo            time every point again instead of skipping stored ones\n"
"  --seed S          weights and random inputs (default 1)\n"
"  --time-limit T    stop after T of timing (like 10m or 90s; default 0 = none) as an\n"
"                    interrupt does: the step in progress ends, the points stored so far\n"
"                    are kept, exit 1; the same command run again resumes\n"
"\n"
"Under a launcher (mpirun -n N, or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT as torchrun sets\n"
"them; N >= 2, as many as the run's processes), --device cpu only: the N processes time the\n"
"channel of `hetsim real`'s one process per worker instead (all-reduce over N, send/recv and\n"
"one control message, over TCP through rank 0), which rank 0 stores as backend tcp and\n"
"`hetsim validate` uses for such runs; options of the steps alone are refused there.\n"
"\n"
"SIGINT and SIGTERM stop it the same way. exit status: 0 done, 1 runtime failure, interrupted\n"
"or out of time (rerun to resume), 2 bad input.\n",
          HS_DEFAULT_DB);
}

typedef struct calib_args {
  const char *device, *db, *name;
  const char *models[MAX_MODELS];
  int n_models;
  int batches[MAX_BATCHES];
  int n_batches;
  int json, comm, redo, threads;
  double time_limit; /* s; 0 = none */
  const char *steps_only; /* the first option given that only the steps' timing takes */
  hs_cal_opts o;
} calib_args;

#define bad(...) hs_cli_usage("calib", 1, __VA_ARGS__)

static int parse_int(const char *s, long min, long max, int *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < min || v > max) return -1;
  *out = (int)v;
  return 0;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static int parse_batches(const char *s, calib_args *a) {
  char buf[1024];
  if (strlen(s) >= sizeof buf) return bad("--batches: list too long");
  snprintf(buf, sizeof buf, "%s", s);
  a->n_batches = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (a->n_batches == MAX_BATCHES) return bad("--batches: at most %d batch sizes", MAX_BATCHES);
    if (parse_int(tok, 1, 1 << 24, &a->batches[a->n_batches]))
      return bad("--batches: expected positive integers separated by commas, got \"%s\"", s);
    a->n_batches++;
  }
  qsort(a->batches, (size_t)a->n_batches, sizeof a->batches[0], cmp_int);
  for (int i = 1; i < a->n_batches; i++)
    if (a->batches[i] == a->batches[i - 1]) return bad("--batches: batch size %d is given twice", a->batches[i]);
  if (a->n_batches < HS_FIT_MIN_POINTS)
    return bad("--batches: need at least %d batch sizes to fit and judge a model, got %d", HS_FIT_MIN_POINTS, a->n_batches);
  return 0;
}

static int add_models(const char *s, calib_args *a) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    const hs_model_info *mi = hs_zoo_find(tok);
    if (!mi) {
      char names[256];
      hs_zoo_names(names, sizeof names);
      return bad("--model: unknown model \"%s\"; valid: %s", tok, names);
    }
    int dup = 0;
    for (int i = 0; i < a->n_models; i++) dup |= !strcmp(a->models[i], mi->name);
    if (dup) continue;
    if (a->n_models == MAX_MODELS) return bad("--model: at most %d models", MAX_MODELS);
    a->models[a->n_models++] = mi->name; /* the zoo's string: static */
  }
  return 0;
}

enum { O_DEVICE = 256, O_MODEL, O_BATCHES, O_DB, O_JSON, O_WARMUP, O_MINREPS, O_MAXREPS, O_RELTOL,
       O_COMM, O_NOCOMM, O_COMMMAX, O_COMMWORLD, O_THREADS, O_NAME, O_REDO, O_SEED, O_HELP,
       O_CONCURRENT, O_PIN, O_TIMELIMIT };

static int parse_args(int argc, char **argv, calib_args *a) {
  static const struct option opts[] = {
      {"device", required_argument, NULL, O_DEVICE}, {"model", required_argument, NULL, O_MODEL},
      {"batches", required_argument, NULL, O_BATCHES}, {"db", required_argument, NULL, O_DB},
      {"json", no_argument, NULL, O_JSON}, {"warmup", required_argument, NULL, O_WARMUP},
      {"min-reps", required_argument, NULL, O_MINREPS}, {"max-reps", required_argument, NULL, O_MAXREPS},
      {"rel-tol", required_argument, NULL, O_RELTOL}, {"comm", no_argument, NULL, O_COMM},
      {"no-comm", no_argument, NULL, O_NOCOMM}, {"comm-max", required_argument, NULL, O_COMMMAX},
      {"comm-world", required_argument, NULL, O_COMMWORLD}, {"threads", required_argument, NULL, O_THREADS},
      {"concurrent", required_argument, NULL, O_CONCURRENT}, {"pin", required_argument, NULL, O_PIN},
      {"name", required_argument, NULL, O_NAME}, {"redo", no_argument, NULL, O_REDO},
      {"seed", required_argument, NULL, O_SEED}, {"help", no_argument, NULL, O_HELP},
      {"time-limit", required_argument, NULL, O_TIMELIMIT}, {NULL, 0, NULL, 0},
  };
  memset(a, 0, sizeof *a);
  a->db = HS_DEFAULT_DB;
  a->comm = -1;
  a->threads = 1;
  a->o = (hs_cal_opts){.rule = {.min_reps = 5, .max_reps = 50, .rel_tol = 0.02}, .warmup = 3,
                       .comm_world = 2, .comm_max_bytes = 64 << 20, .seed = 1};
  optind = 1;
  opterr = 0;
  int c, rc;
  double v;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (!a->steps_only && (c == O_BATCHES || c == O_NOCOMM || c == O_COMMWORLD || c == O_CONCURRENT || c == O_THREADS))
      for (const struct option *o = opts; o->name; o++)
        if (o->val == c) a->steps_only = o->name;
    switch (c) {
    case O_DEVICE: a->device = optarg; break;
    case O_MODEL:
      if ((rc = add_models(optarg, a))) return rc;
      break;
    case O_BATCHES:
      if ((rc = parse_batches(optarg, a))) return rc;
      break;
    case O_DB: a->db = optarg; break;
    case O_JSON: a->json = 1; break;
    case O_WARMUP:
      if (parse_int(optarg, 0, 1000000, &a->o.warmup)) return bad("--warmup: expected a non-negative integer, got \"%s\"", optarg);
      break;
    case O_MINREPS:
      if (parse_int(optarg, 1, 1000000, &a->o.rule.min_reps)) return bad("--min-reps: expected a positive integer, got \"%s\"", optarg);
      break;
    case O_MAXREPS:
      if (parse_int(optarg, 1, 1000000, &a->o.rule.max_reps)) return bad("--max-reps: expected a positive integer, got \"%s\"", optarg);
      break;
    case O_RELTOL:
      if (hs_units_parse_number(optarg, &v) || !(v > 0)) return bad("--rel-tol: expected a positive number, got \"%s\"", optarg);
      a->o.rule.rel_tol = v;
      break;
    case O_COMM: a->comm = 1; break;
    case O_NOCOMM: a->comm = 0; break;
    case O_COMMMAX:
      if (hs_units_parse_bytes(optarg, &v) || v < 16384 || v > 4.0 * (1 << 30))
        return bad("--comm-max: expected a size from 16KiB to 4GiB like \"64MiB\", got \"%s\"", optarg);
      a->o.comm_max_bytes = (int64_t)v;
      break;
    case O_COMMWORLD:
      if (parse_int(optarg, 2, 1024, &a->o.comm_world)) return bad("--comm-world: expected an integer from 2 to 1024, got \"%s\"", optarg);
      break;
    case O_PIN:
      if (hs_cli_parse_pin(optarg, &a->o.no_pin)) return bad("--pin: expected auto or none, got \"%s\"", optarg);
      break;
    case O_CONCURRENT:
      if (parse_int(optarg, 1, 1024, &a->o.concurrent)) return bad("--concurrent: expected an integer from 1 to 1024, got \"%s\"", optarg);
      break;
    case O_THREADS:
      if (parse_int(optarg, 1, 1024, &a->threads)) return bad("--threads: expected a positive integer, got \"%s\"", optarg);
      break;
    case O_NAME:
      if (!*optarg || strlen(optarg) > 200) return bad("--name: expected a name of 1 to 200 characters");
      a->name = optarg;
      break;
    case O_REDO: a->redo = 1; break;
    case O_SEED: {
      char *end;
      unsigned long long s = strtoull(optarg, &end, 10);
      if (!*optarg || *end || *optarg == '-') return bad("--seed: expected a non-negative integer, got \"%s\"", optarg);
      a->o.seed = s;
      break;
    }
    case O_TIMELIMIT:
      if (hs_units_parse_time(optarg, &v) || !(v >= 0) || v > 30 * 86400.0)
        return bad("--time-limit: expected a time from 0 to 30 days like \"10m\" or \"90s\", got \"%s\"", optarg);
      a->time_limit = v;
      break;
    case O_HELP:
    case 'h': usage(stdout); return -1;
    default: return bad("unknown or incomplete option \"%s\"", argv[optind - 1]);
    }
  }
  if (optind < argc) return bad("unexpected argument \"%s\"", argv[optind]);
  if (!a->device) return bad("%s", "--device cpu|cuda:I|cuda:I/sm=N is required");
  if (a->o.rule.max_reps < a->o.rule.min_reps)
    return bad("--max-reps (%d) must be at least --min-reps (%d)", a->o.rule.max_reps, a->o.rule.min_reps);
  if (!a->n_models) add_models("mlp,cnn", a);
  if (!a->n_batches) {
    a->n_batches = (int)(sizeof default_batches / sizeof default_batches[0]);
    memcpy(a->batches, default_batches, sizeof default_batches);
  }
  return 0;
}

static void print_json(const calib_args *a, const hs_cal_device *dev, const hs_cal_result *r,
                       const hs_real_launch *l, const char *status) {
  hs_json j;
  hs_json_init(&j, stdout, 1);
  hs_json_object_begin(&j);
  hs_json_key(&j, "status"); hs_json_string(&j, status);
  hs_json_key(&j, "db"); hs_json_string(&j, a->db);
  hs_json_key(&j, "device"); hs_json_object_begin(&j);
  hs_json_key(&j, "id"); hs_json_int(&j, r->device_id);
  hs_json_key(&j, "spec"); hs_json_string(&j, dev->spec);
  hs_json_key(&j, "name"); hs_json_string(&j, dev->name);
  hs_json_key(&j, "kind"); hs_json_string(&j, dev->kind);
  hs_json_key(&j, "host"); hs_json_string(&j, dev->host);
  hs_json_key(&j, "sm_partition"); if (dev->sm_partition > 0) hs_json_int(&j, dev->sm_partition); else hs_json_null(&j);
  hs_json_object_end(&j);
  hs_json_key(&j, "models"); hs_json_array_begin(&j);
  for (int m = 0; m < r->n_models; m++) {
    const hs_cal_model_result *mr = &r->models[m];
    hs_json_object_begin(&j);
    hs_json_key(&j, "model"); hs_json_string(&j, mr->model);
    hs_json_key(&j, "measured"); hs_json_int(&j, mr->measured);
    hs_json_key(&j, "skipped"); hs_json_int(&j, mr->skipped);
    hs_json_key(&j, "max_batch"); if (mr->max_batch) hs_json_int(&j, mr->max_batch); else hs_json_null(&j);
    hs_json_key(&j, "fits"); hs_json_array_begin(&j);
    for (int p = 0; p < HS_CAL_PHASES; p++) {
      if (!mr->fitted[p]) continue;
      const hs_fit_set *fs = &mr->fits[p];
      for (int f = 0; f < HS_PERF_FORMS; f++) {
        if (!fs->r[f].ok) continue;
        hs_json_object_begin(&j);
        hs_json_key(&j, "phase"); hs_json_string(&j, hs_cal_phase_name((hs_cal_phase)p));
        hs_json_key(&j, "form"); hs_json_string(&j, hs_perf_form_name((hs_perf_form)f));
        hs_json_key(&j, "chosen"); hs_json_bool(&j, f == fs->chosen);
        hs_json_key(&j, "heldout_rel_error"); hs_json_double(&j, fs->r[f].heldout);
        hs_json_key(&j, "r2"); hs_json_double(&j, fs->r[f].r2);
        hs_json_key(&j, "params"); hs_json_object_begin(&j);
        for (int k = 0; k < hs_perf_form_nparams((hs_perf_form)f); k++) {
          hs_json_key(&j, hs_perf_param_key((hs_perf_form)f, k));
          hs_json_double(&j, fs->r[f].model.p[k]);
        }
        hs_json_object_end(&j);
        hs_json_object_end(&j);
      }
    }
    hs_json_array_end(&j);
    hs_json_key(&j, "fit_error"); hs_json_string(&j, mr->fit_error[0] ? mr->fit_error : NULL);
    hs_json_object_end(&j);
  }
  hs_json_array_end(&j);
  hs_json_key(&j, "comm"); hs_json_array_begin(&j);
  for (int i = 0; i < r->n_comm; i++) {
    const hs_cal_comm_result *c = &r->comm[i];
    hs_json_object_begin(&j);
    hs_json_key(&j, "backend"); hs_json_string(&j, c->backend);
    hs_json_key(&j, "op"); hs_json_string(&j, c->op);
    hs_json_key(&j, "world_size"); hs_json_int(&j, c->world_size);
    hs_json_key(&j, "measured"); hs_json_int(&j, c->measured);
    hs_json_key(&j, "skipped"); hs_json_int(&j, c->skipped);
    hs_json_key(&j, "alpha_s"); hs_json_double(&j, c->fitted ? c->alpha_s : NAN);
    hs_json_key(&j, "beta_bytes_per_s"); hs_json_double(&j, c->fitted ? c->beta_bytes_per_s : NAN);
    hs_json_key(&j, "r2"); hs_json_double(&j, c->fitted ? c->r2 : NAN);
    hs_json_object_end(&j);
  }
  hs_json_array_end(&j);
  hs_json_key(&j, "wake");
  if (r->wake_measured || r->wake_skipped) {
    hs_json_object_begin(&j);
    hs_json_key(&j, "measured"); hs_json_int(&j, r->wake_measured);
    hs_json_key(&j, "skipped"); hs_json_int(&j, r->wake_skipped);
    hs_json_key(&j, "median_s"); hs_json_double(&j, r->wake_measured ? r->wake.median_s : NAN);
    hs_json_key(&j, "p10_s"); hs_json_double(&j, r->wake_measured ? r->wake.p10_s : NAN);
    hs_json_key(&j, "p90_s"); hs_json_double(&j, r->wake_measured ? r->wake.p90_s : NAN);
    hs_json_object_end(&j);
  } else {
    hs_json_null(&j);
  }
  hs_json_key(&j, "compress"); hs_json_array_begin(&j);
  for (int i = 0; i < r->n_compress; i++) {
    const hs_cal_compress_result *c = &r->compress[i];
    hs_json_object_begin(&j);
    hs_json_key(&j, "compressor"); hs_json_string(&j, c->compressor);
    hs_json_key(&j, "setting"); hs_json_double(&j, c->setting);
    hs_json_key(&j, "elems"); hs_json_int(&j, c->elems);
    hs_json_key(&j, "measured"); hs_json_int(&j, c->stats.count > 0);
    hs_json_key(&j, "median_s"); hs_json_double(&j, c->stats.count > 0 ? c->stats.median_s : NAN);
    hs_json_key(&j, "model_s"); hs_json_double(&j, c->model_s);
    hs_json_object_end(&j);
  }
  hs_json_array_end(&j);
  hs_json_key(&j, "comm_note"); hs_json_string(&j, r->comm_note[0] ? r->comm_note : NULL);
  hs_json_key(&j, "launch");
  if (l) {
    hs_json_object_begin(&j);
    hs_json_key(&j, "source"); hs_json_string(&j, l->source);
    hs_json_key(&j, "world"); hs_json_int(&j, l->world);
    hs_json_object_end(&j);
  } else {
    hs_json_null(&j);
  }
  hs_json_object_end(&j);
}

static void print_text(const calib_args *a, const hs_cal_device *dev, const hs_cal_result *r) {
  printf("device %lld: %s (%s) on %s\n", (long long)r->device_id, dev->name, dev->spec, dev->host);
  for (int m = 0; m < r->n_models; m++) {
    const hs_cal_model_result *mr = &r->models[m];
    printf("  %s: %d batch sizes timed, %d already stored", mr->model, mr->measured, mr->skipped);
    if (mr->oom_batch) printf(", out of memory at batch %d (max batch %d)", mr->oom_batch, mr->max_batch);
    printf("\n");
    if (mr->fitted[HS_CAL_STEP]) {
      const hs_fit_set *fs = &mr->fits[HS_CAL_STEP];
      for (int f = 0; f < HS_PERF_FORMS; f++) {
        if (!fs->r[f].ok) continue;
        char params[256];
        hs_perf_params_json(&fs->r[f].model, params, sizeof params);
        char err[32] = "n/a";
        if (!isnan(fs->r[f].heldout)) snprintf(err, sizeof err, "%.2f%%", fs->r[f].heldout * 100);
        printf("    step %-10s held-out error %7s  R2 %.4f  %s%s\n", hs_perf_form_name((hs_perf_form)f),
               err, fs->r[f].r2, params, f == fs->chosen ? "  <- chosen" : "");
      }
    }
    if (mr->fit_error[0]) printf("    not fitted: %s\n", mr->fit_error);
  }
  for (int i = 0; i < r->n_comm; i++) {
    const hs_cal_comm_result *c = &r->comm[i];
    if (c->fitted)
      printf("  comm %s %s (world %d): alpha %.3g s, beta %.4g GB/s, R2 %.4f (%d sizes timed, %d stored)\n",
             c->backend, c->op, c->world_size, c->alpha_s, c->beta_bytes_per_s / 1e9, c->r2, c->measured, c->skipped);
    else
      printf("  comm %s %s (world %d): not fitted: %s\n", c->backend, c->op, c->world_size, c->why);
  }
  const char *hand = r->n_comm && !strcmp(r->comm[0].backend, "tcp")
                         ? "tcp hand-off (one message between processes, wake)" : "cpu hand-off (wake)";
  if (r->wake_measured)
    printf("  %s: median %.1f us (p10 %.1f, p90 %.1f)\n", hand, r->wake.median_s * 1e6, r->wake.p10_s * 1e6,
           r->wake.p90_s * 1e6);
  else if (r->wake_skipped)
    printf("  %s: already stored\n", hand);
  if (r->comm_note[0]) printf("  %s\n", r->comm_note);
  for (int i = 0; i < r->n_compress; i++) {
    const hs_cal_compress_result *c = &r->compress[i];
    if (c->stats.count > 0)
      printf("  compress %s %g on %lld floats: median %.3g ms a round trip (p10 %.3g, p90 %.3g; the cost model's "
             "reference device %.3g ms)\n", c->compressor, c->setting, (long long)c->elems, c->stats.median_s * 1e3,
             c->stats.p10_s * 1e3, c->stats.p90_s * 1e3, c->model_s * 1e3);
    else
      printf("  compress %s %g on %lld floats: already stored\n", c->compressor, c->setting, (long long)c->elems);
  }
  printf("  database %s\n", a->db);
}

static int cmd_import(int argc, char **argv);

/* Under a launcher: this process's part of timing the multi-process channel; rank 0 stores the
 * device and the points (real/real_comm_calib.h). */
static int calibrate_ranks(hs_store *store, const hs_cal_device *dev, const hs_real_launch *l,
                           const hs_real_ranks_calib_opts *ro, hs_cal_result *res, hs_diag *d) {
  int rc;
  int state = 0;
  if ((rc = hs_real_comm_calibrate_ranks(store, dev, &res->device_id, ro, res->comm, &res->wake, &state, d))) return rc;
  res->n_comm = 2;
  res->wake_measured = state == 1;
  res->wake_skipped = state == 2;
  snprintf(res->comm_note, sizeof res->comm_note, "the channel of %d processes started by %s (backend tcp), "
           "for runs of one process per worker; the steps are timed without a launcher", l->world, l->source);
  return 0;
}

int hs_cmd_calib(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "import")) return cmd_import(argc - 1, argv + 1);
  calib_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  hs_diag d = {0};
  hs_cal_device dev;
  if ((rc = hs_cal_device_parse(a.device, &dev, &d))) return bad("--device: %s", d.msg);
  /* Under a launcher (mpirun, torchrun), every process times the channel of a run of one
   * process per worker on the cpu together, and only that (real/real_comm_calib.h). */
  hs_real_launch launch;
  if ((rc = hs_real_launch_read(&launch, 0, &d))) return bad("%s", d.msg);
  int launched = strcmp(launch.source, "none") != 0;
  if (launched) {
    if (strcmp(dev.kind, "cpu"))
      return bad("--device %s: under %s, hetsim calib times the channel of one process per worker on the cpu, "
                 "--device cpu (NCCL's is not timed yet)", a.device, launch.source);
    if (launch.world < 2)
      return bad("under %s with one process there is no channel to time: start 2 or more (as many as the run's "
                 "workers), or run hetsim calib without a launcher to time the steps", launch.source);
    if (a.steps_only)
      return bad("--%s: under %s, hetsim calib times only the channel between the processes (their number is the "
                 "world size); time the steps without a launcher", a.steps_only, launch.source);
    if (launch.world > HS_RANK_MAX_WORLD)
      return bad("under %s: world size %d; the multi-process channel takes at most %d processes", launch.source,
                 launch.world, HS_RANK_MAX_WORLD);
  }
  dev.threads = a.threads;
  if (a.name) snprintf(dev.name, sizeof dev.name, "%s", a.name);
  if ((rc = hs_cal_device_discover(&dev, &d))) {
    fprintf(stderr, "hetsim calib: %s\n", d.msg);
    return rc == HS_EUNSUPPORTED || rc == HS_EINVAL ? 2 : 1;
  }
  char note[512];
  if (hs_cal_device_granted_note(&dev, note, sizeof note)) fprintf(stderr, "hetsim calib: %s\n", note);
  if (!a.name && !strcmp(dev.kind, "cpu") && dev.threads > 1) {
    char full[300];
    snprintf(full, sizeof full, "%s (%d threads)", dev.name, dev.threads);
    snprintf(dev.name, sizeof dev.name, "%.255s", full);
  }
  if (!a.name && a.o.concurrent > 1) {
    char full[sizeof dev.name];
    hs_cal_device_shared_name(full, sizeof full, dev.name, a.o.concurrent);
    memcpy(dev.name, full, sizeof full);
  }
  if (a.comm != 0 && strcmp(dev.kind, "cpu") && a.o.comm_world > 64)
    return bad("--comm-world: on a GPU the local backend's all-reduce is timed over at most 64 nets, got %d",
               a.o.comm_world);
  /* Timing the local backend's all-reduce opens --comm-world nets of the partition at once, and
   * green contexts never share an SM: what cannot be granted is refused now, not after the
   * whole compute sweep. */
  if (a.comm != 0 && dev.sm_partition > 0 && dev.sm_grouped > 0 &&
      (long long)a.o.comm_world * dev.sm_partition > dev.sm_grouped)
    return bad("--comm-world %d: timing the all-reduce opens %d nets of %d SMs, %lld SMs together, more than the %d "
               "in this GPU's whole groups; add --no-comm or lower --comm-world",
               a.o.comm_world, a.o.comm_world, dev.sm_partition, (long long)a.o.comm_world * dev.sm_partition,
               dev.sm_grouped);
  /* Open the device once before the database: a device that cannot run says so now. */
  hs_net *probe = NULL;
  hs_net_options no = {.seed = a.o.seed, .threads = dev.threads};
  if ((rc = hs_net_open(&probe, dev.spec, a.models[0], &no, &d))) {
    fprintf(stderr, "hetsim calib: %s\n", d.msg);
    return rc == HS_EUNSUPPORTED || rc == HS_EINVAL ? 2 : 1;
  }
  hs_net_close(probe);

  hs_store *store = NULL; /* rank 0's alone under a launcher */
  if ((!launched || launch.rank == 0) && (rc = hs_store_open(&store, a.db, 0, &d))) {
    fprintf(stderr, "hetsim calib: %s\n", d.msg);
    return hs_exit_code(rc);
  }
  int64_t msgs[MAX_MODELS]; /* each model's gradient (its message), 0 where unknown */
  for (int m = 0; m < a.n_models; m++) {
    hs_model_stats ms;
    hs_diag md = {0};
    msgs[m] = hs_zoo_stats(a.models[m], &ms, &md) ? 0 : ms.grad_bytes;
  }
  hs_real_ranks_calib_opts ro = {.msg_bytes = msgs, .n_msgs = a.n_models, .max_bytes = a.o.comm_max_bytes,
                                 .timeout_s = a.time_limit > 0 && a.time_limit < 60 ? a.time_limit : 60,
                                 .redo = a.redo,
                                 .timing = {.rule = a.o.rule, .warmup = a.o.warmup, .stop = &calib_interrupted,
                                            .no_pin = a.o.no_pin}};
  a.o.models = a.models;
  a.o.n_models = a.n_models;
  a.o.batches = a.batches;
  a.o.n_batches = a.n_batches;
  a.o.comm = a.comm < 0 ? 1 : a.comm;
  a.o.redo = a.redo;
  a.o.stop = &calib_interrupted;
  hs_progress prog;
  char label[128];
  if (launched) snprintf(label, sizeof label, "calib tcp (%s, %d processes)", launch.source, launch.world);
  else snprintf(label, sizeof label, "calib %s", dev.spec);
  /* On the cpu, with communication (not --no-comm) and not as N workers at once, the
   * compressors too (a GPU's runs compress on the host: validate takes the host's cpu's). */
  int64_t elems[MAX_MODELS];
  int n_elems = 0;
  for (int m = 0; m < a.n_models; m++)
    if (msgs[m] >= 4) elems[n_elems++] = msgs[m] / 4;
  int compress_too = !launched && !strcmp(dev.kind, "cpu") && a.o.comm && a.o.concurrent <= 1 && n_elems > 0;
  hs_progress_init(&prog, stderr, label,
                   launched ? (double)hs_real_ranks_calib_points(&ro)
                            : (double)hs_cal_points(&a.o, &dev) + (compress_too ? hs_cal_compress_points(elems, n_elems) : 0));
  a.o.progress = &prog;
  if (launched && launch.rank == 0) ro.progress = &prog;

  struct sigaction old_sa, old_term;
  calib_interrupted = 0;
  hs_cli_catch_signal(SIGINT, on_sigint, &old_sa);
  hs_cli_catch_signal(SIGTERM, on_sigint, &old_term);
  /* A kernel that never ends fails the calibration within its time limit (the nets' waits stop
   * at it; the limit's flag is read only between steps), not past the caller's own timeout. */
  if (a.time_limit > 0 && a.time_limit < HS_NET_WAIT_DEFAULT_S) a.o.wait_s = a.time_limit;
  time_limit limit;
  hs_cal_result res;
  memset(&res, 0, sizeof res);
  if ((rc = time_limit_start(&limit, a.time_limit)))
    rc = hs_diag_set(&d, HS_ERUNTIME, "--time-limit: cannot start its thread: %s", strerror(rc));
  else if (launched)
    rc = calibrate_ranks(store, &dev, &launch, &ro, &res, &d);
  else
    rc = hs_cal_run(store, &dev, &a.o, &res, &d);
  if (!rc && !launched && a.o.comm && strcmp(dev.kind, "cpu")) {
    /* On a GPU, the local backend's all-reduce and send/recv, timed through the backend on the
     * gradients of --comm-world nets of the model with the largest gradient among --model, so
     * that the sizes reach every calibrated model's message (real/real_comm_calib.h): what
     * `hetsim validate` reads for a run with --backend local. */
    int b = 0;
    for (int m = 1; m < a.n_models; m++)
      if (msgs[m] > msgs[b]) b = m;
    const char *big = a.models[b];
    hs_real_comm_calib_opts co = {.backend = "local", .device = dev.spec, .model = big,
                                  .world = a.o.comm_world, .max_bytes = a.o.comm_max_bytes,
                                  /* unpinned, as a real run on a GPU device is (hs_real_pins) */
                                  .timing = {.rule = a.o.rule, .warmup = a.o.warmup, .stop = &calib_interrupted,
                                             .no_pin = 1}};
    if (!(rc = hs_real_comm_calibrate(store, res.device_id, &co, res.comm, &d))) {
      res.n_comm = 2;
      snprintf(res.comm_note, sizeof res.comm_note, "the local backend's communication, timed through it on %s's "
               "gradients; NCCL's is not timed yet", big);
    }
  }
  /* The compressors' round trips on this host, on each model's gradient (calib/cal_compress.h):
   * the real runtimes compress on the host whatever the device, one worker at a time. */
  if (!rc && compress_too) {
    hs_cal_comm_opts co = {.rule = a.o.rule, .warmup = a.o.warmup, .stop = &calib_interrupted, .no_pin = 1};
    double done = hs_cal_points(&a.o, &dev);
    rc = hs_cal_compress(store, res.device_id, elems, n_elems, a.redo, &co, &prog, &done, res.compress, &res.n_compress,
                         &d);
  }
  time_limit_stop(&limit);
  sigaction(SIGINT, &old_sa, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  hs_progress_finish(&prog);

  int status = 0;
  if (rc && launched && launch.rank != 0) {
    /* Rank 0 reports the calibration; another rank says only what stopped it. */
    fprintf(stderr, "hetsim calib: rank %d: %s\n", launch.rank, d.msg);
    status = 1;
  } else if (launched && launch.rank != 0) {
    status = 0;
  } else if (rc == HS_EINTR && calib_interrupted == 2) {
    fprintf(stderr, "hetsim calib: stopped at --time-limit %g s; the points stored so far are kept, rerun the same "
            "command to resume\n", a.time_limit);
    status = 1;
  } else if (rc) {
    fprintf(stderr, "hetsim calib: %s%s\n", d.msg,
            rc == HS_EINTR || hs_exit_code(rc) == 2 ? "" : "; the points stored so far are kept, rerun to resume");
    status = rc == HS_ELIMIT ? 1 : hs_exit_code(rc) == 2 ? 2 : 1;
  } else {
    if (a.json) print_json(&a, &dev, &res, launched ? &launch : NULL, "complete");
    else print_text(&a, &dev, &res);
    for (int m = 0; m < res.n_models; m++)
      if (!res.models[m].fitted[HS_CAL_STEP]) {
        fprintf(stderr, "hetsim calib: %s: no step model could be fitted: %s\n", res.models[m].model, res.models[m].fit_error);
        status = 1;
      }
  }
  hs_cal_result_free(&res);
  hs_store_close(store);
  return status;
}

/* ---- hetsim calib import ---- */

#define bad_import(...) hs_cli_usage("calib import", 1, __VA_ARGS__)

static void import_usage(FILE *out) {
  fprintf(out,
"usage: hetsim calib import FILE... [--db FILE] [--as NAME] [--json]\n"
"\n"
"Reads profiles (JSON, format docs/profile.md: written by tools/hetsim_profile.py for any\n"
"PyTorch model, or converted from published measurements) into the calibration tables and\n"
"fits them as `hetsim calib` fits its own timings: the device (named as in the profile, or\n"
"\"NAME (N workers)\" when N processes stepped at once), the model (a model outside the zoo\n"
"with its parameters, gradient bytes and FLOPs, so that `hetsim sim --model NAME` accepts\n"
"it), the step times per batch size and phase, the communication times, the fits t(b) and\n"
"alpha + n/beta. Afterwards a cluster file's `compute: {calib: NAME}` uses them.\n"
"\n"
"Every file is checked before the database is opened; the files are stored in one\n"
"transaction, so that a bad one (its JSON path is named) leaves nothing of any of them.\n"
"Importing a profile again (the same content under the same device name) changes nothing.\n"
"\n"
"  --db FILE   database (default %s)\n"
"  --as NAME   store the device under NAME instead of the profile's device.name\n"
"  --json      print the result as one JSON object on stdout\n"
"\n"
"exit status: 0 imported (or already there), 1 database failure, 2 bad usage, a file that\n"
"cannot be read or a bad profile (nothing stored).\n",
          HS_DEFAULT_DB);
}

static void import_json_one(hs_json *j, const char *file, const hs_cal_import_info *in) {
  hs_json_object_begin(j);
  hs_json_key(j, "file"); hs_json_string(j, file);
  hs_json_key(j, "status"); hs_json_string(j, in->unchanged ? "unchanged" : "imported");
  hs_json_key(j, "device"); hs_json_string(j, in->device);
  hs_json_key(j, "device_id"); hs_json_int(j, in->device_id);
  hs_json_key(j, "model"); hs_json_string(j, in->model);
  hs_json_key(j, "model_in_zoo"); hs_json_bool(j, in->model_in_zoo);
  hs_json_key(j, "model_added"); hs_json_bool(j, in->model_added);
  hs_json_key(j, "hash"); hs_json_string(j, in->hash);
  hs_json_key(j, "samples"); hs_json_int(j, in->samples);
  hs_json_key(j, "derived_steps"); hs_json_int(j, in->derived_steps);
  hs_json_key(j, "batches"); hs_json_int(j, in->batches);
  hs_json_key(j, "comm_samples"); hs_json_int(j, in->comm_samples);
  hs_json_key(j, "oom_batch"); if (in->oom_batch) hs_json_int(j, in->oom_batch); else hs_json_null(j);
  hs_json_key(j, "max_batch"); if (in->max_batch) hs_json_int(j, in->max_batch); else hs_json_null(j);
  hs_json_key(j, "fits"); hs_json_array_begin(j);
  for (int p = 0; p < HS_CAL_PHASES; p++) {
    if (!in->fitted[p]) continue;
    const hs_fit_set *fs = &in->fits_by_phase[p];
    for (int f = 0; f < HS_PERF_FORMS; f++) {
      if (!fs->r[f].ok) continue;
      hs_json_object_begin(j);
      hs_json_key(j, "phase"); hs_json_string(j, hs_cal_phase_name((hs_cal_phase)p));
      hs_json_key(j, "form"); hs_json_string(j, hs_perf_form_name((hs_perf_form)f));
      hs_json_key(j, "chosen"); hs_json_bool(j, f == fs->chosen);
      hs_json_key(j, "heldout_rel_error"); hs_json_double(j, fs->r[f].heldout);
      hs_json_key(j, "r2"); hs_json_double(j, fs->r[f].r2);
      hs_json_key(j, "params"); hs_json_object_begin(j);
      for (int k = 0; k < hs_perf_form_nparams((hs_perf_form)f); k++) {
        hs_json_key(j, hs_perf_param_key((hs_perf_form)f, k));
        hs_json_double(j, fs->r[f].model.p[k]);
      }
      hs_json_object_end(j);
      hs_json_object_end(j);
    }
  }
  hs_json_array_end(j);
  hs_json_key(j, "fit_notes"); hs_json_string(j, in->fit_notes[0] ? in->fit_notes : NULL);
  hs_json_key(j, "comm"); hs_json_array_begin(j);
  for (int i = 0; i < in->n_comm; i++) {
    const hs_cal_import_comm *c = &in->comm[i];
    hs_json_object_begin(j);
    hs_json_key(j, "backend"); hs_json_string(j, c->backend);
    hs_json_key(j, "op"); hs_json_string(j, c->op);
    hs_json_key(j, "world_size"); hs_json_int(j, c->world_size);
    hs_json_key(j, "sizes"); hs_json_int(j, c->sizes);
    hs_json_key(j, "alpha_s"); hs_json_double(j, c->fitted ? c->alpha_s : NAN);
    hs_json_key(j, "beta_bytes_per_s"); hs_json_double(j, c->fitted ? c->beta_bytes_per_s : NAN);
    hs_json_key(j, "r2"); hs_json_double(j, c->fitted ? c->r2 : NAN);
    hs_json_key(j, "why"); hs_json_string(j, c->fitted ? NULL : c->why);
    hs_json_key(j, "mean_s"); hs_json_double(j, c->mean_s); /* allreduce_step only; null otherwise */
    hs_json_key(j, "bytes"); /* allreduce_step only: the size its mean was measured at */
    if (c->bytes > 0) hs_json_int(j, c->bytes);
    else hs_json_null(j);
    hs_json_object_end(j);
  }
  hs_json_array_end(j);
  hs_json_object_end(j);
}

static void import_text_one(const char *file, const hs_cal_import_info *in) {
  if (in->unchanged) {
    printf("%s: already imported (device %lld \"%s\", model %s, profile %s); nothing changed\n", file,
           (long long)in->device_id, in->device, in->model, in->hash);
    return;
  }
  printf("%s: device %lld \"%s\", model %s (%s%s): %d samples at %d batch sizes", file, (long long)in->device_id,
         in->device, in->model, in->model_in_zoo ? "zoo" : "imported", in->model_added ? ", added" : "", in->samples,
         in->batches);
  if (in->derived_steps) printf(" (%d step times summed from the phases)", in->derived_steps);
  if (in->comm_samples) printf(", %d communication samples", in->comm_samples);
  if (in->oom_batch) printf(", out of memory at batch %d (max batch %d)", in->oom_batch, in->max_batch);
  printf("\n");
  const hs_fit_set *fs = &in->fits_by_phase[HS_CAL_STEP];
  for (int f = 0; f < HS_PERF_FORMS && in->fitted[HS_CAL_STEP]; f++) {
    if (!fs->r[f].ok) continue;
    char params[256], err[32] = "n/a";
    hs_perf_params_json(&fs->r[f].model, params, sizeof params);
    if (!isnan(fs->r[f].heldout)) snprintf(err, sizeof err, "%.2f%%", fs->r[f].heldout * 100);
    printf("  step %-10s held-out error %7s  R2 %.4f  %s%s\n", hs_perf_form_name((hs_perf_form)f), err, fs->r[f].r2, params,
           f == fs->chosen ? "  <- chosen" : "");
  }
  for (int p = 0; p < HS_CAL_PHASES; p++)
    if (p != HS_CAL_STEP && in->fitted[p])
      printf("  %s: %s fitted\n", hs_cal_phase_name((hs_cal_phase)p),
             hs_perf_form_name((hs_perf_form)in->fits_by_phase[p].chosen));
  if (in->fit_notes[0]) printf("  not fitted: %s\n", in->fit_notes);
  for (int i = 0; i < in->n_comm; i++) {
    const hs_cal_import_comm *c = &in->comm[i];
    if (c->fitted)
      printf("  comm %s %s (world %d): alpha %.3g s, beta %.4g GB/s, R2 %.4f (%d sizes)\n", c->backend, c->op, c->world_size,
             c->alpha_s, c->beta_bytes_per_s / 1e9, c->r2, c->sizes);
    else
      printf("  comm %s %s (world %d): not fitted: %s\n", c->backend, c->op, c->world_size, c->why);
  }
}

static int cmd_import(int argc, char **argv) {
  static const struct option opts[] = {
      {"db", required_argument, NULL, 'd'}, {"as", required_argument, NULL, 'a'},
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
  };
  const char *db = HS_DEFAULT_DB;
  hs_cal_import_opts io = {0};
  int json = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'd': db = optarg; break;
    case 'a':
      if (!*optarg || strlen(optarg) > HS_CAL_IMPORT_NAME_MAX)
        return bad_import("--as: expected a device name of 1 to %d characters", HS_CAL_IMPORT_NAME_MAX);
      io.device_name = optarg;
      break;
    case 'j': json = 1; break;
    case 'h': import_usage(stdout); return 0;
    default: return bad_import("unknown or incomplete option \"%s\"", argv[optind - 1]);
    }
  }
  int n = argc - optind;
  if (n < 1) return bad_import("%s", "no profile given: hetsim calib import FILE...");
  char **files = argv + optind;
  char **text = calloc((size_t)n, sizeof *text);
  size_t *len = calloc((size_t)n, sizeof *len);
  hs_cal_import_info *info = calloc((size_t)n, sizeof *info);
  int status = 1, rc = 0, nested = 0;
  hs_diag d = {0};
  hs_store *store = NULL;
  if (!text || !len || !info) {
    fprintf(stderr, "hetsim calib import: out of memory\n");
    goto out;
  }
  /* Every file read and checked before the database is opened. */
  for (int i = 0; i < n; i++) {
    if ((rc = hs_cal_import_read(files[i], &text[i], &len[i], &d)) ||
        (rc = hs_cal_import_check(files[i], text[i], len[i], &io, &info[i], &d))) {
      fprintf(stderr, "hetsim calib import: %s\n", d.msg);
      fprintf(stderr, "hetsim calib import: nothing was stored\n");
      status = rc == HS_ENOMEM ? 1 : 2;
      goto out;
    }
  }
  if ((rc = hs_cli_store_open("calib import", &store, db, 0))) {
    status = rc;
    goto out;
  }
  if ((rc = hs_cal_tx_begin(store, &nested, &d))) {
    fprintf(stderr, "hetsim calib import: %s\n", d.msg);
    goto out;
  }
  for (int i = 0; i < n && !rc; i++) rc = hs_cal_import_text_opts(store, files[i], text[i], len[i], &io, &info[i], &d);
  if (rc) {
    hs_cal_tx_rollback(store, nested);
    fprintf(stderr, "hetsim calib import: %s\n", d.msg);
    fprintf(stderr, "hetsim calib import: nothing was stored\n");
    status = hs_exit_code(rc) == 2 ? 2 : 1;
    goto out;
  }
  if ((rc = hs_cal_tx_commit(store, nested, &d))) {
    fprintf(stderr, "hetsim calib import: %s; nothing was stored\n", d.msg);
    goto out;
  }
  status = 0;
  if (json) {
    hs_json j;
    hs_json_init(&j, stdout, 1);
    hs_json_object_begin(&j);
    hs_json_key(&j, "status"); hs_json_string(&j, "complete");
    hs_json_key(&j, "db"); hs_json_string(&j, db);
    hs_json_key(&j, "imports"); hs_json_array_begin(&j);
    for (int i = 0; i < n; i++) import_json_one(&j, files[i], &info[i]);
    hs_json_array_end(&j);
    hs_json_object_end(&j);
  } else {
    for (int i = 0; i < n; i++) import_text_one(files[i], &info[i]);
    printf("  database %s\n", db);
  }
out:
  for (int i = 0; text && i < n; i++) free(text[i]);
  free(text);
  free(len);
  free(info);
  hs_store_close(store);
  return status;
}
