/* hetsim sim: simulate a training run and store it.
 *
 * Every input is checked before the database is opened, and the run's row is only written once
 * the simulation has really started (at its first finished step), so that rejected input
 * leaves nothing in the database. A run that fails later, or is interrupted, is marked so. */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calib/cal_import.h"
#include "calib/cal_store.h"
#include "cli/cli.h"
#include "cli/report_file.h"
#include "core/core_buildinfo.h"
#include "core/core_config.h"
#include "core/core_json.h"
#include "core/core_runopts.h"
#include "core/core_progress.h"
#include "core/core_perfmodel.h"
#include "core/core_store.h"
#include "core/core_units.h"
#include "nn/nn_zoo.h"
#include "policies/pol_registry.h"
#include "sim/sim_conv.h"
#include "sim/sim_conv_fit.h"
#include "sim/sim_run.h"
#include "sim/sim_trace.h"

/* The one piece of process-wide state: a signal handler can reach nothing else. */
static volatile sig_atomic_t sim_interrupted;
static void on_sigint(int sig) { sim_interrupted = 1; }

/* The bounds of every run (docs/cli.md): a run with only a target, an epoch count or a
 * simulated time can otherwise run for ever (a target the model never reaches) or fill the
 * disk with step rows. */
#define SIM_DEFAULT_MAX_ITERATIONS 1000000LL
#define SIM_DEFAULT_MAX_STEP_ROWS 50000000LL

static void usage(FILE *out) {
  fprintf(out,
"usage: hetsim sim --cluster FILE --model NAME --policy NAME[:key=value,...]\n"
"                  --global-batch B (--iterations N | --epochs E | --sim-time T |\n"
"                  --target-loss L | --target-accuracy A)\n"
"                  [--events FILE.csv] [--seed S] [--db FILE] [--store summary|steps]\n"
"                  [--trace-out FILE.json] [--json] [--max-events N]\n"
"                  [--max-iterations N] [--max-step-rows N]\n"
"                  [--convergence none|analytic|proxy[:key=value,...]]\n"
"                  [--convergence-params FILE] [--calib DB]\n"
"\n"
"Simulates data-parallel training of MODEL on the cluster described by FILE (YAML, see\n"
"docs/cli.md and traces/) under a policy (`hetsim policies` lists them), and stores the\n"
"run in the results database.\n"
"\n"
"  --cluster FILE        cluster file (YAML)\n"
"  --events FILE.csv     extra dynamic events (slowdown, comm_slowdown, join, leave)\n"
"  --model NAME          model from `hetsim models`; sets the bytes each gradient moves\n"
"  --policy SPEC         policy and parameters, e.g. ssp:s=2 or ssgd:overlap=1,bucket=25MiB\n"
"  --global-batch B      samples per global iteration, split evenly unless the policy says\n"
"  --iterations N        stop after N updates of the global model\n"
"  --epochs E            stop once E epochs of the model's data set have been computed\n"
"  --sim-time T          stop at simulated time T (e.g. 600s, 2h)\n"
"  --seed S              seed of the per-worker random streams (default 1)\n"
"  --db FILE             results database (default %s)\n"
"  --store steps|summary steps (default) stores a row per worker step; summary stores\n"
"                        only the run, its workers and its summary, for huge runs\n"
"  --trace-out FILE      write a Chrome trace (open it in Perfetto): a track per worker\n"
"  --json                print the summary as one JSON object on stdout\n"
"  --max-events N        limit on pending events (default 134217728)\n"
"  --max-iterations N    the bound of a run without --iterations (default %lld; 0 = none):\n"
"                        a run that reaches it before its stop condition fails, saying so\n"
"  --max-step-rows N     with --store steps, fail a run once it has stored N step rows\n"
"                        (default %lld; 0 = none); --store summary stores none\n"
"  --convergence MODEL   none (default): no loss or accuracy; analytic: loss from the\n"
"                        progress in effective samples; proxy: really train mlp or cnn on\n"
"                        Fashion-MNIST with each worker's schedule (docs/convergence.md);\n"
"                        parameters as analytic:phi=2000,beta0=3 or proxy:lr=0.05\n"
"  --convergence-params FILE  parameters as key=value lines, as `hetsim fit-convergence`\n"
"                        writes them; keys given in --convergence win. Without it,\n"
"                        analytic takes the newest fit of the model to its own curves\n"
"                        (`hetsim fit-convergence --curves`) from --calib, else --db\n"
"  --target-loss L       end at the first evaluation with loss <= L\n"
"  --target-accuracy A   end at the first evaluation with accuracy >= A (0..1 or 0%%..100%%)\n"
"                        (with both, the first evaluation that meets both)\n"
"  --calib DB            database holding the calibrated models that `compute: {calib: NAME}`\n"
"                        device types name (default: the --db database; see `hetsim devices`)\n"
"\n"
"A target that the convergence model cannot reach (a loss at or below the analytic model's\n"
"beta2, an accuracy above its acc_max) is refused before the run.\n"
"\n"
"exit status: 0 run complete, 1 run failed or interrupted, 2 bad usage or bad input.\n",
          HS_DEFAULT_DB, (long long)SIM_DEFAULT_MAX_ITERATIONS, (long long)SIM_DEFAULT_MAX_STEP_ROWS);
}

