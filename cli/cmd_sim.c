/* hetsim sim: simulate a training run and store it.
 *
 * Every input is checked before the database is opened, and the run's row is only written once
 * the simulation has really started (at its first finished step), so that rejected input
 * leaves nothing in the database. A run that fails later, or is interrupted, is marked so. */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/core_config.h"
#include "core/core_json.h"
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

static void usage(FILE *out) {
  fprintf(out,
"usage: hetsim sim --cluster FILE --model NAME --policy NAME[:key=value,...]\n"
"                  --global-batch B (--iterations N | --epochs E | --sim-time T |\n"
"                  --target-loss L | --target-accuracy A)\n"
"                  [--events FILE.csv] [--seed S] [--db FILE] [--store summary|steps]\n"
"                  [--trace-out FILE.json] [--json] [--max-events N]\n"
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
"exit status: 0 run complete, 1 run failed or interrupted, 2 bad usage or bad input.\n",
          HS_DEFAULT_DB);
}

typedef struct sim_args {
  const char *cluster, *events, *model, *policy, *db, *trace_out;
  int64_t global_batch, iterations;
  double epochs, sim_time;
  uint64_t seed;
  int store_steps, json;
  size_t max_events;
  const char *conv, *conv_file;   /* conv NULL = none */
  const char *calib;              /* calibration database; NULL = the --db one */
  double target_loss, target_acc; /* 0 = none */
  const char *conv_source;        /* where the convergence parameters come from; NULL = none */
} sim_args;

#define bad(...) hs_cli_usage("sim", 1, __VA_ARGS__)


enum { O_CLUSTER = 256, O_EVENTS, O_MODEL, O_POLICY, O_GB, O_ITERS, O_EPOCHS, O_SIMTIME,
       O_TLOSS, O_TACC, O_CONV, O_CALIB, O_SEED, O_DB, O_STORE, O_TRACE, O_JSON, O_MAXEV, O_HELP,
       O_CONVP };

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
      {"help", no_argument, NULL, O_HELP}, {NULL, 0, NULL, 0},
  };
  memset(a, 0, sizeof *a);
  a->db = HS_DEFAULT_DB;
  a->seed = 1;
  a->store_steps = 1;
  optind = 1;
  opterr = 0;
  int c;
  int64_t v;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_CLUSTER: a->cluster = optarg; break;
    case O_EVENTS: a->events = optarg; break;
    case O_MODEL: a->model = optarg; break;
    case O_POLICY: a->policy = optarg; break;
    case O_GB:
      if (hs_cli_parse_int64(optarg, 1, &a->global_batch)) return bad("--global-batch: expected a positive integer, got \"%s\"", optarg);
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
      size_t l = strlen(optarg);
      int pct = l > 0 && optarg[l - 1] == '%';
      char num[64];
      snprintf(num, sizeof num, "%.*s", (int)(pct ? l - 1 : l), optarg);
      if (hs_units_parse_number(num, &a->target_acc) || !(a->target_acc > 0) ||
          a->target_acc > (pct ? 100 : 1))
        return bad("--target-accuracy: expected a fraction in (0, 1] or a percentage like 85%%, got \"%s\"", optarg);
      if (pct) a->target_acc /= 100;
      break;
    }
    case O_CONV:
      a->conv = strcmp(optarg, "none") ? optarg : NULL;
      break;
    case O_CONVP: a->conv_file = optarg; break;
    case O_CALIB: a->calib = optarg; break;
    case O_SEED:
      if (hs_cli_parse_int64(optarg, 0, &v)) return bad("--seed: expected a non-negative integer, got \"%s\"", optarg);
      a->seed = (uint64_t)v;
      break;
    case O_DB: a->db = optarg; break;
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
  return 0;
}

/* The step sink: begins the run's row at the first finished step, then stores steps. */
typedef struct run_ctx {
  hs_store *store;
  const hs_run_info *info;
  int64_t run_id;
  int store_steps;
} run_ctx;

static int run_ensure(run_ctx *r, hs_diag *d) {
  if (r->run_id) return 0;
  int rc = hs_store_run_begin(r->store, r->info, &r->run_id, d);
  if (!rc && r->store_steps) rc = hs_store_steps_begin(r->store, r->run_id, d);
  return rc;
}

static int step_sink(void *ctx, const hs_step_row *row, hs_diag *d) {
  run_ctx *r = ctx;
  int rc = run_ensure(r, d);
  if (rc || !r->store_steps) return rc;
  return hs_store_step_add(r->store, row, d);
}

static void print_summary(const sim_args *a, int64_t run_id, const char *status,
                          const hs_cluster_spec *spec, const hs_summary *m) {
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
    hs_json_key(&j, "seed"); hs_json_int(&j, (int64_t)a->seed);
    hs_cli_json_summary(&j, m, a->conv != NULL);
    if (a->conv_source) { hs_json_key(&j, "convergence_source"); hs_json_string(&j, a->conv_source); }
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
  if (a->conv) hs_cli_print_convergence(m, a->target_loss > 0 || a->target_acc > 0);
  if (a->conv_source) printf("  convergence      %s\n", a->conv_source);
  printf("  database         %s\n", a->db);
}

