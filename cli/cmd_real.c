/* hetsim real: train for real under a policy and store the run (kind 'real').
 *
 * Every input is checked before the database is opened (bad input leaves nothing stored); the
 * run's row is written before the workers start, so that a run that fails or is interrupted
 * mid-way is marked so and keeps the rows it wrote. The options needed to replay the run in
 * the simulator (`hetsim validate`) go into the run's options JSON. */
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cal_device.h"
#include "cli/cli.h"
#include "core/core_affinity.h"
#include "core/core_config.h"
#include "core/core_json.h"
#include "core/core_perfmodel.h"
#include "core/core_runopts.h"
#include "core/core_store.h"
#include "core/core_units.h"
#include "nn/nn_data.h"
#include "nn/nn_zoo.h"
#include "policies/pol_registry.h"
#include "real/real_launch.h"
#include "real/real_rank.h"

/* The one piece of process-wide state: a signal handler can reach nothing else. */
static volatile sig_atomic_t real_interrupted;
static void on_sigint(int sig) {
  (void)sig;
  real_interrupted = 1;
}

static void usage(FILE *out) {
  fprintf(out,
"usage: hetsim real --model NAME --policy NAME[:key=value,...] --global-batch B\n"
"                   (--iterations N | --epochs E | --time T | --target-loss L |\n"
"                    --target-accuracy A)\n"
"                   [--cluster FILE] [--workers N] [--backend cpu|local|nccl] [--device DEV]\n"
"                   [--lr LR] [--eval-every N] [--eval-samples N] [--train-samples N]\n"
"                   [--seed S] [--calib DB] [--timeout T] [--pin auto|none] [--server-rank]\n"
"                   [--db FILE] [--json]\n"
"\n"
"Trains MODEL for real under a policy (`hetsim policies`), with the same policy code the\n"
"simulator runs, and stores per-step timings, losses and evaluations as a run of kind real.\n"
"\n"
"  --backend NAME        cpu (default): workers are threads on the nn cpu backend, or one\n"
"                        process per worker when started by mpirun or torchrun (below);\n"
"                        local: workers are threads on one GPU, on SM partitions of it\n"
"                        (--device cuda:I/sm=N, or per device type from the cluster\n"
"                        file's real_device; not yet run on a GPU);\n"
"                        nccl: one process per GPU, started by mpirun or torchrun (not yet\n"
"                        run on a GPU)\n"
"  --device DEV          the workers' device; the cpu backend runs on cpu (default);\n"
"                        local: cuda:I or cuda:I/sm=N, for the workers whose device type has\n"
"                        no real_device and for evaluations (default with a cluster file\n"
"                        whose types name partitions: cuda:I, their GPU);\n"
"                        nccl ranks: cuda:I (the same GPU for every rank: NCCL 2.30 or\n"
"                        later with NCCL_MULTI_RANK_GPU_ENABLE=1) or cuda:local (each rank\n"
"                        the GPU of its local rank)\n"
"  --cluster FILE        cluster file: its workers, their initial slowdowns and its slowdown,\n"
"                        leave and join events are emulated (a worker slowed s times sleeps\n"
"                        (s-1) times its measured compute after each step; under a launcher,\n"
"                        start a rank for every worker, the joiners' too); a device type's\n"
"                        real_device (e.g. \"cuda:0/sm=16\") puts its workers on that device\n"
"                        (--backend local: partitions of one GPU emulate a heterogeneous\n"
"                        cluster); default: --workers equal workers\n"
"  --workers N           workers when no cluster file is given (default 2)\n"
"  --iterations N        stop after N updates of the global model\n"
"  --epochs E            stop once E epochs of the training samples have been computed\n"
"  --time T              stop after T of training (e.g. 30s)\n"
"  --target-loss L       stop at the first evaluation with test loss <= L\n"
"  --target-accuracy A   stop at the first evaluation with test accuracy >= A (a\n"
"                        fraction in (0, 1] or a percentage like 85%%)\n"
"  --lr LR               SGD learning rate (default 0.1; policies may change it)\n"
"  --eval-every N        global updates between evaluations of the global model (default 20)\n"
"  --eval-samples N      test samples per evaluation, the first ones (default 1000)\n"
"  --train-samples N     training samples sharded over the workers; 0 = all (default 0)\n"
"  --seed S              weights, shards (default 1)\n"
"  --calib DB            calibration database: the device's fitted step model serves the\n"
"                        policy's predictions (default: time a few steps before the run)\n"
"  --timeout T           bound on every wait: communication, a silent rank, a slowdown's\n"
"                        emulated sleep (default 60s)\n"
"  --pin auto|none       auto (default): on the cpu, when 2 or more workers can each have a\n"
"                        CPU of their own, pin worker i's thread to the i-th CPU the process\n"
"                        may use (`hetsim calib --concurrent N` pins its nets the same way);\n"
"                        none: leave the threads to the scheduler (better on a machine busy\n"
"                        with other work, which a pinned worker cannot move away from).\n"
"                        One process per worker: each worker's rank pins the thread that\n"
"                        computes to its local rank's CPU, when the launch's ranks on this\n"
"                        machine (LOCAL_RANK/LOCAL_WORLD_SIZE, mpirun's local rank and size,\n"
"                        or all of them with a loopback MASTER_ADDR) have a CPU each\n"
"  --server-rank         multi-process runs: one more process than workers, rank 0 being\n"
"                        the parameter server (for push/pull policies; worker w is rank w+1)\n"
"  --db FILE             results database (default %s)\n"
"  --json                print the summary as one JSON object on stdout (the keys of\n"
"                        `hetsim sim --json`; sim_time_s is the measured training time;\n"
"                        step_fits: each worker's step times t0_s + per_sample_s * b timed\n"
"                        before the run, which the policy predicted it by; null with --calib)\n"
"\n"
"Multi-process runs: `mpirun -np N hetsim real ...`, or one process per rank with RANK,\n"
"WORLD_SIZE, MASTER_ADDR and MASTER_PORT set as torchrun does (ports MASTER_PORT and\n"
"MASTER_PORT+1); N must equal the workers, or the workers plus one with --server-rank.\n"
"Rank 0 runs the policy and writes the database; every worker's rank trains it.\n"
"All-reduce policies run without --server-rank, parameter-server policies with it.\n"
"\n"
"exit status: 0 run complete, 1 run failed or interrupted, 2 bad usage or bad input.\n",
          HS_DEFAULT_DB);
}