/* Where a `{calib: NAME}` link's numbers came from, for the run's summary. */
typedef struct sim_link_note {
  char field[32];    /* "network" or "nodes[I].link" */
  const char *calib; /* NAME, in the cluster spec */
  char how[256];     /* hs_comm_link_load's account of the measurement taken */
  hs_link_spec link;
} sim_link_note;

typedef struct sim_args {
  const char *cluster, *events, *model, *policy, *db, *trace_out;
  int64_t global_batch, iterations;
  int64_t max_iterations, max_step_rows; /* 0 = none */
  double epochs, sim_time;
  uint64_t seed;
  int store_steps, json;
  size_t max_events;
  const char *conv, *conv_file;   /* conv NULL = none */
  const char *calib;              /* calibration database; NULL = the --db one */
  double target_loss, target_acc; /* 0 = none */
  const char *conv_source;        /* where the convergence parameters come from; NULL = none */
  const sim_link_note *links;     /* the cluster's `{calib: NAME}` links, n_links of them */
  int n_links;
  const char *jitter_calib;       /* `jitter: {calib: NAME}`'s NAME, or NULL */
  double jitter_cv;               /* the cv it gave */
} sim_args;

#define bad(...) hs_cli_usage("sim", 1, __VA_ARGS__)


enum { O_CLUSTER = 256, O_EVENTS, O_MODEL, O_POLICY, O_GB, O_ITERS, O_EPOCHS, O_SIMTIME,
       O_TLOSS, O_TACC, O_CONV, O_CALIB, O_SEED, O_DB, O_STORE, O_TRACE, O_JSON, O_MAXEV, O_HELP,
       O_CONVP, O_MAXIT, O_MAXROWS };