/* The newest convergence fit stored for the run's model (`hetsim fit-convergence --curves`):
 * from the --calib database, else the --db one (a database that does not exist yet, or predates
 * the table, has none). Returns 1 when found, 0 when not, -1 on a database error (printed). */
static int find_conv_fit(const sim_args *a, int64_t dataset_size, hs_conv_fit *fit) {
  const char *paths[2] = {a->calib, a->db};
  for (int i = 0; i < 2; i++) {
    hs_store *s = NULL;
    hs_diag d = {0};
    if (!paths[i] || (i == 1 && a->calib && !strcmp(a->calib, a->db))) continue;
    if (access(paths[i], F_OK) || hs_store_open(&s, paths[i], HS_STORE_READONLY, &d)) continue;
    int rc = hs_conv_fit_newest(s, a->model, dataset_size, fit, &d);
    hs_store_close(s);
    if (!rc) return 1;
    if (rc != HS_ENOTFOUND) {
      fprintf(stderr, "hetsim sim: %s: %s\n", paths[i], d.msg);
      return -1;
    }
  }
  return 0;
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
  const hs_model_info *mi = hs_zoo_find(a.model);
  const hs_policy *pol = NULL;
  hs_params params;
  hs_store *store = NULL;
  hs_trace *trace = NULL;
  hs_sim_result res;
  memset(&res, 0, sizeof res);
  hs_cli_evals evals = {0};
  hs_perf_model *perf = NULL;     /* per device type, when one is calibrated */
  hs_store *calib_store = NULL;
  if (!mi || hs_zoo_stats(a.model, &ms, &d)) {
    hs_cli_unknown_model("sim", a.model);
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
  char cstr[1024] = "", csource[1200] = "", csource_json[2600] = "null", fit_id[24] = "null";
  if (a.conv) {
    /* Without --convergence-params, analytic takes the newest fit to the model's own curves. */
    hs_conv_fit fit;
    int have_fit = 0;
    if (!a.conv_file && !strncmp(a.conv, "analytic", 8) && (!a.conv[8] || a.conv[8] == ':') &&
        (have_fit = find_conv_fit(&a, mi->dataset_train_size, &fit)) < 0) {
      status = 1;
      goto out;
    }
    if ((rc = hs_conv_parse_fitted(a.conv, a.model, have_fit ? fit.params : NULL, a.conv_file, &conv, &conv_params, &d))) {
      fprintf(stderr, "hetsim sim: %s\n", d.msg);
      goto out;
    }
    hs_params_format(&conv_params, cstr, sizeof cstr);
    hs_conv_source_text(conv, a.model, have_fit ? &fit : NULL, a.conv_file, a.conv, csource, sizeof csource);
    a.conv_source = csource;
    char *js = NULL;
    size_t jl = 0;
    FILE *mf = open_memstream(&js, &jl);
    if (mf) {
      hs_json_write_escaped(mf, csource);
      fclose(mf);
      if (js && jl < sizeof csource_json) snprintf(csource_json, sizeof csource_json, "%s", js);
    }
    free(js);
    if (have_fit) snprintf(fit_id, sizeof fit_id, "%lld", (long long)fit.id);
  }

  /* Device types with `compute: {calib: NAME}` take the chosen step fit of NAME (a device name
   * or id) for this model from the calibration database. */
  for (int t = 0; t < spec.n_types; t++) {
    if (spec.types[t].compute.kind != HS_COMPUTE_CALIB) continue;
    const char *cpath = a.calib ? a.calib : a.db;
    if (!perf) {
      hs_store *cs = NULL;
      if (!(perf = calloc((size_t)spec.n_types, sizeof *perf))) {
        fprintf(stderr, "hetsim sim: out of memory\n");
        goto out;
      }
      if ((rc = hs_store_open(&cs, cpath, HS_STORE_READONLY, &d))) {
        fprintf(stderr, "hetsim sim: --calib %s: %s\n", cpath, d.msg);
        status = rc == HS_ENOTFOUND || hs_exit_code(rc) == 2 ? 2 : 1;
        goto out;
      }
      calib_store = cs;
    }
    if ((rc = hs_perf_load(calib_store, spec.types[t].compute.calib, a.model, &perf[t], NULL, &d))) {
      fprintf(stderr, "hetsim sim: %s: device_types.%s.compute: %s\n", spec.path, spec.types[t].name, d.msg);
      status = rc == HS_ENOTFOUND ? 2 : 1;
      goto out;
    }
  }

  if ((rc = hs_cli_store_open("sim", &store, a.db, 0))) {
    status = rc;
    goto out;
  }
  if (a.trace_out && (rc = hs_trace_open(&trace, a.trace_out, &d))) {
    fprintf(stderr, "hetsim sim: --trace-out: %s\n", d.msg);
    goto out;
  }

  char command[4096], options[4096], versions[512];
  hs_cli_join_argv(argc, argv, command, sizeof command);
  snprintf(options, sizeof options,
           "{\"iterations\":%lld,\"epochs\":%.17g,\"sim_time_s\":%.17g,\"store\":\"%s\","
           "\"convergence\":\"%s\",\"convergence_params\":\"%s\",\"target_loss\":%.17g,"
           "\"target_accuracy\":%.17g,\"events_csv\":%s%s%s,\"grad_bytes\":%lld,"
           "\"convergence_source\":%s,\"convergence_fit_id\":%s}",
           (long long)a.iterations, a.epochs, a.sim_time, a.store_steps ? "steps" : "summary",
           conv ? conv->name : "none", cstr, a.target_loss, a.target_acc,
           a.events ? "\"" : "", a.events ? a.events : "null", a.events ? "\"" : "",
           (long long)ms.grad_bytes, csource_json, fit_id);
  hs_cli_versions_json(versions, sizeof versions);
  hs_run_info info = {
      .kind = "sim", .policy = pol->name, .params = pstr, .cluster_name = spec.name,
      .cluster_path = a.cluster, .cluster_text = spec.text, .model = a.model,
      .global_batch = a.global_batch, .seed = a.seed, .options_json = options,
      .versions_json = versions, .command = command,
  };
  run_ctx rctx = {.store = store, .info = &info, .store_steps = a.store_steps};

  hs_progress prog;
  char label[160];
  snprintf(label, sizeof label, "sim %s on %s", pol->name, spec.name);
  hs_progress_init(&prog, stderr, label, 1.0);
  hs_sim_config cfg = {
      .cluster = &spec, .model = a.model, .grad_bytes = (double)ms.grad_bytes,
      .act_bytes_per_sample = ms.act_bytes_per_sample, .param_bytes = 4.0 * (double)ms.params,
      .dataset_size = mi->dataset_train_size, .global_batch = a.global_batch, .policy = pol,
      .params = &params, .seed = a.seed, .max_iterations = a.iterations, .max_epochs = a.epochs,
      .max_sim_time = a.sim_time, .max_events = a.max_events, .sink = step_sink,
      .sink_ctx = &rctx, .trace = trace, .progress = &prog, .stop = &sim_interrupted,
      .conv = conv, .conv_params = conv ? &conv_params : NULL, .target_loss = a.target_loss,
      .target_accuracy = a.target_acc, .eval_sink = conv ? hs_cli_eval_sink : NULL, .eval_ctx = &evals,
      .perf = perf,
  };

  struct sigaction old_sa;
  sim_interrupted = 0;
  hs_cli_catch_signal(SIGINT, on_sigint, &old_sa);
  double t0 = hs_cli_wall_now();
  rc = hs_sim_run(&cfg, &res, &d);
  res.summary.wall_s = hs_cli_wall_now() - t0;
  sigaction(SIGINT, &old_sa, NULL);

  if (rc && !rctx.run_id && hs_exit_code(rc) == 2) {
    /* Rejected before the run began: bad input, nothing stored. */
    fprintf(stderr, "hetsim sim: %s\n", d.msg);
    goto out;
  }
  hs_diag sd = {0};
  int src = run_ensure(&rctx, &sd);
  if (!src && a.store_steps) src = hs_store_steps_end(store, &sd);
  if (!src) src = hs_cli_evals_store(&evals, store, rctx.run_id, &sd);
  const char *st = rc ? "failed"
                 : res.status == HS_SIM_COMPLETE ? "complete"
                 : res.status == HS_SIM_INTERRUPTED ? "interrupted" : "failed";
  const char *err = rc ? d.msg
                  : res.status == HS_SIM_STALLED ? "the simulation ran out of events before any stop condition (did every worker leave?)"
                  : res.status == HS_SIM_INTERRUPTED ? "interrupted by SIGINT" : NULL;
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
    if (!src) src = hs_store_workers_add(store, rctx.run_id, rows, res.n_workers, &sd);
    free(rows);
  }
  if (!src) src = hs_store_run_finish(store, rctx.run_id, st, rc ? NULL : &res.summary, err, &sd);
  if (src) {
    fprintf(stderr, "hetsim sim: storing run: %s\n", sd.msg);
    status = 1;
    goto out;
  }
  if (trace) {
    int trc = hs_trace_close(trace, &d);
    trace = NULL;
    if (trc) {
      fprintf(stderr, "hetsim sim: --trace-out: %s\n", d.msg);
      status = 1;
      goto out;
    }
  }
  if (rc) {
    fprintf(stderr, "hetsim sim: run %lld failed: %s\n", (long long)rctx.run_id, d.msg);
    status = 1;
    goto out;
  }
  print_summary(&a, rctx.run_id, st, &spec, &res.summary);
  if (err) fprintf(stderr, "hetsim sim: run %lld %s: %s\n", (long long)rctx.run_id, st, err);
  status = res.status == HS_SIM_COMPLETE ? 0 : 1;

out:
  if (trace) hs_trace_close(trace, NULL);
  hs_store_close(calib_store);
  free(perf);
  hs_sim_result_free(&res);
  hs_cli_evals_free(&evals);
  hs_store_close(store);
  hs_cluster_spec_free(&spec);
  return status;
}