typedef struct real_args {
  const char *model, *policy, *cluster, *backend, *device, *db, *calib;
  int64_t global_batch, iterations, workers, eval_every, eval_samples, train_samples;
  double epochs, time, target_loss, target_acc, lr, timeout;
  uint64_t seed;
  int json, server_rank, no_pin;
  int device_given; /* --device was given (else a local run takes the cluster file's GPU) */
} real_args;

/* The longest --time and --timeout: the runtimes turn them into time_t deadlines, which a
 * larger double would overflow (found by -fsanitize=float-cast-overflow). */
#define REAL_MAX_TIME 1e9

#define bad(...) hs_cli_usage("real", 1, __VA_ARGS__)


enum { O_MODEL = 256, O_POLICY, O_GB, O_ITERS, O_EPOCHS, O_TIME, O_TLOSS, O_TACC, O_CLUSTER, O_WORKERS,
       O_BACKEND, O_DEVICE, O_LR, O_EVERY, O_ESAMP, O_TSAMP, O_SEED, O_CALIB, O_TIMEOUT, O_DB,
       O_JSON, O_SERVER_RANK, O_PIN, O_HELP };

static int parse_args(int argc, char **argv, real_args *a) {
  static const struct option opts[] = {
      {"model", required_argument, NULL, O_MODEL}, {"policy", required_argument, NULL, O_POLICY},
      {"global-batch", required_argument, NULL, O_GB}, {"iterations", required_argument, NULL, O_ITERS},
      {"epochs", required_argument, NULL, O_EPOCHS}, {"time", required_argument, NULL, O_TIME},
      {"target-loss", required_argument, NULL, O_TLOSS},
      {"target-accuracy", required_argument, NULL, O_TACC}, {"cluster", required_argument, NULL, O_CLUSTER},
      {"workers", required_argument, NULL, O_WORKERS}, {"backend", required_argument, NULL, O_BACKEND},
      {"device", required_argument, NULL, O_DEVICE}, {"lr", required_argument, NULL, O_LR},
      {"eval-every", required_argument, NULL, O_EVERY}, {"eval-samples", required_argument, NULL, O_ESAMP},
      {"train-samples", required_argument, NULL, O_TSAMP}, {"seed", required_argument, NULL, O_SEED},
      {"calib", required_argument, NULL, O_CALIB}, {"timeout", required_argument, NULL, O_TIMEOUT},
      {"db", required_argument, NULL, O_DB}, {"json", no_argument, NULL, O_JSON},
      {"server-rank", no_argument, NULL, O_SERVER_RANK}, {"pin", required_argument, NULL, O_PIN},
      {"help", no_argument, NULL, O_HELP}, {NULL, 0, NULL, 0},
  };
  memset(a, 0, sizeof *a);
  a->db = HS_DEFAULT_DB;
  a->backend = "cpu";
  a->device = "cpu";
  a->seed = 1;
  a->lr = 0.1;
  a->eval_every = 20;
  a->eval_samples = 1000;
  a->timeout = 60;
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_MODEL: a->model = optarg; break;
    case O_POLICY:
      if (a->policy) return bad("--policy given twice (\"%s\" and \"%s\"); give one", a->policy, optarg);
      a->policy = optarg;
      break;
    case O_CLUSTER: a->cluster = optarg; break;
    case O_BACKEND: a->backend = optarg; break;
    case O_DEVICE: a->device = optarg; a->device_given = 1; break;
    case O_CALIB: a->calib = optarg; break;
    case O_DB:
      if (!*optarg) return bad("%s", "--db: expected a file name, got an empty one");
      a->db = optarg;
      break;
    case O_JSON: a->json = 1; break;
    case O_SERVER_RANK: a->server_rank = 1; break;
    case O_PIN:
      if (hs_cli_parse_pin(optarg, &a->no_pin)) return bad("--pin: expected auto or none, got \"%s\"", optarg);
      break;
    case O_GB:
      if (hs_cli_parse_int64(optarg, 1, &a->global_batch) || a->global_batch > HS_CLI_MAX_GLOBAL_BATCH)
        return bad("--global-batch: expected an integer from 1 to %lld, got \"%s\"", HS_CLI_MAX_GLOBAL_BATCH, optarg);
      break;
    case O_ITERS:
      if (hs_cli_parse_int64(optarg, 1, &a->iterations)) return bad("--iterations: expected a positive integer, got \"%s\"", optarg);
      break;
    case O_WORKERS:
      if (hs_cli_parse_int64(optarg, 1, &a->workers) || a->workers > 4096) return bad("--workers: expected an integer in 1..4096, got \"%s\"", optarg);
      break;
    case O_EVERY:
      if (hs_cli_parse_int64(optarg, 0, &a->eval_every)) return bad("--eval-every: expected a non-negative integer, got \"%s\"", optarg);
      break;
    case O_ESAMP:
      if (hs_cli_parse_int64(optarg, 1, &a->eval_samples)) return bad("--eval-samples: expected a positive integer, got \"%s\"", optarg);
      break;
    case O_TSAMP:
      if (hs_cli_parse_int64(optarg, 0, &a->train_samples)) return bad("--train-samples: expected a non-negative integer, got \"%s\"", optarg);
      break;
    case O_EPOCHS:
      if (hs_units_parse_number(optarg, &a->epochs) || !(a->epochs > 0)) return bad("--epochs: expected a positive number, got \"%s\"", optarg);
      break;
    case O_TIME:
      if (hs_units_parse_time(optarg, &a->time) || !(a->time > 0) || a->time > REAL_MAX_TIME)
        return bad("--time: expected a positive time of at most 1e9 s, like \"30s\", got \"%s\"", optarg);
      break;
    case O_TIMEOUT:
      if (hs_units_parse_time(optarg, &a->timeout) || !(a->timeout > 0) || a->timeout > REAL_MAX_TIME)
        return bad("--timeout: expected a positive time of at most 1e9 s, like \"60s\", got \"%s\"", optarg);
      break;
    case O_TLOSS:
      if (hs_units_parse_number(optarg, &a->target_loss) || !(a->target_loss > 0)) return bad("--target-loss: expected a positive number, got \"%s\"", optarg);
      break;
    case O_TACC:
      if (hs_cli_parse_accuracy(optarg, &a->target_acc))
        return bad("--target-accuracy: expected a fraction in (0, 1] or a percentage like 85%%, got \"%s\"", optarg);
      break;
    case O_LR:
      if (hs_units_parse_number(optarg, &a->lr) || !(a->lr > 0)) return bad("--lr: expected a positive number, got \"%s\"", optarg);
      break;
    case O_SEED:
      if (hs_cli_parse_uint64(optarg, &a->seed)) return bad("--seed: expected an integer from 0 to 18446744073709551615, got \"%s\"", optarg);
      break;
    case O_HELP:
    case 'h': usage(stdout); return -1;
    default: return bad("unknown or incomplete option \"%s\"", argv[optind - 1]);
    }
  }
  if (optind < argc) return bad("unexpected argument \"%s\"", argv[optind]);
  if (!a->model) return bad("%s", "--model NAME is required (see `hetsim models`)");
  if (!a->policy) return bad("%s", "--policy NAME is required (see `hetsim policies`)");
  if (!a->global_batch) return bad("%s", "--global-batch B is required");
  if (!a->iterations && !(a->epochs > 0) && !(a->time > 0) && !(a->target_loss > 0) && !(a->target_acc > 0))
    return bad("%s", "a stop condition is required: --iterations N, --epochs E, --time T, --target-loss L or "
               "--target-accuracy A");
  if (a->cluster && a->workers) return bad("%s", "--workers and --cluster exclude each other: the cluster file says how many workers");
  if (!a->workers) a->workers = 2;
  return 0;
}