static int parse_args(int argc, char **argv, sim_args *a) {
  static const struct option opts[] = {
      {"cluster", required_argument, NULL, O_CLUSTER}, {"events", required_argument, NULL, O_EVENTS},
      {"model", required_argument, NULL, O_MODEL}, {"policy", required_argument, NULL, O_POLICY},
      {"global-batch", required_argument, NULL, O_GB}, {"iterations", required_argument, NULL, O_ITERS},
      {"epochs", required_argument, NULL, O_EPOCHS}, {"sim-time", required_argument, NULL, O_SIMTIME},
      {"target-loss", required_argument, NULL, O_TLOSS}, {"target-accuracy", required_argument, NULL, O_TACC},
      {"convergence", required_argument, NULL, O_CONV}, {"calib", required_argument, NULL, O_CALIB},
      {"seed", required_argument, NULL, O_SEED}, {"db", required_argument, NULL, O_DB},
      {"store", required_argument, NULL, O_STORE}, {"trace-out", required_argument, NULL, O_TRACE},
      {"json", no_argument, NULL, O_JSON}, {"max-events", required_argument, NULL, O_MAXEV},
      {"convergence-params", required_argument, NULL, O_CONVP},
      {"max-iterations", required_argument, NULL, O_MAXIT},
      {"max-step-rows", required_argument, NULL, O_MAXROWS},
      {"help", no_argument, NULL, O_HELP}, {NULL, 0, NULL, 0},
  };
  memset(a, 0, sizeof *a);
  a->db = HS_DEFAULT_DB;
  a->seed = 1;
  a->store_steps = 1;
  a->max_iterations = SIM_DEFAULT_MAX_ITERATIONS;
  a->max_step_rows = SIM_DEFAULT_MAX_STEP_ROWS;
  optind = 1;
  opterr = 0;
  int c;
  int64_t v;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_CLUSTER: a->cluster = optarg; break;
    case O_EVENTS: a->events = optarg; break;
    case O_MODEL: a->model = optarg; break;
    case O_POLICY:
      if (a->policy) return bad("--policy given twice (\"%s\" and \"%s\"); give one", a->policy, optarg);
      a->policy = optarg;
      break;
    case O_GB:
      if (hs_cli_parse_int64(optarg, 1, &a->global_batch) || a->global_batch > HS_CLI_MAX_GLOBAL_BATCH)
        return bad("--global-batch: expected an integer from 1 to %lld, got \"%s\"", HS_CLI_MAX_GLOBAL_BATCH, optarg);
      break;
    case O_MAXIT:
      if (hs_cli_parse_int64(optarg, 0, &a->max_iterations)) return bad("--max-iterations: expected a non-negative integer, got \"%s\"", optarg);
      break;
    case O_MAXROWS:
      if (hs_cli_parse_int64(optarg, 0, &a->max_step_rows)) return bad("--max-step-rows: expected a non-negative integer, got \"%s\"", optarg);
      break;
    case O_ITERS:
      if (hs_cli_parse_int64(optarg, 1, &a->iterations)) return bad("--iterations: expected a positive integer, got \"%s\"", optarg);
      break;
    case O_EPOCHS:
      if (hs_units_parse_number(optarg, &a->epochs) || a->epochs <= 0)
        return bad("--epochs: expected a positive number, got \"%s\"", optarg);
      break;
    case O_SIMTIME:
      if (hs_units_parse_time(optarg, &a->sim_time) || a->sim_time <= 0)
        return bad("--sim-time: expected a positive time like \"600s\", got \"%s\"", optarg);
      break;
    case O_TLOSS:
      if (hs_units_parse_number(optarg, &a->target_loss) || !(a->target_loss > 0))
        return bad("--target-loss: expected a positive number, got \"%s\"", optarg);
      break;
    case O_TACC: {
      if (hs_cli_parse_accuracy(optarg, &a->target_acc))
        return bad("--target-accuracy: expected a fraction in (0, 1] or a percentage like 85%%, got \"%s\"", optarg);
      break;
    }
    case O_CONV:
      a->conv = strcmp(optarg, "none") ? optarg : NULL;
      break;
    case O_CONVP: a->conv_file = optarg; break;
    case O_CALIB: a->calib = optarg; break;
    case O_SEED:
      if (hs_cli_parse_uint64(optarg, &a->seed)) return bad("--seed: expected an integer from 0 to 18446744073709551615, got \"%s\"", optarg);
      break;
    case O_DB:
      if (!*optarg) return bad("%s", "--db: expected a file name, got an empty one");
      a->db = optarg;
      break;
    case O_STORE:
      if (!strcmp(optarg, "steps")) a->store_steps = 1;
      else if (!strcmp(optarg, "summary")) a->store_steps = 0;
      else return bad("--store: expected steps or summary, got \"%s\"", optarg);
      break;
    case O_TRACE: a->trace_out = optarg; break;
    case O_JSON: a->json = 1; break;
    case O_MAXEV:
      if (hs_cli_parse_int64(optarg, 1, &v)) return bad("--max-events: expected a positive integer, got \"%s\"", optarg);
      a->max_events = (size_t)v;
      break;
    case O_HELP:
    case 'h': usage(stdout); return -1;
    default:
      return bad("unknown or incomplete option \"%s\"", argv[optind - 1]);
    }
  }
  if (optind < argc) return bad("unexpected argument \"%s\"", argv[optind]);
  if (!a->cluster) return bad("%s", "--cluster FILE is required");
  if (!a->model) return bad("%s", "--model NAME is required (see `hetsim models`)");
  if (!a->policy) return bad("%s", "--policy NAME is required (see `hetsim policies`)");
  if (!a->global_batch) return bad("%s", "--global-batch B is required");
  if ((a->target_loss > 0 || a->target_acc > 0) && !a->conv)
    return bad("%s", "--target-loss and --target-accuracy need a convergence model: add --convergence analytic or proxy");
  if (a->conv_file && !a->conv)
    return bad("%s", "--convergence-params needs --convergence analytic or proxy");
  if (!a->iterations && !a->epochs && !a->sim_time && !(a->target_loss > 0) && !(a->target_acc > 0))
    return bad("%s", "a stop condition is required: --iterations N, --epochs E, --sim-time T, "
               "--target-loss L or --target-accuracy A");
  if (a->trace_out && hs_outfile_is_db(a->trace_out, a->db))
    return bad("--trace-out: \"%s\" is the results database (--db %s); give another file", a->trace_out, a->db);
  return 0;
}

/* Why a run that ended without an error stopped: "target", "iterations", "epochs", "sim_time"
 * (the stop conditions given), "max_iterations" (the bound of a run without --iterations),
 * "interrupted" or "stalled". */
static const char *stop_reason(const sim_args *a, int64_t dataset_size, const hs_sim_result *res) {
  const hs_summary *m = &res->summary;
  if (res->status == HS_SIM_INTERRUPTED) return "interrupted";
  if (res->status == HS_SIM_STALLED) return "stalled";
  if ((a->target_loss > 0 || a->target_acc > 0) && !isnan(m->time_to_target_s)) return "target";
  if (a->iterations && m->iterations >= a->iterations) return "iterations";
  if (a->epochs > 0 && (double)m->samples >= a->epochs * (double)dataset_size) return "epochs";
  if (a->sim_time > 0 && m->sim_time_s >= a->sim_time) return "sim_time";
  if (!a->iterations && a->max_iterations && m->iterations >= a->max_iterations) return "max_iterations";
  return "iterations";
}

/* The error of a run stopped by --max-iterations: the bound and what was not met. */
static void bound_msg_of(const sim_args *a, const hs_summary *m, char *buf, size_t len) {
  size_t o = (size_t)snprintf(buf, len, "stopped at the bound of %lld iterations (--max-iterations; "
                              "raise it, or give --iterations) before", (long long)a->max_iterations);
  char acc[48] = "";
  if (!isnan(m->final_accuracy)) snprintf(acc, sizeof acc, ", accuracy %.4g", m->final_accuracy);
  if (a->target_loss > 0 || a->target_acc > 0)
    snprintf(buf + o, o < len ? len - o : 0, " reaching the target (last evaluation: loss %.6g%s)",
             m->final_loss, acc);
  else if (a->epochs > 0)
    snprintf(buf + o, o < len ? len - o : 0, " --epochs %g", a->epochs);
  else
    snprintf(buf + o, o < len ? len - o : 0, " --sim-time %g s (at %.6g s)", a->sim_time, m->sim_time_s);
}

/* "--iterations 100", "the target", ... for the text summary's stop line. */
static void stop_text(const sim_args *a, const char *stop, char *buf, size_t len) {
  if (!strcmp(stop, "iterations")) snprintf(buf, len, "--iterations %lld", (long long)a->iterations);
  else if (!strcmp(stop, "epochs")) snprintf(buf, len, "--epochs %g", a->epochs);
  else if (!strcmp(stop, "sim_time")) snprintf(buf, len, "--sim-time %g s", a->sim_time);
  else if (!strcmp(stop, "max_iterations"))
    snprintf(buf, len, "the bound --max-iterations %lld", (long long)a->max_iterations);
  else if (!strcmp(stop, "target")) snprintf(buf, len, "the target");
  else if (!strcmp(stop, "stalled")) snprintf(buf, len, "no events left");
  else snprintf(buf, len, "%s", stop);
}

static void print_summary(const sim_args *a, int64_t run_id, const char *status, const char *stop,
                          const hs_cluster_spec *spec, const hs_summary *m) {
  int target = a->target_loss > 0 || a->target_acc > 0;
  if (a->json) {
    hs_json j;
    hs_json_init(&j, stdout, 1);
    hs_json_object_begin(&j);
    hs_json_key(&j, "run_id"); hs_json_int(&j, run_id);
    hs_json_key(&j, "status"); hs_json_string(&j, status);
    hs_json_key(&j, "policy"); hs_json_string(&j, a->policy);
    hs_json_key(&j, "cluster"); hs_json_string(&j, spec->name);
    hs_json_key(&j, "model"); hs_json_string(&j, a->model);
    hs_json_key(&j, "global_batch"); hs_json_int(&j, a->global_batch);
    hs_json_key(&j, "seed"); hs_json_uint(&j, a->seed);
    hs_cli_json_summary(&j, m, a->conv != NULL);
    hs_json_key(&j, "stop_reason"); hs_json_string(&j, stop);
    if (target) {
      hs_json_key(&j, "target_reached");
      hs_json_bool(&j, !isnan(m->time_to_target_s));
    }
    if (a->conv_source) { hs_json_key(&j, "convergence_source"); hs_json_string(&j, a->conv_source); }
    if (a->n_links) {
      hs_json_key(&j, "calib_links");
      hs_json_array_begin(&j);
      for (int i = 0; i < a->n_links; i++) {
        const sim_link_note *n = &a->links[i];
        hs_json_object_begin(&j);
        hs_json_key(&j, "field"); hs_json_string(&j, n->field);
        hs_json_key(&j, "calib"); hs_json_string(&j, n->calib);
        hs_json_key(&j, "measurement"); hs_json_string(&j, n->how);
        hs_json_key(&j, "latency_s"); hs_json_double(&j, n->link.latency);
        hs_json_key(&j, "bandwidth_bytes_per_s"); hs_json_double(&j, n->link.bandwidth);
        hs_json_object_end(&j);
      }
      hs_json_array_end(&j);
    }
    if (a->jitter_calib) {
      hs_json_key(&j, "calib_jitter");
      hs_json_object_begin(&j);
      hs_json_key(&j, "calib"); hs_json_string(&j, a->jitter_calib);
      hs_json_key(&j, "cv"); hs_json_double(&j, a->jitter_cv);
      hs_json_object_end(&j);
    }
    hs_json_key(&j, "db"); hs_json_string(&j, a->db);
    hs_json_object_end(&j);
    return;
  }
  printf("run %lld (%s): %s on %s (%lld workers), %s, global batch %lld\n", (long long)run_id,
         status, a->policy, spec->name, (long long)m->workers, a->model, (long long)a->global_batch);
  printf("  iterations       %lld\n", (long long)m->iterations);
  printf("  simulated time   %.6g s (%.6g ms per iteration)\n", m->sim_time_s, m->mean_iteration_s * 1e3);
  printf("  throughput       %.6g samples/s\n", m->samples_per_s);
  printf("  wait fraction    %.4f\n", m->wait_fraction);
  printf("  events           %lld in %.3f s of wall time\n", (long long)m->events, m->wall_s);
  if (a->conv) hs_cli_print_convergence(m, target);
  if (a->conv_source) printf("  convergence      %s\n", a->conv_source);
  for (int i = 0; i < a->n_links; i++) {
    const sim_link_note *n = &a->links[i];
    printf("  %-16s %s: %s (latency %.4g s, bandwidth %.4g B/s)\n", n->field, n->calib, n->how,
           n->link.latency, n->link.bandwidth);
  }
  if (a->jitter_calib)
    printf("  jitter           %s: cv %.4g (the spread of its measured steps)\n", a->jitter_calib, a->jitter_cv);
  char why[128];
  stop_text(a, stop, why, sizeof why);
  printf("  stopped by       %s%s\n", why, target && isnan(m->time_to_target_s) ? " (target not reached)" : "");
  printf("  database         %s\n", a->db);
}