static void print_summary(const real_args *a, int64_t run_id, const char *status, const char *cluster,
                          const hs_summary *m, const hs_real_result *res) {
  if (a->json) {
    hs_json j;
    hs_json_init(&j, stdout, 1);
    hs_json_object_begin(&j);
    hs_json_key(&j, "run_id"); hs_json_int(&j, run_id);
    hs_json_key(&j, "status"); hs_json_string(&j, status);
    hs_json_key(&j, "kind"); hs_json_string(&j, "real");
    hs_json_key(&j, "backend"); hs_json_string(&j, a->backend);
    hs_json_key(&j, "policy"); hs_json_string(&j, a->policy);
    hs_json_key(&j, "cluster"); hs_json_string(&j, cluster);
    hs_json_key(&j, "model"); hs_json_string(&j, a->model);
    hs_json_key(&j, "global_batch"); hs_json_int(&j, a->global_batch);
    hs_json_key(&j, "seed"); hs_json_uint(&j, a->seed);
    hs_cli_json_summary(&j, m, 1);
    /* What a policy's predictions of each worker's steps came from without --calib. */
    hs_json_key(&j, "step_fits");
    if (!res->fits) {
      hs_json_null(&j);
    } else {
      hs_json_array_begin(&j);
      for (int i = 0; i < res->n_workers; i++) {
        hs_json_object_begin(&j);
        hs_json_key(&j, "t0_s"); hs_json_double(&j, res->fits[i].t0);
        hs_json_key(&j, "per_sample_s"); hs_json_double(&j, res->fits[i].k);
        hs_json_object_end(&j);
      }
      hs_json_array_end(&j);
    }
    hs_json_key(&j, "db"); hs_json_string(&j, a->db);
    hs_json_object_end(&j);
    return;
  }
  printf("run %lld (%s): real %s on %s (%lld workers, %s backend), %s, global batch %lld\n",
         (long long)run_id, status, a->policy, cluster, (long long)m->workers, a->backend, a->model,
         (long long)a->global_batch);
  printf("  iterations       %lld\n", (long long)m->iterations);
  printf("  training time    %.6g s (%.6g ms per iteration)\n", m->sim_time_s, m->mean_iteration_s * 1e3);
  printf("  throughput       %.6g samples/s\n", m->samples_per_s);
  printf("  wait fraction    %.4f\n", m->wait_fraction);
  hs_cli_print_convergence(m, a->target_loss > 0 || a->target_acc > 0);
  printf("  database         %s\n", a->db);
}