/* Opens the calibration database read-only; on failure prints why and returns the exit
 * status (2 when it is missing or not a database). */
static int open_calib(hs_store **cs, const char *path, hs_diag *d) {
  int rc = hs_store_open(cs, path, HS_STORE_READONLY, d);
  if (!rc) return 0;
  fprintf(stderr, "hetsim sim: --calib %s: %s\n", path, d->msg);
  return rc == HS_ENOTFOUND || hs_exit_code(rc) == 2 ? 2 : 1;
}

int hs_cmd_sim(int argc, char **argv) {
  sim_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;

  /* Check every input before the database is touched. */
  hs_diag d = {0};
  hs_cluster_spec spec;
  memset(&spec, 0, sizeof spec);
  if ((rc = hs_cluster_load(&spec, a.cluster, &d)) ||
      (a.events && (rc = hs_cluster_load_events_csv(&spec, a.events, &d)))) {
    fprintf(stderr, "hetsim sim: %s\n", d.msg);
    hs_cluster_spec_free(&spec);
    /* A cluster file that cannot be read is bad input too. */
    return rc == HS_EIO ? 2 : hs_exit_code(rc);
  }
  int status = 2;
  hs_model_stats ms;
  const hs_model_info *mi = NULL;
  const hs_policy *pol = NULL;
  hs_params params;
  hs_store *store = NULL;
  hs_trace *trace = NULL;
  hs_outfile trace_file = {0}; /* --trace-out goes to a temporary file, renamed at the end */
  hs_cli_run rctx = {0};        /* the stored run (cli.h) */
  hs_sim_result res;
  memset(&res, 0, sizeof res);
  hs_perf_model *perf = NULL;     /* per device type, when one is calibrated */
  sim_link_note *links = NULL;    /* the `{calib: NAME}` links, for the summary */
  hs_store *calib_store = NULL;
  hs_store *prof_store = NULL;    /* profiles the cluster file names, imported in memory */
  unsigned char *from_profile = calloc((size_t)spec.n_types, 1);
  if (!from_profile) {
    fprintf(stderr, "hetsim sim: out of memory\n");
    goto out;
  }
  const char *cpath = a.calib ? a.calib : a.db;
  if ((rc = hs_cli_import_profiles("sim", a.model, &spec, &prof_store, from_profile)) ||
      (rc = hs_cli_resolve_model("sim", a.model, cpath, prof_store, a.conv, &mi, &ms, NULL))) {
    status = rc;
    goto out;
  }
  if (!mi && a.epochs > 0 && !a.conv) {
    fprintf(stderr, "hetsim sim: --epochs: %s is an imported model (`hetsim models --db %s`): it has timings but no "
            "data set, so no epoch; use --iterations or --sim-time, or --convergence analytic with parameters "
            "fitted to its curves (which say how many samples an epoch has)\n", a.model, cpath);
    goto out;
  }
  if ((rc = hs_policy_parse(a.policy, &pol, &params, &d))) {
    fprintf(stderr, "hetsim sim: %s\n", d.msg);
    goto out;
  }
  char pstr[1024];
  hs_params_format(&params, pstr, sizeof pstr);
  const hs_conv_model *conv = NULL;
  hs_params conv_params;
  char cstr[1024] = "", csource[1200] = "";
  int64_t fit_id = 0;             /* the stored convergence fit used; 0 = none */
  int64_t imported_epoch = 0;     /* an imported model's samples per epoch: its fitted curves' */
  if (a.conv) {
    /* Without --convergence-params, analytic takes the newest fit to the model's own curves. */
    hs_conv_fit fit;
    int have_fit = 0;
    if (!a.conv_file && hs_cli_conv_analytic(a.conv) &&
        (have_fit = hs_cli_find_conv_fit("sim", a.model, a.calib, a.db, mi ? mi->dataset_train_size : 0, &fit)) < 0) {
      status = -have_fit;
      goto out;
    }
    if (!mi) {
      /* An imported model: an epoch is the fitted curves' (none without a stored fit). */
      if (!have_fit || !(fit.dataset_size > 0)) {
        fprintf(stderr, "hetsim sim: --convergence analytic: %s is an imported model with no convergence fit of "
                "its own that says how many samples an epoch has; fit its curves first (`hetsim fit-convergence "
                "--curves FILE.csv --model %s --dataset-size N`, docs/convergence.md)\n", a.model, a.model);
        goto out;
      }
      imported_epoch = (int64_t)fit.dataset_size;
    }
    if ((rc = hs_conv_parse_fitted(a.conv, a.model, have_fit ? fit.params : NULL, a.conv_file, &conv, &conv_params, &d))) {
      fprintf(stderr, "hetsim sim: %s\n", d.msg);
      goto out;
    }
    hs_params_format(&conv_params, cstr, sizeof cstr);
    if ((rc = hs_conv_check_target(conv, &conv_params, mi ? mi->classes : 0, a.target_loss, a.target_acc, &d))) {
      fprintf(stderr, "hetsim sim: %s\n", d.msg);
      goto out;
    }
    hs_conv_source_text(conv, a.model, have_fit ? &fit : NULL, a.conv_file, a.conv, csource, sizeof csource);
    a.conv_source = csource;
    if (have_fit) fit_id = fit.id;
  }

  /* Each device type's compute for this model: its per-model entry or default, a roofline
   * charged with the model's training FLOPs. */
  int unnamed = 0;
  if ((rc = hs_cluster_resolve_compute(&spec, a.model, ms.train_flops_per_sample, &unnamed, &d))) {
    fprintf(stderr, "hetsim sim: %s\n", d.msg);
    goto out;
  }
  if (unnamed)
    hs_cli_warn_unnamed_compute("sim", &spec, a.model);

  /* Device types with `compute: {calib: NAME}` take the chosen step fit of NAME (a device name
   * or id) for this model from the calibration database; links written `{calib: NAME}` take
   * NAME's measured communication. */
  for (int t = 0; t < spec.n_types; t++) {
    if (spec.types[t].compute.kind != HS_COMPUTE_CALIB) continue;
    if (!perf && !(perf = calloc((size_t)spec.n_types, sizeof *perf))) {
      fprintf(stderr, "hetsim sim: out of memory\n");
      goto out;
    }
    if (!from_profile[t] && !calib_store && (status = open_calib(&calib_store, cpath, &d))) goto out;
    status = 2;
    if ((rc = hs_perf_load(from_profile[t] ? prof_store : calib_store, spec.types[t].compute.calib,
                           a.model, &perf[t], NULL, &d))) {
      fprintf(stderr, "hetsim sim: %s: device_types.%s.compute: %s\n", spec.path, spec.types[t].name, d.msg);
      status = rc == HS_ENOTFOUND ? 2 : 1;
      goto out;
    }
  }
  if (spec.jitter_calib.name[0]) {
    /* `jitter: {calib: NAME}`: the spread of NAME's measured steps of this model. */
    const hs_link_calib *jc = &spec.jitter_calib;
    if (!calib_store && (status = open_calib(&calib_store, cpath, &d))) goto out;
    status = 2;
    if ((rc = hs_perf_jitter_load(calib_store, jc->name, a.model, &spec.jitter_cv, &d))) {
      fprintf(stderr, "hetsim sim: %s:%d:%d: jitter.calib: %s\n", spec.path, jc->pos.line, jc->pos.col, d.msg);
      status = rc == HS_ENOTFOUND ? 2 : 1;
      goto out;
    }
    a.jitter_calib = jc->name;
    a.jitter_cv = spec.jitter_cv;
  }
  for (int i = -1; i < spec.n_nodes; i++) {
    const hs_link_calib *lc = i < 0 ? &spec.network_calib : &spec.nodes[i].link_calib;
    hs_link_spec *link = i < 0 ? &spec.network : &spec.nodes[i].link;
    if (!lc->name[0]) continue;
    if (!calib_store && (status = open_calib(&calib_store, cpath, &d))) goto out;
    if (!links && !(links = calloc((size_t)spec.n_nodes + 1, sizeof *links))) {
      fprintf(stderr, "hetsim sim: out of memory\n");
      status = 1;
      goto out;
    }
    sim_link_note *n = &links[a.n_links];
    if (i < 0) snprintf(n->field, sizeof n->field, "network");
    else snprintf(n->field, sizeof n->field, "nodes[%d].link", i);
    n->calib = lc->name;
    status = 2;
    if ((rc = hs_comm_link_load(calib_store, lc->name, lc->backend, spec.n_workers, (double)ms.grad_bytes, link,
                                 n->how, sizeof n->how, &d))) {
      fprintf(stderr, "hetsim sim: %s:%d:%d: %s.calib: %s\n", spec.path, lc->pos.line, lc->pos.col,
              n->field, d.msg);
      status = rc == HS_ENOTFOUND ? 2 : 1;
      goto out;
    }
    n->link = *link;
    a.n_links++;
  }
  a.links = links;

  if ((rc = hs_cli_store_open("sim", &store, a.db, 0))) {
    status = rc;
    goto out;
  }
  if (a.trace_out) {
    if ((rc = hs_outfile_open(&trace_file, a.trace_out, &d))) {
      fprintf(stderr, "hetsim sim: --trace-out: %s\n", d.msg);
      status = rc == HS_ENOTFOUND ? 2 : 1;
      goto out;
    }
    FILE *tf = trace_file.f; /* the trace writer owns and closes the stream from here */
    trace_file.f = NULL;
    if ((rc = hs_trace_open_file(&trace, tf, trace_file.tmp_path, &d))) {
      fprintf(stderr, "hetsim sim: --trace-out: %s\n", d.msg);
      goto out;
    }
  }

  char command[4096], options[8192], versions[512];
  hs_cli_join_argv(argc, argv, command, sizeof command);
  /* The run's options through their one writer (core_runopts.h). */
  hs_sim_options so = {.iterations = a.iterations, .epochs = a.epochs, .sim_time_s = a.sim_time,
                       .store_steps = a.store_steps, .target_loss = a.target_loss,
                       .target_accuracy = a.target_acc, .grad_bytes = (int64_t)ms.grad_bytes,
                       .convergence_fit_id = fit_id};
  snprintf(so.convergence, sizeof so.convergence, "%s", conv ? conv->name : "none");
  snprintf(so.convergence_params, sizeof so.convergence_params, "%s", cstr);
  snprintf(so.events_csv, sizeof so.events_csv, "%s", a.events ? a.events : "");
  snprintf(so.convergence_source, sizeof so.convergence_source, "%s", csource);
  if ((rc = hs_sim_options_format(&so, options, sizeof options, &d))) {
    fprintf(stderr, "hetsim sim: %s\n", d.msg);
    status = 1;
    goto out;
  }
  hs_cli_versions_json(versions, sizeof versions);
  hs_run_info info = {
      .kind = "sim", .policy = pol->name, .params = pstr, .cluster_name = spec.name,
      .cluster_path = a.cluster, .cluster_text = spec.text, .model = a.model,
      .global_batch = a.global_batch, .seed = a.seed, .options_json = options,
      .versions_json = versions, .command = command,
  };
  /* The run's row is written at its first finished step (hs_cli_run_step_sink). */
  rctx = (hs_cli_run){.store = store, .info = &info, .store_steps = a.store_steps, .max_rows = a.max_step_rows};

  hs_progress prog;
  char label[160];
  snprintf(label, sizeof label, "sim %s on %s", pol->name, spec.name);
  hs_progress_init(&prog, stderr, label, 1.0);
  hs_sim_config cfg = {
      .cluster = &spec, .model = a.model, .train_flops_per_sample = ms.train_flops_per_sample,
      .grad_bytes = (double)ms.grad_bytes,
      .act_bytes_per_sample = ms.act_bytes_per_sample, .param_bytes = 4.0 * (double)ms.params,
      .dataset_size = mi ? mi->dataset_train_size : imported_epoch, .global_batch = a.global_batch, .policy = pol,
      .params = &params, .seed = a.seed, .max_epochs = a.epochs,
      .max_iterations = a.iterations ? a.iterations : a.max_iterations,
      .max_sim_time = a.sim_time, .max_events = a.max_events, .sink = hs_cli_run_step_sink,
      .sink_ctx = &rctx, .trace = trace, .progress = &prog, .stop = &sim_interrupted,
      .conv = conv, .conv_params = conv ? &conv_params : NULL, .target_loss = a.target_loss,
      .target_accuracy = a.target_acc, .eval_sink = conv ? hs_cli_eval_sink : NULL, .eval_ctx = &rctx.evals,
      .perf = perf,
  };

  struct sigaction old_sa;
  sim_interrupted = 0;
  hs_cli_catch_signal(SIGINT, on_sigint, &old_sa);
  double t0 = hs_cli_wall_now();
  rc = hs_sim_run(&cfg, &res, &d);
  res.summary.wall_s = hs_cli_wall_now() - t0;
  sigaction(SIGINT, &old_sa, NULL);

  if (rc && !rctx.id && hs_exit_code(rc) == 2) {
    /* Rejected before the run began: bad input, nothing stored. */
    fprintf(stderr, "hetsim sim: %s\n", d.msg);
    goto out;
  }
  hs_diag sd = {0};
  int src = 0;
  const char *st = rc ? "failed"
                 : res.status == HS_SIM_COMPLETE ? "complete"
                 : res.status == HS_SIM_INTERRUPTED ? "interrupted" : "failed";
  const char *err = rc ? d.msg
                  : res.status == HS_SIM_STALLED ? "the simulation ran out of events before any stop condition (did every worker leave?)"
                  : res.status == HS_SIM_INTERRUPTED ? "interrupted by SIGINT" : NULL;
  char bound_msg[512];
  const char *stop = rc ? "failed" : stop_reason(&a, cfg.dataset_size, &res);
  if (!rc && !strcmp(stop, "max_iterations")) {
    /* The bound of every run, not a stop condition the user gave: the run did not do what
     * was asked, and says so. */
    st = "failed";
    bound_msg_of(&a, &res.summary, bound_msg, sizeof bound_msg);
    err = bound_msg;
  }
  if (!src && !rc && res.workers) {
    hs_worker_row *rows = calloc((size_t)(res.n_workers > 0 ? res.n_workers : 1), sizeof *rows);
    if (!rows) src = hs_diag_set(&sd, HS_ENOMEM, "out of memory");
    for (int i = 0; rows && i < res.n_workers; i++) {
      const hs_sim_worker_stats *w = &res.workers[i];
      rows[i] = (hs_worker_row){
          .index = i, .device_type = spec.types[w->type].name, .node = spec.nodes[w->node].name,
          .joined_at_s = w->joined_at, .left_at_s = w->left_at, .initial_batch = w->initial_batch,
          .steps = w->steps, .samples = w->samples, .busy_s = w->busy_s, .wait_s = w->wait_s,
          .comm_s = w->comm_s};
    }
    if (!src) src = hs_cli_run_finish(&rctx, st, rc ? NULL : &res.summary, err, rows, res.n_workers, &sd);
    free(rows);
  } else if (!src) {
    src = hs_cli_run_finish(&rctx, st, rc ? NULL : &res.summary, err, NULL, 0, &sd);
  }
  if (src) {
    fprintf(stderr, "hetsim sim: storing run: %s\n", sd.msg);
    status = 1;
    goto out;
  }
  if (trace) {
    int trc = hs_trace_close(trace, &d);
    trace = NULL;
    if (!trc) trc = hs_outfile_commit(&trace_file, &d);
    if (trc) {
      fprintf(stderr, "hetsim sim: --trace-out %s: %s\n", a.trace_out, d.msg);
      status = 1;
      goto out;
    }
  }
  if (rc) {
    fprintf(stderr, "hetsim sim: run %lld failed: %s\n", (long long)rctx.id, d.msg);
    status = 1;
    goto out;
  }
  print_summary(&a, rctx.id, st, stop, &spec, &res.summary);
  if (err) fprintf(stderr, "hetsim sim: run %lld %s: %s\n", (long long)rctx.id, st, err);
  status = !strcmp(st, "complete") ? 0 : 1;

out:
  if (trace) hs_trace_close(trace, NULL);
  hs_outfile_abort(&trace_file);
  hs_store_close(calib_store);
  hs_store_close(prof_store);
  free(from_profile);
  free(perf);
  free(links);
  hs_sim_result_free(&res);
  hs_cli_run_free(&rctx);
  hs_store_close(store);
  hs_cluster_spec_free(&spec);
  return status;
}