/* Opens the model's training and test data: Fashion-MNIST for the models that train on it,
 * synthetic CIFAR-shaped data (a pure function of the seed) for the others. */
static int open_data(const real_args *a, const hs_model_info *mi, hs_dataset **train, hs_dataset **test,
                     hs_diag *d) {
  if (!strcmp(mi->dataset, "fashion-mnist")) {
    int rc = hs_data_fashion_mnist_first(train, NULL, "train", a->train_samples, d);
    return rc ? rc : hs_data_fashion_mnist_first(test, NULL, "test", a->eval_samples, d);
  }
  int64_t n = a->train_samples > 0 ? a->train_samples : mi->dataset_train_size;
  /* Synthetic data has no test split: evaluations use the first eval-samples training samples
   * (a prefix of the same seed's data, see nn_data.h). */
  int rc = hs_data_synthetic_cifar(train, n, a->seed, d);
  if (!rc) rc = hs_data_synthetic_cifar(test, a->eval_samples < n ? a->eval_samples : n, a->seed, d);
  return rc;
}

/* The events the real runtimes cannot run, refused before anything is stored (exit 2): in the
 * multi-process runtime a leave of worker 0 without a server rank (hs_real_rank_check_events),
 * and in either a file in which every worker, joiners included, leaves (the run would end with
 * nobody left to train). 0, or 1 after the message. */
static int check_events(const hs_cluster_spec *spec, int multi, int server) {
  hs_diag d = {0};
  if (multi && hs_real_rank_check_events(spec, server, &d)) {
    fprintf(stderr, "hetsim real: %s\n", d.msg);
    return 1;
  }
  int left = 0, last = -1, all = hs_cluster_all_workers(spec);
  char *gone = calloc((size_t)(all > 0 ? all : 1), 1);
  if (!gone) {
    fprintf(stderr, "hetsim real: out of memory\n");
    return 1;
  }
  int rc = 0;
  for (int i = 0; i < spec->n_events; i++) {
    const hs_event_spec *e = &spec->events[i];
    if (e->kind == HS_EVENT_LEAVE && e->worker >= 0 && e->worker < all && !gone[e->worker]) {
      gone[e->worker] = 1;
      left++;
      last = i;
    }
  }
  if (all > 0 && left == all) {
    fprintf(stderr, "hetsim real: %s:%d:%d: every one of the %d workers leaves (the last here): the run would end with "
            "no worker to train; keep at least one\n", spec->path, spec->events[last].pos.line,
            spec->events[last].pos.col, all);
    rc = 1;
  }
  free(gone);
  return rc;
}

/* A failure of this machine's own (its device, calibration, data) before the run: printed, and,
 * on a rank other than 0, sent to rank 0 (hs_real_rank_report), which would otherwise wait out
 * --timeout for a rank that never comes and say only that. */
static void local_failure(const hs_real_plan *plan, double timeout, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void local_failure(const hs_real_plan *plan, double timeout, int rc, const char *fmt, ...) {
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "hetsim real: %s\n", msg);
  if (plan->multi && plan->launch.rank > 0) (void)hs_real_rank_report(&plan->launch, timeout, rc, msg);
}

int hs_cmd_real(int argc, char **argv) {
  real_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;

  hs_diag d = {0};
  int status = 2;
  hs_cluster_spec spec;
  memset(&spec, 0, sizeof spec);
  int have_spec = 0;
  const hs_policy *pol = NULL;
  hs_params params;
  hs_store *store = NULL, *calib_store = NULL;
  hs_dataset *train = NULL, *test = NULL;
  hs_real_result res;
  memset(&res, 0, sizeof res);
  hs_cli_run rctx = {0}; /* the stored run (cli.h) */
  hs_perf_model perf;
  int have_perf = 0;
  hs_perf_model *type_perf = NULL;          /* the calibrations of the workers' own devices */
  const hs_perf_model **worker_perf = NULL; /* per worker: into type_perf, or NULL */

  const char **worker_devices = NULL; /* per worker, from the cluster file's real_device */
  int n_own = 0;                      /* workers with a device of their own */
  hs_real_options ro;                 /* the run's options as stored (core_runopts.h) */
  memset(&ro, 0, sizeof ro);
  if (a.cluster) {
    if ((rc = hs_cluster_load(&spec, a.cluster, &d))) {
      fprintf(stderr, "hetsim real: %s\n", d.msg);
      hs_cluster_spec_free(&spec);
      return 2;
    }
    have_spec = 1;
  }
  /* A local run without --device: the GPU of the cluster file's partitions. */
  char gpu[32];
  if (have_spec && !a.device_given && !strcmp(a.backend, "local") && hs_real_devices_gpu(&spec, gpu, sizeof gpu))
    a.device = gpu;
  /* The runtime (threads, or one process per worker under a launcher) and the comm table. */
  hs_real_plan plan;
  if ((rc = hs_real_plan_choose(&plan, a.backend, a.device, a.server_rank, &d))) {
    fprintf(stderr, "hetsim real: %s\n", d.msg);
    goto out;
  }
  a.device = plan.device;
  int multi = plan.multi;
  int n_workers = have_spec ? spec.n_workers : (int)a.workers;
  int all_workers = have_spec ? hs_cluster_all_workers(&spec) : n_workers; /* the joiners too */
  if (have_spec) {
    if (check_events(&spec, multi, a.server_rank)) goto out;
    if (!(worker_devices = calloc((size_t)(all_workers > 0 ? all_workers : 1), sizeof *worker_devices))) {
      fprintf(stderr, "hetsim real: out of memory\n");
      status = 1;
      goto out;
    }
    if ((rc = hs_real_plan_devices(&plan, &spec, worker_devices, &n_own, &d))) {
      local_failure(&plan, a.timeout, rc, "%s", d.msg);
      goto out;
    }
  }
  /* Under a launcher: a rank for every worker, the joiners' too. */
  if ((rc = hs_real_plan_workers(&plan, all_workers, a.timeout, &d))) {
    local_failure(&plan, a.timeout, rc, "%s", d.msg);
    goto out;
  }
  if (a.global_batch < n_workers) {
    fprintf(stderr, "hetsim real: --global-batch %lld is smaller than the %d workers\n", (long long)a.global_batch, n_workers);
    goto out;
  }
  if (a.train_samples > 0 && a.train_samples < n_workers) {
    /* Each worker trains on its own shard of the samples (a joiner shares one): none may be empty. */
    fprintf(stderr, "hetsim real: --train-samples %lld is fewer than the %d workers: every worker needs a "
            "shard of at least one sample\n", (long long)a.train_samples, n_workers);
    goto out;
  }
  const hs_model_info *mi = hs_zoo_find(a.model);
  if (!mi) {
    hs_cli_unknown_model("real", a.model);
    goto out;
  }
  if ((rc = hs_policy_parse(a.policy, &pol, &params, &d))) {
    fprintf(stderr, "hetsim real: %s\n", d.msg);
    goto out;
  }
  /* What the chosen runtime cannot do is refused before anything is stored. */
  if ((rc = hs_real_plan_check(&plan, pol, &params, have_spec ? &spec : NULL, &d))) {
    fprintf(stderr, "hetsim real: %s\n", d.msg);
    goto out;
  }
  char pstr[1024];
  hs_params_format(&params, pstr, sizeof pstr);
  if ((rc = hs_cal_device_discover(&plan.dev, &d))) {
    local_failure(&plan, a.timeout, rc, "--device %s: %s", a.device, d.msg);
    goto out;
  }
  char note[512];
  if (hs_cal_device_granted_note(&plan.dev, note, sizeof note)) fprintf(stderr, "hetsim real: %s\n", note);
  /* The workers' own devices: found on this machine, fitting its GPU, named as their
   * calibrations are (recorded in the run's options). */
  if (n_own ? (rc = hs_real_plan_type_devices(&plan, &spec, &ro, &d))
            : (rc = hs_real_plan_partitions(&plan, all_workers, &d))) {
    local_failure(&plan, a.timeout, rc, "%s", d.msg);
    goto out;
  }
  if (a.calib) {
    if ((rc = hs_store_open(&calib_store, a.calib, HS_STORE_READONLY, &d)) ||
        (rc = hs_perf_load(calib_store, plan.dev.name, a.model, &perf, NULL, &d))) {
      local_failure(&plan, a.timeout, rc, "--calib %s: %s", a.calib, d.msg);
      goto out;
    }
    have_perf = 1;
    /* Workers on devices of their own (partitions of one GPU) are predicted by those devices'
     * calibrations, so that a policy sees unequal partitions as unequal. */
    if (n_own) {
      type_perf = calloc(HS_REAL_MAX_TYPE_DEVICES, sizeof *type_perf);
      worker_perf = calloc((size_t)all_workers, sizeof *worker_perf);
      if (!type_perf || !worker_perf) {
        fprintf(stderr, "hetsim real: out of memory\n");
        status = 1;
        goto out;
      }
      if ((rc = hs_real_plan_worker_perf(&spec, &ro, calib_store, a.model, type_perf, worker_perf, &d))) {
        local_failure(&plan, a.timeout, rc, "--calib %s: %s", a.calib, d.msg);
        goto out;
      }
    }
  }
  if ((rc = open_data(&a, mi, &train, &test, &d))) {
    local_failure(&plan, a.timeout, rc, "%s", d.msg);
    status = hs_exit_code(rc) == 2 || rc == HS_ENOTFOUND ? 2 : 1;
    goto out;
  }
  if (multi && plan.launch.rank != 0) {
    /* Another rank: it executes its worker's actions; rank 0 stores everything. */
    hs_real_config rcfg = {
        .cluster = have_spec ? &spec : NULL, .n_workers = n_workers, .model = a.model, .device = a.device,
        .timeout_s = a.timeout, .train = train, .global_batch = a.global_batch, .policy = pol,
        .params = &params, .seed = a.seed, .lr = a.lr, .eval_every = a.eval_every,
        .max_iterations = a.iterations, .max_epochs = a.epochs, .max_time = a.time,
        .target_loss = a.target_loss, .target_accuracy = a.target_acc, .perf = have_perf ? &perf : NULL,
    };
    /* Ctrl-C reaches every rank of a terminal's process group: only rank 0 decides, and tells
     * the others (SIGTERM still ends a rank; rank 0 then counts the run as interrupted if it
     * got one too, and as failed otherwise). */
    struct sigaction old_int;
    hs_cli_catch_signal(SIGINT, on_sigint, &old_int);
    if ((rc = hs_real_plan_run(&plan, &rcfg, &res, &d)))
      fprintf(stderr, "hetsim real: rank %d: %s\n", plan.launch.rank, d.msg);
    sigaction(SIGINT, &old_int, NULL);
    status = !rc ? 0 : rc == HS_EINVAL || rc == HS_EUNSUPPORTED ? 2 : 1;
    goto out;
  }
  if ((rc = hs_cli_store_open("real", &store, a.db, 0))) {
    status = rc;
    goto out;
  }
  status = 1;

  /* The options hold up to HS_REAL_MAX_TYPE_DEVICES per-type devices of about 400 bytes. */
  char command[4096], options[2048 + HS_REAL_MAX_TYPE_DEVICES * 512], versions[512], cname[96];
  hs_cli_join_argv(argc, argv, command, sizeof command);
  int workers = have_spec ? spec.n_workers : (int)a.workers;
  const char *bare_cluster, *bare_type; /* without a cluster file */
  hs_cli_real_cluster_name(a.backend, &bare_cluster, &bare_type);
  snprintf(cname, sizeof cname, "%s", have_spec ? spec.name : bare_cluster);
  /* Whether the workers' threads will be pinned (hs_real_pins), as the run's options say. */
  hs_real_pin pin = a.no_pin ? HS_PIN_NONE : HS_PIN_AUTO;
  int pinned = hs_real_plan_pinned(&plan, pin, all_workers);
  ro.workers = workers;
  ro.iterations = a.iterations;
  ro.epochs = a.epochs;
  ro.time_s = a.time;
  ro.target_loss = a.target_loss;
  ro.target_accuracy = a.target_acc;
  ro.lr = a.lr;
  ro.eval_every = a.eval_every;
  ro.eval_samples = a.eval_samples;
  ro.train_samples = a.train_samples;
  ro.timeout_s = a.timeout;
  ro.pinned = pinned;
  /* What the workers shared: validate says when they were more than the CPUs. */
  hs_cpus allowed;
  ro.cpus = hs_cpus_allowed(&allowed);
  ro.local_ranks = multi && plan.launch.local_world > 0 ? plan.launch.local_world : 0;
  snprintf(ro.backend, sizeof ro.backend, "%s", plan.comm->name);
  snprintf(ro.device, sizeof ro.device, "%s", a.device);
  /* The device name as before this writer escaped strings: characters that would need an
   * escape are blanked, so that a device's runs keep one name across versions. */
  size_t k = 0;
  for (const char *p = plan.dev.name; *p && k + 1 < sizeof ro.device_name; p++)
    ro.device_name[k++] = (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) ? ' ' : *p;
  ro.device_name[k] = 0;
  snprintf(ro.launch, sizeof ro.launch, "%s", plan.launch.source);
  snprintf(ro.pin, sizeof ro.pin, "%s", a.no_pin ? "none" : "auto");
  if ((rc = hs_real_options_format(&ro, options, sizeof options, &d))) {
    fprintf(stderr, "hetsim real: %s\n", d.msg);
    goto out;
  }
  hs_cli_versions_json(versions, sizeof versions);
  hs_run_info info = {
      .kind = "real", .policy = pol->name, .params = pstr, .cluster_name = cname,
      .cluster_path = a.cluster, .cluster_text = have_spec ? spec.text : NULL, .model = a.model,
      .global_batch = a.global_batch, .seed = a.seed, .options_json = options,
      .versions_json = versions, .command = command,
  };
  /* The run's row is written before the workers start (a run that fails mid-way is marked so). */
  rctx = (hs_cli_run){.store = store, .info = &info, .store_steps = 1};
  if ((rc = hs_cli_run_begin(&rctx, &d))) {
    fprintf(stderr, "hetsim real: storing run: %s\n", d.msg);
    goto out;
  }

  hs_real_config cfg = {
      .cluster = have_spec ? &spec : NULL, .n_workers = workers, .model = a.model,
      .device = a.device, .timeout_s = a.timeout, .train = train, .test = test,
      .global_batch = a.global_batch, .policy = pol, .params = &params, .seed = a.seed,
      .lr = a.lr, .eval_every = a.eval_every, .max_iterations = a.iterations,
      .max_epochs = a.epochs, .max_time = a.time, .target_loss = a.target_loss,
      .target_accuracy = a.target_acc, .perf = have_perf ? &perf : NULL, .sink = hs_cli_run_step_sink, .sink_ctx = &rctx,
      .eval_sink = hs_cli_eval_sink, .eval_ctx = &rctx.evals, .stop = &real_interrupted,
      .pin = pin, .worker_devices = n_own ? worker_devices : NULL, .worker_perf = worker_perf,
  };
  struct sigaction old_sa, old_term;
  real_interrupted = 0;
  hs_cli_catch_signal(SIGINT, on_sigint, &old_sa);
  hs_cli_catch_signal(SIGTERM, on_sigint, &old_term);
  double t0 = hs_cli_wall_now();
  rc = hs_real_plan_run(&plan, &cfg, &res, &d);
  res.summary.wall_s = hs_cli_wall_now() - t0;
  sigaction(SIGINT, &old_sa, NULL);
  sigaction(SIGTERM, &old_term, NULL);

  hs_diag sd = {0};
  int src = 0;
  const char *st = rc ? "failed"
                 : res.status == HS_REAL_COMPLETE ? "complete"
                 : res.status == HS_REAL_INTERRUPTED ? "interrupted" : "failed";
  const char *err = rc ? d.msg
                  : res.status == HS_REAL_STALLED ? "the policy left nothing to do before any stop condition (did every worker leave?)"
                  : res.status == HS_REAL_INTERRUPTED ? "interrupted by a signal" : NULL;
  hs_worker_row *rows = NULL;
  if (res.workers) {
    rows = calloc((size_t)res.n_workers, sizeof *rows);
    if (!rows) src = hs_diag_set(&sd, HS_ENOMEM, "out of memory");
    for (int i = 0; rows && i < res.n_workers; i++) {
      const hs_real_worker_stats *w = &res.workers[i];
      int ti = 0, ni = 0;
      if (have_spec) ti = hs_cluster_worker_type(&spec, i, &ni); /* a joiner: its event's */
      const char *type = have_spec ? spec.types[ti].name : bare_type;
      const char *node = have_spec ? spec.nodes[ni].name : plan.dev.host;
      rows[i] = (hs_worker_row){.index = i, .device_type = type, .node = node, .joined_at_s = w->joined_at,
                                .left_at_s = w->left_at, .initial_batch = w->initial_batch,
                                .steps = w->steps, .samples = w->samples, .busy_s = w->busy_s,
                                .wait_s = w->wait_s, .comm_s = w->comm_s};
    }
  }
  if (!src) src = hs_cli_run_finish(&rctx, st, res.workers ? &res.summary : NULL, err, rows, res.n_workers, &sd);
  free(rows);
  if (src) {
    fprintf(stderr, "hetsim real: storing run: %s\n", sd.msg);
    goto out;
  }
  if (rc) {
    fprintf(stderr, "hetsim real: run %lld failed: %s\n", (long long)rctx.id, d.msg);
    /* What the multi-process runtime does not support yet is refused as bad input. */
    if (multi && (rc == HS_EUNSUPPORTED || rc == HS_EINVAL)) status = 2;
    goto out;
  }
  print_summary(&a, rctx.id, st, cname, &res.summary, &res);
  if (err) fprintf(stderr, "hetsim real: run %lld %s: %s\n", (long long)rctx.id, st, err);
  status = res.status == HS_REAL_COMPLETE ? 0 : 1;

out:
  free(worker_devices);
  free(worker_perf);
  free(type_perf);
  hs_real_result_free(&res);
  hs_cli_run_free(&rctx);
  hs_store_close(store);
  hs_store_close(calib_store);
  hs_data_close(train);
  hs_data_close(test);
  if (have_spec) hs_cluster_spec_free(&spec);
  return status;
}
