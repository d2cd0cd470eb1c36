/* hetsim advise: which policy reaches the target first on this cluster, in one command.
 *
 * Everything that can be checked without running is checked first (the cluster, the model's
 * compute on it, the convergence model, whether that model can ever meet the target, the policy
 * list); each policy is then tried for one iteration in a scratch database (a policy that
 * cannot place the global batch, for instance, does not apply). Exit 2 comes before any run
 * that counts. The applicable policies, each over a small grid of its main parameters (the
 * table below, docs/policies.md "Grids of hetsim advise"), times the seeds, are written as a
 * `hetsim sweep` grid and run by the sweep itself: local processes (--jobs) or MPI ranks under
 * mpirun, in shards merged into --db, every point keyed as the sweep keys it. A point with a
 * complete run in --db is never run again, so an interrupted advise is resumed, and a finished
 * one answered again, by running the same command. The answer is read back from --db by those
 * keys: per parameter set the time to target over the seeds (mean, sd, min, max), per policy
 * its best set, ranked; and what the answer rests on (each device type's compute source, the
 * convergence model and where its parameters come from). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_format.h"
#include "cli/sweep_grid.h"
#include "cli/sweep_rank.h"
#include "core/core_sweep.h"
#include "core/core_config.h"
#include "core/core_json.h"
#include "core/core_store.h"
#include "core/core_units.h"
#include "nn/nn_zoo.h"
#include "policies/pol_registry.h"
#include "sim/sim_conv.h"
#include "sim/sim_conv_fit.h"

/* Runs end at the target, or after this many epochs of computed samples without it. */
#define ADVISE_DEFAULT_EPOCHS 30.0
#define ADVISE_DEFAULT_SEEDS 3
/* The range of lambda_tau over which advise runs the local-step policies' grids again when
 * nobody fitted or set it: from no loss of local steps to the most that fits of PyTorch's own
 * local SGD gave where it reached its targets (on Fashion-MNIST, mlp: 0 at lr 0.01, 0.10-0.13 at
 * 0.05, 0.05-0.45 at 0.1; cnn: 0.012-0.014 at 0.05; docs/performance.md, "Local SGD against
 * PyTorch's model averaging"). */
#define ADVISE_LT_LOW 0.0
#define ADVISE_LT_HIGH 0.45
/* hetsim report draws at most 64 runs on a page. */
enum { ADVISE_REPORT_MAX_RUNS = 64, ADVISE_MAX_CANDIDATES = 512 };

/* The grid of each policy's main parameters (docs/policies.md says why these values). NULL:
 * the defaults only. "K" stands for k in {1, ceil(N/2), N-1} over the cluster's N workers. A
 * policy registered later and missing here runs with its defaults. */
typedef struct advise_grid {
  const char *policy;
  const char *params; /* a YAML flow mapping of lists, as a sweep grid's `params:` */
} advise_grid;
static const advise_grid grids[] = {
    {"ssgd", "{overlap: [0, 1]}"},
    {"ps-bsp", NULL},
    {"asp", NULL},
    {"ssp", "{s: [1, 3, 8]}"},
    {"localsgd", "{tau: [2, 8, 32]}"},
    {"lbb", "{dynamic: [0, 1]}"},
    {"lbcal", "{tau: [2, 8]}"},
    {"predbatch", "{predictor: [last, ema, holt]}"},
    {"dbs", "{every: [10, 50]}"},
    {"alloc-static", NULL},
    {"alloc-adaptive", "{threshold: [0.05, 0.2]}"},
    {"ashl", "{density: [0.01, 0.1]}"},
    {"adsp", "{period: [0.5s, 5s], min_interval: [0.05s]}"},
    {"ksync", "K"},
    {"kasync", "K"},
    {NULL, NULL},
};

static void usage(FILE *out) {
  fprintf(out,
"usage: hetsim advise --cluster FILE --model NAME --global-batch B\n"
"                     (--target-accuracy A | --target-loss L) [--policies LIST]\n"
"                     [--seeds N] [--jobs N] [--convergence analytic|proxy[:k=v,...]]\n"
"                     [--convergence-params FILE] [--calib DB] [--epochs E]\n"
"                     [--store summary|steps] [--lambda-tau-range LO,HI|none]\n"
"                     [--db FILE] [--report FILE.html] [--json]\n"
"\n"
"Answers which policy reaches the target first on the cluster: runs every applicable policy\n"
"over a small grid of its main parameters (docs/policies.md) and N seeds as `hetsim sweep`\n"
"does (local processes, or MPI ranks under mpirun; a point already complete in the database\n"
"is never run again, so the same command resumes an interrupted advise), then ranks the\n"
"policies by their best parameters' mean time to the target.\n"
"\n"
"  --cluster FILE        cluster file (YAML)\n"
"  --model NAME          model from `hetsim models`: the zoo, or one imported into the\n"
"                        calibration database (`hetsim calib import`) or named by the\n"
"                        cluster's `compute: {profile: FILE}`\n"
"  --global-batch B      samples per global iteration\n"
"  --target-loss L       the target: the first evaluation with loss <= L\n"
"  --target-accuracy A   the target: the first evaluation with accuracy >= A (0..1 or 85%%)\n"
"  --policies LIST       comma-separated policies (default: every registered one); ssgd is\n"
"                        always run too, as the baseline of the speed-up\n"
"  --seeds N             seeds 1..N per parameter set (default %d)\n"
"  --jobs N              local worker processes (default: the online CPUs; 1 under mpirun)\n"
"  --convergence MODEL   analytic (default) or proxy, with parameters as for `hetsim sim`\n"
"  --convergence-params FILE  the analytic model's parameters (`hetsim fit-convergence --out`)\n"
"  --calib DB            calibration database (default --db): the devices of\n"
"                        `compute: {calib: NAME}`, the imported models, and the newest\n"
"                        fit of the model's own curves (`hetsim fit-convergence --curves`),\n"
"                        which analytic takes without --convergence-params\n"
"  --epochs E            a run that has not met the target after E epochs of computed\n"
"                        samples ends as \"not reached\" (default %g)\n"
"  --store summary|steps what the runs store (default summary; steps feeds the report's\n"
"                        timelines)\n"
"  --lambda-tau-range LO,HI  when a policy with local steps (localsgd, lbcal, ashl, adsp) is\n"
"                        advised with the analytic model and its lambda_tau is neither fitted\n"
"                        nor set, its grid is run again with lambda_tau LO and HI, and the\n"
"                        answer says how its time and rank move (default %g,%g: the range\n"
"                        measured against PyTorch's local SGD); none: not run\n"
"  --db FILE             results database (default %s)\n"
"  --report FILE.html    also write the `hetsim report` page of the ranked runs\n"
"  --json                print the answer as one JSON object on stdout\n"
"\n"
"exit status: 0 answered, every run complete; 1 some run failed or was interrupted (the\n"
"answer is printed from the others; run the command again to retry them), or a database\n"
"error; 2 bad usage or bad input, no applicable policy, or a target that the convergence\n"
"model can never meet (nothing is run then).\n",
          ADVISE_DEFAULT_SEEDS, ADVISE_DEFAULT_EPOCHS, ADVISE_LT_LOW, ADVISE_LT_HIGH, HS_DEFAULT_DB);
}

typedef struct advise_args {
  const char *cluster, *model, *policies, *db, *report, *conv, *conv_file, *calib, *store;
  int64_t global_batch;
  int seeds, jobs, json;
  double epochs, target_loss, target_acc;
  char target_acc_text[64], target_loss_text[64];
  double lt_range[2];          /* --lambda-tau-range; lt_range_given: set by the user */
  int lt_range_given, lt_range_none;
} advise_args;

#define bad(...) hs_cli_usage("advise", 1, __VA_ARGS__)

enum { O_CLUSTER = 256, O_MODEL, O_GB, O_TLOSS, O_TACC, O_POLICIES, O_SEEDS, O_JOBS, O_CONV,
       O_CONVP, O_CALIB, O_EPOCHS, O_STORE, O_DB, O_REPORT, O_JSON, O_LTR, O_HELP };

static int parse_args(int argc, char **argv, advise_args *a) {
  static const struct option opts[] = {
      {"cluster", required_argument, NULL, O_CLUSTER}, {"model", required_argument, NULL, O_MODEL},
      {"global-batch", required_argument, NULL, O_GB}, {"target-loss", required_argument, NULL, O_TLOSS},
      {"target-accuracy", required_argument, NULL, O_TACC}, {"policies", required_argument, NULL, O_POLICIES},
      {"seeds", required_argument, NULL, O_SEEDS}, {"jobs", required_argument, NULL, O_JOBS},
      {"convergence", required_argument, NULL, O_CONV}, {"convergence-params", required_argument, NULL, O_CONVP},
      {"calib", required_argument, NULL, O_CALIB}, {"epochs", required_argument, NULL, O_EPOCHS},
      {"store", required_argument, NULL, O_STORE}, {"db", required_argument, NULL, O_DB},
      {"report", required_argument, NULL, O_REPORT}, {"json", no_argument, NULL, O_JSON},
      {"lambda-tau-range", required_argument, NULL, O_LTR},
      {"help", no_argument, NULL, O_HELP}, {NULL, 0, NULL, 0},
  };
  memset(a, 0, sizeof *a);
  a->db = HS_DEFAULT_DB;
  a->seeds = ADVISE_DEFAULT_SEEDS;
  a->epochs = ADVISE_DEFAULT_EPOCHS;
  a->conv = "analytic";
  a->store = "summary";
  a->lt_range[0] = ADVISE_LT_LOW;
  a->lt_range[1] = ADVISE_LT_HIGH;
  optind = 1;
  opterr = 0;
  int c;
  int64_t v;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_CLUSTER: a->cluster = optarg; break;
    case O_MODEL: a->model = optarg; break;
    case O_GB:
      if (hs_cli_parse_int64(optarg, 1, &a->global_batch) || a->global_batch > INT_MAX)
        return bad("--global-batch: expected a positive integer, got \"%s\"", optarg);
      break;
    case O_TLOSS:
      if (hs_units_parse_number(optarg, &a->target_loss) || !(a->target_loss > 0) || !isfinite(a->target_loss))
        return bad("--target-loss: expected a positive number, got \"%s\"", optarg);
      snprintf(a->target_loss_text, sizeof a->target_loss_text, "%s", optarg);
      break;
    case O_TACC: {
      if (hs_cli_parse_accuracy(optarg, &a->target_acc))
        return bad("--target-accuracy: expected a fraction in (0, 1] or a percentage like 85%%, got \"%s\"", optarg);
      snprintf(a->target_acc_text, sizeof a->target_acc_text, "%s", optarg);
      break;
    }
    case O_POLICIES: a->policies = optarg; break;
    case O_SEEDS:
      if (hs_cli_parse_int64(optarg, 1, &v) || v > 1000)
        return bad("--seeds: expected an integer from 1 to 1000, got \"%s\"", optarg);
      a->seeds = (int)v;
      break;
    case O_JOBS:
      if (hs_cli_parse_int64(optarg, 1, &v) || v > 4096)
        return bad("--jobs: expected an integer from 1 to 4096, got \"%s\"", optarg);
      a->jobs = (int)v;
      break;
    case O_CONV:
      if (!strcmp(optarg, "none") || !*optarg)
        return bad("%s", "--convergence: advise needs a convergence model: analytic or proxy");
      a->conv = optarg;
      break;
    case O_CONVP: a->conv_file = optarg; break;
    case O_CALIB: a->calib = optarg; break;
    case O_EPOCHS:
      if (hs_units_parse_number(optarg, &a->epochs) || !(a->epochs > 0) || !isfinite(a->epochs))
        return bad("--epochs: expected a positive number, got \"%s\"", optarg);
      break;
    case O_STORE:
      if (strcmp(optarg, "summary") && strcmp(optarg, "steps"))
        return bad("--store: expected steps or summary, got \"%s\"", optarg);
      a->store = optarg;
      break;
    case O_DB: a->db = optarg; break;
    case O_REPORT: a->report = optarg; break;
    case O_JSON: a->json = 1; break;
    case O_LTR: {
      if (!strcmp(optarg, "none")) {
        a->lt_range_none = 1;
        break;
      }
      const char *comma = strchr(optarg, ',');
      char lo[64];
      snprintf(lo, sizeof lo, "%.*s", comma ? (int)(comma - optarg) : 0, optarg);
      if (!comma || hs_units_parse_number(lo, &a->lt_range[0]) || hs_units_parse_number(comma + 1, &a->lt_range[1]) ||
          !(a->lt_range[0] >= 0) || !(a->lt_range[1] > a->lt_range[0]) || !isfinite(a->lt_range[1]) ||
          a->lt_range[1] > 1e12)
        return bad("--lambda-tau-range: expected LO,HI with 0 <= LO < HI <= 1e12, or none, got \"%s\"", optarg);
      a->lt_range_given = 1;
      break;
    }
    case O_HELP:
    case 'h': usage(stdout); return -1;
    default: return bad("unknown or incomplete option \"%s\"", argv[optind - 1]);
    }
  }
  if (optind < argc) return bad("unexpected argument \"%s\"", argv[optind]);
  if (!a->cluster) return bad("%s", "--cluster FILE is required");
  if (!a->model) return bad("%s", "--model NAME is required (see `hetsim models`)");
  if (!a->global_batch) return bad("%s", "--global-batch B is required");
  if (!(a->target_loss > 0) && !(a->target_acc > 0))
    return bad("%s", "a target is required: --target-accuracy A or --target-loss L");
  if (!*a->db) return bad("%s", "--db needs a FILE");
  if (a->report && !*a->report) return bad("%s", "--report needs a FILE");
  return 0;
}

/* ---- checks before running ------------------------------------------------------------- */


/* What one device type's compute rests on, for a run of model. */
typedef struct device_basis {
  const char *type;
  int count;
  const char *kind;   /* "inline", "roofline", "calib", "profile", "none" */
  char detail[400];
} device_basis;

static void describe_compute(const hs_cluster_spec *spec, int t, const char *model,
                             device_basis *b) {
  const hs_device_type *dt = &spec->types[t];
  const hs_compute_spec *c = &dt->compute;
  int per_model = 0;
  for (int i = 0; i < dt->n_per_model; i++)
    if (!strcmp(dt->per_model[i].model, model)) {
      c = &dt->per_model[i];
      per_model = 1;
    }
  b->type = dt->name;
  b->count = 0;
  for (int w = 0; w < spec->n_workers; w++) b->count += spec->workers[w].type == t;
  const char *which = per_model ? "its entry for the model" : dt->n_per_model ? "its default" : "";
  switch (c->kind) {
  case HS_COMPUTE_INLINE:
    b->kind = "inline";
    if (c->model[0] && !strcmp(c->model, model))
      snprintf(b->detail, sizeof b->detail,
               "inline t0 %.4g ms + %.4g ms per sample, stated for %s in the cluster file%s%s: a "
               "guess unless they were measured, not a measurement of hetsim's",
               c->t0 * 1e3, c->per_sample * 1e3, model, *which ? ", " : "", which);
    else
      snprintf(b->detail, sizeof b->detail,
               "inline t0 %.4g ms + %.4g ms per sample that do not name a model%s%s: a guess, the "
               "same times whatever the model", c->t0 * 1e3, c->per_sample * 1e3,
               *which ? ", " : "", which);
    break;
  case HS_COMPUTE_ROOFLINE:
    b->kind = "roofline";
    snprintf(b->detail, sizeof b->detail,
             "roofline %.4g TFLOPS at efficiency %.3g, t0 %.4g ms%s%s: an estimate from the "
             "peak rate and the model's FLOPs, not measured", c->flops / 1e12, c->efficiency,
             c->t0 * 1e3, *which ? ", " : "", which);
    break;
  case HS_COMPUTE_CALIB:
    b->kind = "calib";
    snprintf(b->detail, sizeof b->detail,
             "calibrated: the fitted step time of device \"%s\" for %s from the calibration "
             "database (measured by `hetsim calib` or imported)", c->calib, model);
    break;
  case HS_COMPUTE_PROFILE:
    b->kind = "profile";
    snprintf(b->detail, sizeof b->detail,
             "profile %.300s: measurements made elsewhere (tools/hetsim_profile.py), imported", c->profile);
    break;
  default:
    b->kind = "none";
    snprintf(b->detail, sizeof b->detail, "no compute for %s", model);
    break;
  }
}

/* The policies whose progress the analytic model's local-steps penalty (lambda_tau) discounts. */
static const char *const local_step_policies[] = {"localsgd", "lbcal", "ashl", "adsp"};

static int is_local_step(const char *policy) {
  for (size_t k = 0; k < sizeof local_step_policies / sizeof *local_step_policies; k++)
    if (!strcmp(policy, local_step_policies[k])) return 1;
  return 0;
}

/* Whether the advised policies' times rest on a lambda_tau that nobody fitted or set: the
 * analytic model without --convergence-params, lambda_tau not among the --convergence keys
 * nor among a stored fit's fitted keys, and a policy of local_step_policies advised
 * (local_steps). */
static int lambda_tau_open(const advise_args *a, const hs_conv_model *m, const hs_params *p, const hs_conv_fit *fit,
                           int local_steps) {
  if (m != &hs_conv_analytic || !local_steps || a->conv_file) return 0;
  for (int i = 0; i < p->n; i++)
    if (p->given[i] && !strcmp(p->spec[i].name, "lambda_tau")) return 0;
  return !(fit && strstr(fit->fitted, "\"lambda_tau\""));
}

/* Where the convergence model's parameters come from, in words and as one word; local_steps:
 * whether a policy of local_step_policies is advised (then an unfitted lambda_tau is said). */
static void describe_convergence(const advise_args *a, const hs_conv_model *m, const hs_params *p,
                                 const hs_conv_fit *fit, int local_steps, char *basis, size_t bl, char *words,
                                 size_t wl) {
  if (m != &hs_conv_analytic) {
    snprintf(basis, bl, "proxy");
    snprintf(words, wl,
             "proxy: each simulated worker's schedule really trains %s on Fashion-MNIST, so "
             "accuracy effects are computed, not assumed (times still come from the compute above)",
             a->model);
    return;
  }
  int given = 0;
  for (int i = 0; i < p->n; i++) given += p->given[i];
  /* mlp and cnn have built-in parameters fitted to proxy runs (docs/convergence.md). */
  int fitted = hs_conv_analytic_defaults(a->model) != NULL;
  if (fit) {
    snprintf(basis, bl, "analytic-curves");
    snprintf(words, wl, "analytic, with the parameters fitted to %s's own curves (convergence_fit %lld: %.500s, "
             "%lld points, loss rmse %.4g)%s", a->model, (long long)fit->id, fit->source, (long long)fit->points,
             fit->rmse, given ? ", under the --convergence keys given" : "");
  } else if (a->conv_file || given) {
    snprintf(basis, bl, "analytic-given");
    snprintf(words, wl, "analytic, with parameters set by the user (%s%s%s) over %s",
             a->conv_file ? "--convergence-params " : "", a->conv_file ? a->conv_file : "",
             strchr(a->conv, ':') ? (a->conv_file ? " and --convergence keys" : "--convergence keys") : "",
             fitted ? "the defaults fitted for this model" : "the table's unfitted defaults");
  } else if (fitted) {
    snprintf(basis, bl, "analytic-fitted");
    snprintf(words, wl,
             "analytic, with the parameters fitted for %s to proxy runs (docs/convergence.md; "
             "lambda_c is not fitted)", a->model);
  } else {
    snprintf(basis, bl, "analytic-default");
    snprintf(words, wl,
             "analytic, with the table's default parameters, not fitted to any run of %s: the "
             "times to target are illustrative (fit them with `hetsim fit-convergence`)", a->model);
  }
  double noise = hs_params_get(p, "acc_noise");
  size_t used = strlen(words);
  if (a->target_acc > 0 && noise > 0 && used < wl)
    used += (size_t)snprintf(words + used, wl - used, "; the target accuracy is met at the median first passage of "
                             "evaluations with noise sd %.3g (docs/convergence.md)", noise);
  /* The loss of local steps, which the local-step policies' times to a target rest on: say,
   * when such a policy is advised, that nobody fitted or set it. */
  if (!lambda_tau_open(a, m, p, fit, local_steps) || used >= wl) return;
  char names[128] = "";
  for (size_t k = 0, nl = 0; k < sizeof local_step_policies / sizeof *local_step_policies && nl < sizeof names; k++)
    nl += (size_t)snprintf(names + nl, sizeof names - nl, "%s%s", k ? ", " : "", local_step_policies[k]);
  snprintf(words + used, wl - used, "; lambda_tau %.3g, the loss of local steps (%s), is not fitted to local-SGD "
           "curves of this model (docs/convergence.md)", hs_params_get(p, "lambda_tau"), names);
}

/* Runs `hetsim sim ARGV` in this process with stdout and stderr sent to err_path; returns its
 * exit status. */
static int run_quiet(int argc, char **argv, const char *err_path) {
  fflush(stdout);
  fflush(stderr);
  int so = dup(STDOUT_FILENO), se = dup(STDERR_FILENO);
  int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  int rc = hs_cmd_sim(argc, argv);
  fflush(stdout);
  fflush(stderr);
  if (so >= 0) {
    dup2(so, STDOUT_FILENO);
    close(so);
  }
  if (se >= 0) {
    dup2(se, STDERR_FILENO);
    close(se);
  }
  return rc;
}

/* The last line of path that starts with "hetsim sim: " (without that prefix), into buf. */
static void last_error(const char *path, char *buf, size_t len) {
  snprintf(buf, len, "its first iteration failed");
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[2048];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "hetsim sim: ", 12) || strstr(line, "warning:")) continue;
    line[strcspn(line, "\n")] = '\0';
    snprintf(buf, len, "%.500s", line + 12);
  }
  fclose(f);
}

/* ---- the answer -------------------------------------------------------------------------- */

/* One run of a point, as read back from the database. */
typedef struct point_run {
  int64_t id;                /* 0: no run */
  int complete;
  char error[512];
  double ttt, final_loss, final_acc, samples_per_s, wait_fraction, sim_time_s;
} point_run;

/* One parameter set of one policy: its runs over the seeds. */
typedef struct candidate {
  char *spec;                /* "ssp:s=1" as in the grid */
  const char *policy;        /* registry name */
  char params[512];          /* "s=1", shown without float noise; "" = defaults */
  int n, complete, reached;
  int64_t ids[1000];
  double ttt_mean, ttt_sd, ttt_min, ttt_max;
  double loss, acc, sps, wait; /* means over the complete runs */
  int cls;                   /* 0 reached in every seed, 1 in some, 2 in none, 3 no complete run */
  char reason[600];
  double speedup;
} candidate;

static double mean_of(const double *v, int n) {
  double s = 0;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (isfinite(v[i])) s += v[i], k++;
  return k ? s / k : NAN;
}

/* Orders candidates: reached first by mean time, then partly reached (more seeds first), then
 * not reached by closeness to the target, then those without a complete run. */
static const advise_args *sort_args;
static int cand_cmp(const void *pa, const void *pb) {
  const candidate *a = *(candidate *const *)pa, *b = *(candidate *const *)pb;
  if (a->cls != b->cls) return a->cls - b->cls;
  double x, y;
  if (a->cls == 1 && a->reached != b->reached) return b->reached - a->reached;
  if (a->cls <= 1) x = a->ttt_mean, y = b->ttt_mean;
  else if (sort_args->target_acc > 0) x = -a->acc, y = -b->acc;
  else x = a->loss, y = b->loss;
  if (isnan(x) != isnan(y)) return isnan(x) ? 1 : -1;
  if (x < y) return -1;
  if (x > y) return 1;
  return strcmp(a->spec, b->spec);
}

static void cand_finish(candidate *c, const point_run *runs, const advise_args *a) {
  double t[1000], l[1000], ac[1000], s[1000], w[1000];
  int nr = 0, nc = 0;
  const char *err = NULL;
  for (int i = 0; i < c->n; i++) {
    const point_run *r = &runs[i];
    if (!r->complete) {
      if (r->id && r->error[0] && !err) err = r->error;
      continue;
    }
    l[nc] = r->final_loss;
    ac[nc] = r->final_acc;
    s[nc] = r->samples_per_s;
    w[nc] = r->wait_fraction;
    nc++;
    if (isfinite(r->ttt)) t[nr++] = r->ttt;
  }
  c->complete = nc;
  c->reached = nr;
  c->loss = mean_of(l, nc);
  c->acc = mean_of(ac, nc);
  c->sps = mean_of(s, nc);
  c->wait = mean_of(w, nc);
  c->ttt_mean = c->ttt_sd = c->ttt_min = c->ttt_max = NAN;
  c->speedup = NAN;
  if (nr) {
    c->ttt_mean = mean_of(t, nr);
    double ss = 0;
    c->ttt_min = c->ttt_max = t[0];
    for (int i = 0; i < nr; i++) {
      ss += (t[i] - c->ttt_mean) * (t[i] - c->ttt_mean);
      if (t[i] < c->ttt_min) c->ttt_min = t[i];
      if (t[i] > c->ttt_max) c->ttt_max = t[i];
    }
    /* Equal times give sd 0 exactly, not the rounding of their mean. */
    c->ttt_sd = nr > 1 && c->ttt_max > c->ttt_min ? sqrt(ss / (nr - 1)) : 0.0;
  }
  char fin[96] = "";
  if (a->target_acc > 0 && isfinite(c->acc)) snprintf(fin, sizeof fin, "final accuracy %.4g", c->acc);
  else if (isfinite(c->loss)) snprintf(fin, sizeof fin, "final loss %.4g", c->loss);
  if (nc == 0) {
    c->cls = 3;
    if (err) snprintf(c->reason, sizeof c->reason, "failed: %s", err);
    else snprintf(c->reason, sizeof c->reason, "no complete run yet (run the same command again)");
  } else if (nr == 0) {
    c->cls = 2;
    snprintf(c->reason, sizeof c->reason,
             "not reached within %g epochs of computed samples in any of %d seed%s (%s); raise "
             "--epochs to run longer", a->epochs, nc, nc == 1 ? "" : "s", fin);
  } else if (nr < c->n) {
    c->cls = 1;
    snprintf(c->reason, sizeof c->reason, "reached in %d of %d seeds (the time is their mean)%s", nr,
             c->n, nc < c->n ? "; some runs did not complete" : "");
  } else {
    c->cls = 0;
  }
}

/* ---- output --------------------------------------------------------------------------- */

static void json_num(hs_json *j, const char *k, double v) {
  hs_json_key(j, k);
  hs_json_double(j, v);
}

static void json_candidate(hs_json *j, const candidate *c, int rank) {
  static const char *const cls[] = {"reached", "partly_reached", "not_reached", "failed"};
  hs_json_object_begin(j);
  if (rank > 0) {
    hs_json_key(j, "rank");
    hs_json_int(j, rank);
  }
  hs_json_key(j, "policy"); hs_json_string(j, c->policy);
  hs_json_key(j, "params"); hs_json_string(j, c->params);
  hs_json_key(j, "spec"); hs_json_string(j, c->spec);
  hs_json_key(j, "status"); hs_json_string(j, cls[c->cls]);
  hs_json_key(j, "reason"); hs_json_string(j, c->reason[0] ? c->reason : NULL);
  hs_json_key(j, "seeds"); hs_json_int(j, c->n);
  hs_json_key(j, "complete"); hs_json_int(j, c->complete);
  hs_json_key(j, "reached"); hs_json_int(j, c->reached);
  hs_json_key(j, "time_to_target_s");
  if (c->reached) {
    hs_json_object_begin(j);
    json_num(j, "mean", c->ttt_mean);
    json_num(j, "sd", c->ttt_sd);
    json_num(j, "min", c->ttt_min);
    json_num(j, "max", c->ttt_max);
    hs_json_object_end(j);
  } else {
    hs_json_null(j);
  }
  json_num(j, "final_loss", c->loss);
  json_num(j, "final_accuracy", c->acc);
  json_num(j, "samples_per_s", c->sps);
  json_num(j, "wait_fraction", c->wait);
  json_num(j, "speedup_vs_ssgd", c->speedup);
  hs_json_key(j, "run_ids");
  hs_json_array_begin(j);
  for (int i = 0; i < c->n; i++)
    if (c->ids[i]) hs_json_int(j, c->ids[i]);
  hs_json_array_end(j);
  hs_json_object_end(j);
}

/* A number of the table with prec significant digits (fixed with prec decimals when fixed
 * is set), or "-". */
static const char *cell(char *buf, size_t n, int prec, int fixed, double v) {
  if (!isfinite(v)) snprintf(buf, n, "-");
  else if (fixed) snprintf(buf, n, "%.*f", prec, v);
  else snprintf(buf, n, "%.*g", prec, v);
  return buf;
}

/* The local-step policies' grids run again at one end of lambda_tau's range. */
typedef struct lt_end {
  double value;              /* lambda_tau */
  hs_sweep_grid g;
  point_run *pr;             /* the runs of g's points */
  candidate *cands;
  int ncands;
  candidate **best;          /* each local-step policy's best set at this value */
  int nbest;
  candidate **ranked;        /* the answer's ranking at this value: its best sets, the local-step
                                policies' replaced by theirs at this value, re-ranked */
  int nranked;
  int points, complete;
} lt_end;

typedef struct answer {
  const advise_args *a;
  const hs_cluster_spec *spec;
  device_basis *dev;
  int ndev;
  char conv_basis[32], conv_words[800];
  candidate **best;          /* one per applicable policy, ranked */
  int nbest;
  candidate *cands;
  int ncands;
  char (*na_policy)[64];     /* policies that do not apply, and why */
  char (*na_reason)[512];
  int nna;
  int points, complete, ran;
  const char *report;        /* written page, or NULL */
  int lt_open;               /* lambda_tau neither fitted nor set, a local-step policy advised */
  int lt_done;               /* lt holds the two ends of --lambda-tau-range */
  lt_end lt[2];
  int lt_ran;
} answer;

/* Why an open lambda_tau's range was not run: only --lambda-tau-range none leaves it out (a
 * sweep that exits 2 ends advise before any answer). */
#define LT_NOT_RUN "the local-step policies were not run again over its range (--lambda-tau-range none)"

/* The rank of policy in e's ranking (1-based), 0 when it is not there. */
static int lt_rank(const lt_end *e, const char *policy) {
  for (int i = 0; i < e->nranked; i++)
    if (!strcmp(e->ranked[i]->policy, policy)) return i + 1;
  return 0;
}

/* policy's best set at e's value, or NULL. */
static candidate *lt_best(const lt_end *e, const char *policy) {
  for (int i = 0; i < e->nbest; i++)
    if (!strcmp(e->best[i]->policy, policy)) return e->best[i];
  return NULL;
}

static void print_text(const answer *an) {
  const advise_args *a = an->a;
  char target[160];
  if (a->target_acc > 0 && a->target_loss > 0)
    snprintf(target, sizeof target, "accuracy %s and loss %s", a->target_acc_text, a->target_loss_text);
  else if (a->target_acc > 0) snprintf(target, sizeof target, "accuracy %s", a->target_acc_text);
  else snprintf(target, sizeof target, "loss %s", a->target_loss_text);
  printf("advise: time to %s on %s (%d workers), %s, global batch %lld\n", target, an->spec->name,
         an->spec->n_workers, a->model, (long long)a->global_batch);
  printf("%d seed%s per parameter set; a run not at the target after %g epochs ends as not reached\n\n",
         a->seeds, a->seeds == 1 ? "" : "s", a->epochs);
  int pw = (int)strlen("parameters"), nw = (int)strlen("policy");
  for (int i = 0; i < an->nbest; i++) {
    int l = (int)strlen(an->best[i]->params[0] ? an->best[i]->params : "(defaults)");
    if (l > pw) pw = l;
    if ((int)strlen(an->best[i]->policy) > nw) nw = (int)strlen(an->best[i]->policy);
  }
  const char *metric = a->target_acc > 0 ? "final acc" : "final loss";
  printf("rank  %-*s  %-*s  %10s  %8s  %19s  %10s  %10s  %6s  %8s\n", nw, "policy", pw, "parameters",
         "target (s)", "sd", "min - max", metric, "samples/s", "wait", "vs ssgd");
  for (int i = 0; i < an->nbest; i++) {
    const candidate *c = an->best[i];
    char b[8][48], range[48];
    if (c->reached)
      snprintf(range, sizeof range, "%.4g - %.4g", c->ttt_min, c->ttt_max);
    else
      snprintf(range, sizeof range, "-");
    const char *ttt = c->reached ? cell(b[0], sizeof b[0], 4, 0, c->ttt_mean)
                      : c->cls == 3 ? "failed" : "not reached";
    char speed[48];
    if (isfinite(c->speedup)) snprintf(speed, sizeof speed, "%.2fx", c->speedup);
    else snprintf(speed, sizeof speed, "-");
    printf("%4d  %-*s  %-*s  %10s  %8s  %19s  %10s  %10s  %6s  %8s\n", i + 1, nw, c->policy, pw,
           c->params[0] ? c->params : "(defaults)", ttt,
           c->reached ? cell(b[1], sizeof b[1], 3, 0, c->ttt_sd) : "-", range,
           cell(b[2], sizeof b[2], 4, 0, a->target_acc > 0 ? c->acc : c->loss),
           cell(b[3], sizeof b[3], 5, 0, c->sps), cell(b[4], sizeof b[4], 3, 1, c->wait), speed);
  }
  int notes = 0;
  for (int i = 0; i < an->nbest; i++)
    if (an->best[i]->reason[0]) {
      if (!notes++) printf("\n");
      printf("  %s%s%s: %s\n", an->best[i]->policy, an->best[i]->params[0] ? ":" : "",
             an->best[i]->params, an->best[i]->reason);
    }
  for (int i = 0; i < an->nna; i++) {
    if (!notes++) printf("\n");
    printf("  %s does not apply: %s\n", an->na_policy[i], an->na_reason[i]);
  }
  printf("\nTimes are simulated seconds to the first evaluation at the target: the mean over the seeds of\n"
         "the parameter set with the best mean (%d sets in all; --json lists each).\n", an->ncands);
  printf("\nwhat the answer rests on:\n");
  for (int i = 0; i < an->ndev; i++)
    printf("  %s (%d worker%s): %s\n", an->dev[i].type, an->dev[i].count,
           an->dev[i].count == 1 ? "" : "s", an->dev[i].detail);
  printf("  convergence: %s\n", an->conv_words);
  if (an->lt_open && !an->lt_done) printf("  lambda_tau: %s\n", LT_NOT_RUN);
  if (an->lt_done) {
    const lt_end *lo = &an->lt[0], *hi = &an->lt[1];
    printf("  lambda_tau from %g to %g (%s), the local-step policies' grids run again at each:\n", lo->value,
           hi->value, a->lt_range_given ? "--lambda-tau-range" : "the range measured against PyTorch's local SGD");
    if (lo->nranked && hi->nranked) {
      if (!strcmp(lo->ranked[0]->spec, hi->ranked[0]->spec))
        printf("    first at both: %s\n", lo->ranked[0]->spec);
      else
        printf("    first: %s at %g, %s at %g\n", lo->ranked[0]->spec, lo->value, hi->ranked[0]->spec, hi->value);
    }
    int lw = 0;
    for (int i = 0; i < lo->nbest; i++)
      if ((int)strlen(lo->best[i]->policy) > lw) lw = (int)strlen(lo->best[i]->policy);
    for (int i = 0; i < lo->nbest; i++) {
      const char *pol = lo->best[i]->policy;
      char cellv[2][640];
      for (int e = 0; e < 2; e++) {
        const candidate *c = lt_best(&an->lt[e], pol);
        char t[48];
        if (!c) snprintf(t, sizeof t, "no run");
        else if (c->reached) snprintf(t, sizeof t, "%.4g s", c->ttt_mean);
        else snprintf(t, sizeof t, "%s", c->cls == 3 ? "failed" : "not reached");
        snprintf(cellv[e], sizeof cellv[e], "%s (%s), rank %d", t, c && c->params[0] ? c->params : "(defaults)",
                 lt_rank(&an->lt[e], pol));
      }
      printf("    %-*s  %s  to  %s\n", lw, pol, cellv[0], cellv[1]);
    }
  }
  printf("\nruns: %d of %d points complete in %s (%d run now)", an->complete, an->points, a->db, an->ran);
  if (an->lt_done)
    printf("; lambda_tau's range %d of %d (%d run now)", an->lt[0].complete + an->lt[1].complete,
           an->lt[0].points + an->lt[1].points, an->lt_ran);
  printf("%s%s\n", an->report ? "; report " : "", an->report ? an->report : "");
}

static void print_json(const answer *an) {
  const advise_args *a = an->a;
  hs_json j;
  hs_json_init(&j, stdout, 1);
  hs_json_object_begin(&j);
  hs_json_key(&j, "cluster"); hs_json_string(&j, an->spec->name);
  hs_json_key(&j, "cluster_file"); hs_json_string(&j, a->cluster);
  hs_json_key(&j, "workers"); hs_json_int(&j, an->spec->n_workers);
  hs_json_key(&j, "model"); hs_json_string(&j, a->model);
  hs_json_key(&j, "global_batch"); hs_json_int(&j, a->global_batch);
  json_num(&j, "target_loss", a->target_loss > 0 ? a->target_loss : NAN);
  json_num(&j, "target_accuracy", a->target_acc > 0 ? a->target_acc : NAN);
  hs_json_key(&j, "convergence"); hs_json_string(&j, a->conv);
  hs_json_key(&j, "seeds"); hs_json_int(&j, a->seeds);
  json_num(&j, "max_epochs", a->epochs);
  hs_json_key(&j, "db"); hs_json_string(&j, a->db);
  hs_json_key(&j, "points"); hs_json_int(&j, an->points);
  hs_json_key(&j, "complete"); hs_json_int(&j, an->complete);
  hs_json_key(&j, "ran"); hs_json_int(&j, an->ran);
  hs_json_key(&j, "report"); hs_json_string(&j, an->report);
  hs_json_key(&j, "rests_on");
  hs_json_object_begin(&j);
  hs_json_key(&j, "devices");
  hs_json_array_begin(&j);
  for (int i = 0; i < an->ndev; i++) {
    hs_json_object_begin(&j);
    hs_json_key(&j, "type"); hs_json_string(&j, an->dev[i].type);
    hs_json_key(&j, "workers"); hs_json_int(&j, an->dev[i].count);
    hs_json_key(&j, "compute"); hs_json_string(&j, an->dev[i].kind);
    hs_json_key(&j, "detail"); hs_json_string(&j, an->dev[i].detail);
    hs_json_object_end(&j);
  }
  hs_json_array_end(&j);
  hs_json_key(&j, "convergence"); hs_json_string(&j, an->conv_basis);
  hs_json_key(&j, "convergence_detail"); hs_json_string(&j, an->conv_words);
  hs_json_object_end(&j);
  /* The local-step policies at each end of lambda_tau's range: null when their times do not
   * rest on an unfitted lambda_tau. */
  hs_json_key(&j, "lambda_tau_range");
  if (!an->lt_open) {
    hs_json_null(&j);
  } else {
    hs_json_object_begin(&j);
    hs_json_key(&j, "values");
    hs_json_array_begin(&j);
    hs_json_double(&j, a->lt_range[0]);
    hs_json_double(&j, a->lt_range[1]);
    hs_json_array_end(&j);
    hs_json_key(&j, "given"); hs_json_bool(&j, a->lt_range_given);
    hs_json_key(&j, "run"); hs_json_bool(&j, an->lt_done);
    hs_json_key(&j, "why_not"); hs_json_string(&j, an->lt_done ? NULL : LT_NOT_RUN);
    if (an->lt_done) {
      hs_json_key(&j, "points"); hs_json_int(&j, an->lt[0].points + an->lt[1].points);
      hs_json_key(&j, "complete"); hs_json_int(&j, an->lt[0].complete + an->lt[1].complete);
      hs_json_key(&j, "ran"); hs_json_int(&j, an->lt_ran);
      hs_json_key(&j, "first");
      hs_json_array_begin(&j);
      for (int e = 0; e < 2; e++) hs_json_string(&j, an->lt[e].nranked ? an->lt[e].ranked[0]->spec : NULL);
      hs_json_array_end(&j);
      hs_json_key(&j, "policies");
      hs_json_array_begin(&j);
      for (int i = 0; i < an->lt[0].nbest; i++) {
        const char *pol = an->lt[0].best[i]->policy;
        hs_json_object_begin(&j);
        hs_json_key(&j, "policy"); hs_json_string(&j, pol);
        hs_json_key(&j, "at");
        hs_json_array_begin(&j);
        for (int e = 0; e < 2; e++) {
          const candidate *c = lt_best(&an->lt[e], pol);
          if (c) json_candidate(&j, c, lt_rank(&an->lt[e], pol));
          else hs_json_null(&j);
        }
        hs_json_array_end(&j);
        hs_json_object_end(&j);
      }
      hs_json_array_end(&j);
    }
    hs_json_object_end(&j);
  }
  hs_json_key(&j, "ranking");
  hs_json_array_begin(&j);
  for (int i = 0; i < an->nbest; i++) json_candidate(&j, an->best[i], i + 1);
  hs_json_array_end(&j);
  hs_json_key(&j, "not_applicable");
  hs_json_array_begin(&j);
  for (int i = 0; i < an->nna; i++) {
    hs_json_object_begin(&j);
    hs_json_key(&j, "policy"); hs_json_string(&j, an->na_policy[i]);
    hs_json_key(&j, "reason"); hs_json_string(&j, an->na_reason[i]);
    hs_json_object_end(&j);
  }
  hs_json_array_end(&j);
  hs_json_key(&j, "candidates");
  hs_json_array_begin(&j);
  for (int i = 0; i < an->ncands; i++) json_candidate(&j, &an->cands[i], 0);
  hs_json_array_end(&j);
  hs_json_object_end(&j);
  fputc('\n', stdout);
}

/* ---- the grid --------------------------------------------------------------------------- */

/* Writes s as a double-quoted YAML scalar. */
static void yaml_quoted(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static const char *grid_of(const char *policy) {
  for (const advise_grid *g = grids; g->policy; g++)
    if (!strcmp(g->policy, policy)) return g->params;
  return NULL;
}

static int write_grid(const char *path, const advise_args *a, const char *const *convs, int nconv,
                      const char *cluster_abs, const char *conv_file_abs, const char *calib_abs,
                      const hs_policy *const *pols, int npols, int n_workers) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "# written by hetsim advise\nname: advise\nclusters: [");
  yaml_quoted(f, cluster_abs);
  fprintf(f, "]\npolicies:\n");
  for (int i = 0; i < npols; i++) {
    const char *g = grid_of(pols[i]->name);
    if (!g) {
      fprintf(f, "  - {name: %s}\n", pols[i]->name);
    } else if (!strcmp(g, "K")) {
      /* k in {1, ceil(N/2), N-1}: one gradient, half, all but the slowest. */
      int ks[3] = {1, (n_workers + 1) / 2, n_workers - 1}, nk = 0, out[3];
      for (int k = 0; k < 3; k++) {
        int dup = ks[k] < 1;
        for (int m = 0; m < nk; m++) dup |= out[m] == ks[k];
        if (!dup) out[nk++] = ks[k];
      }
      fprintf(f, "  - {name: %s, params: {k: [", pols[i]->name);
      for (int m = 0; m < nk; m++) fprintf(f, "%s%d", m ? ", " : "", out[m]);
      fprintf(f, "]}}\n");
    } else {
      fprintf(f, "  - {name: %s, params: %s}\n", pols[i]->name, g);
    }
  }
  fprintf(f, "seeds: [");
  for (int s = 1; s <= a->seeds; s++) fprintf(f, "%s%d", s > 1 ? ", " : "", s);
  fprintf(f, "]\nmodel: ");
  yaml_quoted(f, a->model);
  fprintf(f, "\nglobal_batch: %lld\nepochs: %.17g\n", (long long)a->global_batch, a->epochs);
  if (a->target_loss > 0) fprintf(f, "target_loss: %.17g\n", a->target_loss);
  if (a->target_acc > 0) fprintf(f, "target_accuracy: %.17g\n", a->target_acc);
  fprintf(f, "convergence: %s", nconv > 1 ? "[" : "");
  for (int i = 0; i < nconv; i++) {
    if (i) fputs(", ", f);
    yaml_quoted(f, convs[i]);
  }
  fprintf(f, "%s\n", nconv > 1 ? "]" : "");
  if (conv_file_abs) {
    fprintf(f, "convergence_params: ");
    yaml_quoted(f, conv_file_abs);
    fputc('\n', f);
  }
  if (calib_abs) {
    fprintf(f, "calib: ");
    yaml_quoted(f, calib_abs);
    fputc('\n', f);
  }
  fprintf(f, "store: %s\n", a->store);
  return fclose(f) ? -1 : 0;
}

/* An absolute path for a file the sweep's processes open from elsewhere. */
static char *absolute(const char *p) {
  char *r = realpath(p, NULL);
  if (r) return r;
  return strdup(p);
}

/* ---- reading the runs back ------------------------------------------------------------ */

typedef struct key_run {
  char key[17];
  point_run r;
} key_run;

static int key_run_cmp(const void *a, const void *b) {
  return strcmp(((const key_run *)a)->key, ((const key_run *)b)->key);
}

/* The runs of hs_sweep_runs_each, each kept as the run of its point: a complete run wins
 * over a later failure. */
typedef struct runs_ctx {
  key_run *kr;
  int n;
} runs_ctx;

static int keep_run(void *ctx, const hs_sweep_run *sr) {
  runs_ctx *c = ctx;
  const char *k = sr->key;
  if (!k || strlen(k) != 16) return 0;
  key_run *hit = bsearch(k, c->kr, (size_t)c->n, sizeof *c->kr, key_run_cmp);
  if (!hit) return 0;
  if (hit->r.complete && !sr->complete) return 0; /* a complete run wins over a later failure */
  point_run *r = &hit->r;
  r->id = sr->id;
  r->complete = sr->complete;
  snprintf(r->error, sizeof r->error, "%s", sr->error ? sr->error : (sr->complete ? "" : "the run did not finish"));
  r->ttt = sr->time_to_target_s;
  r->final_loss = sr->final_loss;
  r->final_acc = sr->final_accuracy;
  r->samples_per_s = sr->samples_per_s;
  r->wait_fraction = sr->wait_fraction;
  r->sim_time_s = sr->sim_time_s;
  return 0;
}

/* For each point of g, its complete run in db (the newest), else its newest run. */
static int read_runs(const char *db, const hs_sweep_grid *g, point_run *out, hs_diag *d) {
  key_run *kr = calloc((size_t)g->n_points + 1, sizeof *kr);
  if (!kr) return hs_diag_set(d, HS_ENOMEM, "out of memory");
  for (int i = 0; i < g->n_points; i++) memcpy(kr[i].key, g->points[i].key, 17);
  qsort(kr, (size_t)g->n_points, sizeof *kr, key_run_cmp);
  hs_store *s = NULL;
  int rc = hs_store_open(&s, db, HS_STORE_READONLY, d);
  runs_ctx c = {.kr = kr, .n = g->n_points};
  if (!rc) rc = hs_sweep_runs_each(s, keep_run, &c, d);
  hs_store_close(s);
  for (int i = 0; !rc && i < g->n_points; i++) {
    key_run *hit = bsearch(g->points[i].key, kr, (size_t)g->n_points, sizeof *kr, key_run_cmp);
    if (!hit) continue;
    out[i] = hit->r;
    if (!hit->r.id) out[i].ttt = out[i].final_loss = out[i].final_acc = NAN;
  }
  free(kr);
  return rc;
}

/* ---- entry point ------------------------------------------------------------------------ */

/* Removes the scratch folder and what advise put in it. */
static void scratch_remove(const char *dir) {
  static const char *const files[] = {"probe.db", "probe.db-wal", "probe.db-shm", "probe.err",
                                      "grid.yaml", "grid-lt.yaml", NULL};
  char p[4200];
  for (int i = 0; files[i]; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    unlink(p);
  }
  rmdir(dir);
}

/* The candidates of n grid points pts (pr: their runs): one per policy spec, of the points of
 * that spec in grid order (seeds innermost), into cands. Returns how many, or -1 out of memory. */
static int candidates_of(const hs_sweep_point *pts, int np, const point_run *pr, const advise_args *a,
                         candidate *cands) {
  point_run *runs_of = calloc((size_t)a->seeds + 1, sizeof *runs_of);
  if (!runs_of) return -1;
  int n = 0;
  for (int i = 0; i < np;) {
    candidate *c = &cands[n++];
    c->spec = pts[i].policy;
    const hs_policy *p = NULL;
    hs_params pp;
    hs_diag d = {0};
    hs_policy_parse(c->spec, &p, &pp, &d);
    c->policy = p ? p->name : c->spec;
    const char *colon = strchr(c->spec, ':');
    hs_fmt_params(colon ? colon + 1 : "", ",", c->params, sizeof c->params);
    int j = i;
    while (j < np && !strcmp(pts[j].policy, c->spec) && c->n < a->seeds) {
      runs_of[c->n] = pr[j];
      c->ids[c->n++] = pr[j].complete ? pr[j].id : 0;
      j++;
    }
    cand_finish(c, runs_of, a);
    i = j;
  }
  free(runs_of);
  return n;
}

/* Each policy's best set of cands, ranked by cand_cmp, into best. Returns how many, or -1 out
 * of memory. */
static int best_of(candidate *cands, int n, const advise_args *a, candidate **best) {
  candidate **order = calloc((size_t)n + 1, sizeof *order);
  if (!order) return -1;
  for (int i = 0; i < n; i++) order[i] = &cands[i];
  sort_args = a;
  qsort(order, (size_t)n, sizeof *order, cand_cmp);
  int nb = 0;
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int k = 0; k < nb; k++) seen |= !strcmp(best[k]->policy, order[i]->policy);
    if (!seen) best[nb++] = order[i];
  }
  free(order);
  return nb;
}

/* The two ends of lambda_tau's range from the runs pr of g's points (its convergence setting a
 * list of the two values, the first end's points first): each end's candidates and local-step
 * policies' best sets, and the answer's ranking with those in place of the local-step policies'
 * own. Returns 0, HS_ENOMEM, or HS_ERUNTIME when the grid is not so ordered (said). */
static int lt_answer(answer *an, const hs_sweep_grid *g, const point_run *pr) {
  int conv = -1;
  for (int i = 0; i < g->n_settings; i++)
    if (!strcmp(g->settings[i].key, "convergence")) conv = i;
  int half = g->n_points / 2;
  for (int i = 0; i < g->n_points; i++)
    if (conv < 0 || g->points[i].vidx[conv] != (i >= half) || g->n_points % 2) {
      fprintf(stderr, "hetsim advise: internal: the grid of lambda_tau's range is not in two halves\n");
      return HS_ERUNTIME;
    }
  const advise_args *a = an->a;
  for (int e = 0; e < 2; e++) {
    lt_end *x = &an->lt[e];
    x->value = a->lt_range[e];
    x->points = half;
    for (int i = 0; i < half; i++) x->complete += pr[e * half + i].complete;
    if (!(x->cands = calloc((size_t)(half / a->seeds) + 1, sizeof *x->cands)) ||
        !(x->best = calloc((size_t)(half / a->seeds) + 1, sizeof *x->best)) ||
        !(x->ranked = calloc((size_t)an->nbest + 1, sizeof *x->ranked)))
      return HS_ENOMEM;
    if ((x->ncands = candidates_of(g->points + e * half, half, pr + e * half, a, x->cands)) < 0 ||
        (x->nbest = best_of(x->cands, x->ncands, a, x->best)) < 0)
      return HS_ENOMEM;
    for (int k = 0; k < an->nbest; k++) {
      candidate *c = lt_best(x, an->best[k]->policy);
      x->ranked[x->nranked++] = c ? c : an->best[k];
    }
    sort_args = a;
    qsort(x->ranked, (size_t)x->nranked, sizeof *x->ranked, cand_cmp);
  }
  an->lt_done = 1;
  return 0;
}

/* Runs the grid at grid_path as `hetsim sweep` does, into --db; its lines go to stderr, so that
 * stdout holds the answer alone. Returns the sweep's exit status; *ran: the points it ran. */
static int run_grid(const char *grid_path, const advise_args *a, long *ran) {
  char jobs[16];
  char *sargv[12];
  int sc = 0;
  sargv[sc++] = "sweep";
  sargv[sc++] = "--grid";
  sargv[sc++] = (char *)grid_path;
  sargv[sc++] = "--db";
  sargv[sc++] = (char *)a->db;
  if (a->jobs) {
    snprintf(jobs, sizeof jobs, "%d", a->jobs);
    sargv[sc++] = "--jobs";
    sargv[sc++] = jobs;
  }
  sargv[sc] = NULL;
  fflush(stdout);
  int saved = dup(STDOUT_FILENO);
  if (saved >= 0) dup2(STDERR_FILENO, STDOUT_FILENO);
  int src = hs_cmd_sweep_counted(sc, sargv, ran);
  fflush(stdout);
  if (saved >= 0) {
    dup2(saved, STDOUT_FILENO);
    close(saved);
  }
  return src;
}

/* run_grid on every rank of a launch: hetsim-mpi's sweep ends in a barrier after every rank's
 * merge. `hetsim` has no MPI: its ranks meet in files PREFIX.rank<R>.done instead, so that rank 0
 * does not read --db while another rank is still running or merging its points; *ran is then
 * the sum over the ranks on rank 0. Returns the sweep's exit status, or -1 when rank 0 could not
 * wait for the others (said). */
static int sweep_ranks(const char *grid_path, const advise_args *a, const hs_sweep_rank *rk, const char *prefix,
                       long *ran) {
  int src = run_grid(grid_path, a, ran);
  if (!(rk->launched && rk->size > 1 && !rk->mpi)) return src;
  hs_diag bd = {0};
  int brc = rk->rank == 0 ? hs_sweep_rank_files_wait(rk, prefix, ran, &bd)
                          : hs_sweep_rank_files_arrive(rk, prefix, *ran, &bd);
  if (brc == HS_EINVAL && rk->rank == 0) {
    fprintf(stderr, "hetsim advise: warning: %s; the answer may lack the points of ranks still running\n", bd.msg);
  } else if (brc && rk->rank == 0) {
    fprintf(stderr, "hetsim advise: %s\n", bd.msg);
    return -1;
  } else if (brc && !src) {
    fprintf(stderr, "hetsim advise: rank %d: %s\n", rk->rank, bd.msg);
    src = 1;
  }
  return src;
}

int hs_cmd_advise(int argc, char **argv) {
  advise_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;

  hs_diag d = {0};
  hs_cluster_spec spec;
  memset(&spec, 0, sizeof spec);
  if ((rc = hs_cluster_load(&spec, a.cluster, &d))) {
    fprintf(stderr, "hetsim advise: %s\n", d.msg);
    hs_cluster_spec_free(&spec);
    return rc == HS_EIO ? 2 : hs_exit_code(rc);
  }
  int status = 2;
  char scratch[4096] = "";
  char *cluster_abs = NULL, *conv_file_abs = NULL, *calib_abs = NULL;
  const hs_policy **pols = NULL, **local_ok = NULL;
  int npols = 0;
  answer an;
  memset(&an, 0, sizeof an);
  an.a = &a;
  an.spec = &spec;
  hs_sweep_grid g, lt_g;
  hs_sweep_rank rk, mpi_rk;
  memset(&rk, 0, sizeof rk);
  memset(&mpi_rk, 0, sizeof mpi_rk);
  memset(&g, 0, sizeof g);
  memset(&lt_g, 0, sizeof lt_g);
  point_run *pr = NULL, *lt_pr = NULL;
  hs_store *prof_store = NULL;           /* profiles the cluster names, imported in memory */
  unsigned char *from_profile = NULL;
  hs_model_stats ms;
  const hs_model_info *mi = NULL;

  /* What the answer rests on, from the forms as written, before they are collapsed. */
  if (!(an.dev = calloc((size_t)spec.n_types + 1, sizeof *an.dev))) goto oom;
  if (!(from_profile = calloc((size_t)spec.n_types + 1, 1))) goto oom;
  int needs_calib = spec.network_calib.name[0] != '\0';
  for (int i = 0; i < spec.n_nodes; i++) needs_calib |= spec.nodes[i].link_calib.name[0] != '\0';
  for (int t = 0; t < spec.n_types; t++) {
    describe_compute(&spec, t, a.model, &an.dev[an.ndev]);
    needs_calib |= !strcmp(an.dev[an.ndev].kind, "calib");
    if (an.dev[an.ndev].count > 0) an.ndev++;
  }
  /* The model as each simulation will resolve it (cli_model.c): the zoo's, or one imported into
   * the calibration database or brought by a profile the cluster names. */
  const char *cpath = a.calib ? a.calib : a.db;
  int model_in_calib = 0;
  if ((rc = hs_cli_import_profiles("advise", a.model, &spec, &prof_store, from_profile)) ||
      (rc = hs_cli_resolve_model("advise", a.model, cpath, prof_store, a.conv, &mi, &ms, &model_in_calib))) {
    status = rc;
    goto out;
  }
  int cluster_calib = needs_calib; /* the cluster's own forms name calibrated devices or links */
  needs_calib |= model_in_calib;
  int unnamed = 0;
  if ((rc = hs_cluster_resolve_compute(&spec, a.model, ms.train_flops_per_sample, &unnamed, &d))) {
    fprintf(stderr, "hetsim advise: %s\n", d.msg);
    goto out;
  }
  /* The convergence model's parameters as `hetsim sim` takes them: without
   * --convergence-params, analytic takes the newest fit to the model's own curves in the
   * calibration database (--calib, else --db), which the runs are then given. */
  const hs_conv_model *conv = NULL;
  hs_params conv_params;
  hs_conv_fit fit;
  int have_fit = 0;
  if (!a.conv_file && hs_cli_conv_analytic(a.conv) &&
      (have_fit = hs_cli_find_conv_fit("advise", a.model, cpath, NULL, mi ? mi->dataset_train_size : 0, &fit)) < 0) {
    status = -have_fit;
    goto out;
  }
  /* The runs read what advise read here: --calib when given (else the sweep gives them --db). */
  needs_calib |= have_fit || a.calib != NULL;
  if (!mi && (!have_fit || !(fit.dataset_size > 0))) {
    fprintf(stderr, "hetsim advise: --convergence analytic: %s is an imported model with no convergence fit of its "
            "own in %s that says how many samples an epoch has; fit its curves first (`hetsim fit-convergence "
            "--curves FILE.csv --model %s --db %s`, docs/convergence.md)\n", a.model, cpath, a.model, cpath);
    goto out;
  }
  if ((rc = hs_conv_parse_fitted(a.conv, a.model, have_fit ? fit.params : NULL, a.conv_file, &conv, &conv_params, &d))) {
    fprintf(stderr, "hetsim advise: %s\n", d.msg);
    goto out;
  }
  if ((rc = hs_conv_check_target(conv, &conv_params, mi ? mi->classes : 0, a.target_loss, a.target_acc, &d))) {
    fprintf(stderr, "hetsim advise: %s\n", d.msg);
    goto out;
  }
  /* The policies: the list given (each known, once), else every registered one; ssgd always,
   * as the baseline. */
  const hs_policy *const *all = hs_policy_list();
  int nall = 0;
  while (all[nall]) nall++;
  if (!(pols = calloc((size_t)nall + 1, sizeof *pols))) goto oom;
  if (a.policies) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", a.policies);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      while (*tok == ' ') tok++;
      const hs_policy *p = hs_policy_find(tok);
      if (!p) {
        hs_params pp;
        hs_policy_parse(tok, &p, &pp, &d);
        fprintf(stderr, "hetsim advise: --policies: %s\n", strchr(tok, ':')
                    ? "give policy names only: advise runs each over its own grid (docs/policies.md)"
                    : d.msg);
        goto out;
      }
      int dup = 0;
      for (int i = 0; i < npols; i++) dup |= pols[i] == p;
      if (!dup && npols < nall) pols[npols++] = p;
    }
    if (npols == 0) {
      bad("%s", "--policies: expected a comma-separated list of policy names");
      goto out;
    }
  } else {
    for (int i = 0; i < nall; i++) pols[npols++] = all[i];
  }
  int have_ssgd = 0;
  for (int i = 0; i < npols; i++) have_ssgd |= pols[i] == &hs_policy_ssgd;
  if (!have_ssgd) {
    memmove(pols + 1, pols, (size_t)npols * sizeof *pols);
    pols[0] = &hs_policy_ssgd;
    npols++;
  }
  int local_steps = 0;
  for (int i = 0; i < npols; i++) local_steps |= is_local_step(pols[i]->name);
  describe_convergence(&a, conv, &conv_params, have_fit ? &fit : NULL, local_steps, an.conv_basis,
                       sizeof an.conv_basis, an.conv_words, sizeof an.conv_words);

  if (a.report) {
    /* The page's folder must exist before anything runs (the page itself is written last). */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", a.report);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    struct stat sb;
    if (slash && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
      fprintf(stderr, "hetsim advise: --report %s: no folder %s\n", a.report, dir);
      goto out;
    }
  }
  cluster_abs = absolute(a.cluster);
  if (a.conv_file) conv_file_abs = absolute(a.conv_file);
  if (needs_calib) {
    calib_abs = absolute(a.calib ? a.calib : a.db);
    if (access(calib_abs, R_OK) != 0) {
      fprintf(stderr, "hetsim advise: --calib %s: %s%s\n", calib_abs, strerror(errno),
              cluster_calib ? " (the cluster names calibrated devices)" : "");
      goto out;
    }
  }
  if (!cluster_abs || (a.conv_file && !conv_file_abs) || (needs_calib && !calib_abs)) goto oom;

  /* Each policy for one iteration in a scratch database: one that cannot run here (a batch it
   * cannot place, a memory limit) is left out, with the reason. The first that applies is tried
   * once more with the convergence model, whose own limits (the proxy's workers and models)
   * concern every policy. */
  const char *tmp = getenv("TMPDIR");
  snprintf(scratch, sizeof scratch, "%s/hetsim-advise.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(scratch)) {
    fprintf(stderr, "hetsim advise: cannot create a scratch folder %s: %s\n", scratch, strerror(errno));
    scratch[0] = '\0';
    status = 1;
    goto out;
  }
  char probe_db[4200], probe_err[4200], grid_path[4200], gb[32];
  snprintf(probe_db, sizeof probe_db, "%s/probe.db", scratch);
  snprintf(probe_err, sizeof probe_err, "%s/probe.err", scratch);
  snprintf(grid_path, sizeof grid_path, "%s/grid.yaml", scratch);
  snprintf(gb, sizeof gb, "%lld", (long long)a.global_batch);
  const hs_policy **ok = calloc((size_t)npols + 1, sizeof *ok);
  an.na_policy = calloc((size_t)npols + 1, sizeof *an.na_policy);
  an.na_reason = calloc((size_t)npols + 1, sizeof *an.na_reason);
  if (!ok || !an.na_policy || !an.na_reason) {
    free(ok);
    goto oom;
  }
  int nok = 0, n_local = 0;
  for (int i = 0; i < npols; i++) {
    char *pargv[24];
    int pc = 0;
    const char *fixed[] = {"sim", "--cluster", cluster_abs, "--model", a.model, "--policy",
                           pols[i]->name, "--global-batch", gb, "--iterations", "1", "--store",
                           "summary", "--db", probe_db};
    for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) pargv[pc++] = (char *)fixed[k];
    if (calib_abs) pargv[pc++] = "--calib", pargv[pc++] = calib_abs;
    int conv_try = nok == 0 && !ok[0];
    if (conv_try) {
      pargv[pc++] = "--convergence";
      pargv[pc++] = (char *)a.conv;
      if (conv_file_abs) pargv[pc++] = "--convergence-params", pargv[pc++] = conv_file_abs;
    }
    pargv[pc] = NULL;
    int prc = run_quiet(pc, pargv, probe_err);
    if (prc == 0) {
      ok[nok++] = pols[i];
      continue;
    }
    char why[512];
    last_error(probe_err, why, sizeof why);
    if (conv_try && prc == 2) {
      /* Does the policy fail, or the convergence model? Try the policy alone. */
      pargv[pc - (conv_file_abs ? 4 : 2)] = NULL;
      if (run_quiet(pc - (conv_file_abs ? 4 : 2), pargv, probe_err) == 0) {
        fprintf(stderr, "hetsim advise: --convergence %s: %s\n", a.conv, why);
        free(ok);
        goto out;
      }
      last_error(probe_err, why, sizeof why);
    }
    snprintf(an.na_policy[an.nna], sizeof an.na_policy[0], "%s", pols[i]->name);
    snprintf(an.na_reason[an.nna++], sizeof an.na_reason[0], "%s", why);
  }
  if (nok == 0) {
    fprintf(stderr, "hetsim advise: no policy applies to %s with %s at global batch %lld:\n",
            spec.name, a.model, (long long)a.global_batch);
    for (int i = 0; i < an.nna; i++)
      fprintf(stderr, "  %s: %s\n", an.na_policy[i], an.na_reason[i]);
    free(ok);
    goto out;
  }
  if (write_grid(grid_path, &a, &a.conv, 1, cluster_abs, conv_file_abs, calib_abs, ok, nok, spec.n_workers)) {
    fprintf(stderr, "hetsim advise: cannot write %s: %s\n", grid_path, strerror(errno));
    free(ok);
    status = 1;
    goto out;
  }
  /* The applicable local-step policies, kept for lambda_tau's range when it is run. */
  for (int i = 0; i < nok; i++)
    if (is_local_step(ok[i]->name)) ok[n_local++] = ok[i];
  an.lt_open = lambda_tau_open(&a, conv, &conv_params, have_fit ? &fit : NULL, n_local > 0);
  if (an.lt_open && !a.lt_range_none) local_ok = ok;
  else free(ok);
  if ((rc = hs_sweep_grid_load(&g, grid_path, &d))) {
    fprintf(stderr, "hetsim advise: the grid it wrote: %s\n", d.msg);
    status = 1;
    goto out;
  }
  if (g.n_points / a.seeds > ADVISE_MAX_CANDIDATES) {
    fprintf(stderr, "hetsim advise: %d parameter sets; at most %d\n", g.n_points / a.seeds, ADVISE_MAX_CANDIDATES);
    goto out;
  }

  /* The sweep: its lines go to stderr, so that stdout holds the answer alone. Under a launcher
   * every rank runs its share; rank 0 answers once all have merged. */
  if ((rc = hs_sweep_rank_peek(&rk, &d))) {
    fprintf(stderr, "hetsim advise: %s\n", d.msg);
    status = 1;
    goto out;
  }
  /* hetsim-mpi under a launcher: MPI for both sweeps (the answer's and lambda_tau's range), which
   * a sweep alone would finalize at its end. */
  if (rk.mpi && (rc = hs_sweep_rank_init(&mpi_rk, NULL, NULL, &d))) {
    fprintf(stderr, "hetsim advise: %s\n", d.msg);
    status = 1;
    goto out;
  }
  long ran = 0;
  int src = sweep_ranks(grid_path, &a, &rk, a.db, &ran);
  if (src < 0) {
    status = 1;
    goto out;
  }
  /* lambda_tau's range: the applicable local-step policies' grids again, with lambda_tau at each
   * end (one grid whose convergence is a list of the two, points of the first end first), on
   * every rank as the answer's grid. */
  long lt_ran = 0;
  int lt_src = 0;
  if (local_ok && src != 2) {
    char lt_conv[2][700], lt_path[4200], lt_prefix[4200];
    const char *convs[2];
    for (int e = 0; e < 2; e++) {
      snprintf(lt_conv[e], sizeof lt_conv[e], "%s%slambda_tau=%.17g", a.conv, strchr(a.conv, ':') ? "," : ":",
               a.lt_range[e]);
      convs[e] = lt_conv[e];
    }
    snprintf(lt_path, sizeof lt_path, "%s/grid-lt.yaml", scratch);
    snprintf(lt_prefix, sizeof lt_prefix, "%s.lambda-tau", a.db);
    if (write_grid(lt_path, &a, convs, 2, cluster_abs, conv_file_abs, calib_abs, local_ok, n_local, spec.n_workers)) {
      fprintf(stderr, "hetsim advise: cannot write %s: %s\n", lt_path, strerror(errno));
      status = 1;
      goto out;
    }
    if ((rc = hs_sweep_grid_load(&lt_g, lt_path, &d))) {
      fprintf(stderr, "hetsim advise: the grid it wrote for lambda_tau's range: %s\n", d.msg);
      status = 1;
      goto out;
    }
    if ((lt_src = sweep_ranks(lt_path, &a, &rk, lt_prefix, &lt_ran)) < 0) {
      status = 1;
      goto out;
    }
  }
  if (src == 2 || (src && access(a.db, F_OK) != 0)) {
    status = src;
    goto out;
  }
  /* Under mpirun only rank 0 answers. */
  if (rk.rank != 0) {
    status = src ? src : lt_src;
    goto out;
  }

  if (!(pr = calloc((size_t)g.n_points + 1, sizeof *pr))) goto oom;
  if ((rc = read_runs(a.db, &g, pr, &d))) {
    fprintf(stderr, "hetsim advise: %s\n", d.msg);
    status = 1;
    goto out;
  }
  an.points = g.n_points;
  for (int i = 0; i < g.n_points; i++) an.complete += pr[i].complete;
  an.ran = (int)ran;

  if (!(an.cands = calloc((size_t)(g.n_points / a.seeds) + 1, sizeof *an.cands)) ||
      !(an.best = calloc((size_t)(g.n_points / a.seeds) + 1, sizeof *an.best)))
    goto oom;
  if ((an.ncands = candidates_of(g.points, g.n_points, pr, &a, an.cands)) < 0 ||
      (an.nbest = best_of(an.cands, an.ncands, &a, an.best)) < 0)
    goto oom;
  const candidate *base = NULL;
  for (int k = 0; k < an.nbest; k++)
    if (!strcmp(an.best[k]->policy, "ssgd")) base = an.best[k];
  for (int i = 0; i < an.ncands; i++)
    if (base && base->cls == 0 && an.cands[i].cls == 0 && an.cands[i].ttt_mean > 0)
      an.cands[i].speedup = base->ttt_mean / an.cands[i].ttt_mean;
  if (lt_g.n_points > 0) {
    if (!(lt_pr = calloc((size_t)lt_g.n_points + 1, sizeof *lt_pr))) goto oom;
    if ((rc = read_runs(a.db, &lt_g, lt_pr, &d))) {
      fprintf(stderr, "hetsim advise: %s\n", d.msg);
      status = 1;
      goto out;
    }
    if ((rc = lt_answer(&an, &lt_g, lt_pr)) == HS_ENOMEM) goto oom;
    if (rc) {
      status = 1;
      goto out;
    }
    an.lt_ran = (int)lt_ran;
  }

  /* The report page of the ranked runs: every seed of each policy's best set, in rank order,
   * as many as a page holds. */
  if (a.report) {
    char *rargv[ADVISE_REPORT_MAX_RUNS + 10];
    char ids[ADVISE_REPORT_MAX_RUNS][24], title[512];
    int rcount = 0, nids = 0;
    rargv[rcount++] = "report";
    for (int k = 0; k < an.nbest && nids < ADVISE_REPORT_MAX_RUNS; k++)
      for (int s = 0; s < an.best[k]->n && nids < ADVISE_REPORT_MAX_RUNS; s++)
        if (an.best[k]->ids[s]) {
          snprintf(ids[nids], sizeof ids[0], "%lld", (long long)an.best[k]->ids[s]);
          rargv[rcount++] = ids[nids++];
        }
    snprintf(title, sizeof title, "hetsim advise: %s, %s, global batch %lld, target %s%s", spec.name,
             a.model, (long long)a.global_batch, a.target_acc > 0 ? "accuracy " : "loss ",
             a.target_acc > 0 ? a.target_acc_text : a.target_loss_text);
    rargv[rcount++] = "--out";
    rargv[rcount++] = (char *)a.report;
    rargv[rcount++] = "--db";
    rargv[rcount++] = (char *)a.db;
    rargv[rcount++] = "--title";
    rargv[rcount++] = title;
    rargv[rcount] = NULL;
    if (nids == 0) {
      fprintf(stderr, "hetsim advise: --report: no complete run to show\n");
      status = 1;
      goto out;
    }
    int rrc = hs_cmd_report(rcount, rargv);
    if (rrc) {
      status = rrc;
      goto out;
    }
    an.report = a.report;
  }

  if (a.json) print_json(&an);
  else print_text(&an);
  if (an.complete < an.points)
    fprintf(stderr, "hetsim advise: %d of %d points have no complete run in %s; run the same command again to retry them\n",
            an.points - an.complete, an.points, a.db);
  int lt_missing = an.lt_done ? an.lt[0].points + an.lt[1].points - an.lt[0].complete - an.lt[1].complete : 0;
  if (lt_missing)
    fprintf(stderr, "hetsim advise: %d of %d points of lambda_tau's range have no complete run in %s; run the same "
            "command again to retry them\n", lt_missing, an.lt[0].points + an.lt[1].points, a.db);
  status = an.complete == an.points && !lt_missing && src == 0 && lt_src == 0 ? 0 : 1;
  goto out;

oom:
  fprintf(stderr, "hetsim advise: out of memory\n");
  status = 1;
out:
  if (scratch[0]) scratch_remove(scratch);
  free(pr);
  free(lt_pr);
  hs_sweep_grid_free(&g);
  hs_sweep_grid_free(&lt_g);
  for (int e = 0; e < 2; e++) {
    free(an.lt[e].cands);
    free(an.lt[e].best);
    free(an.lt[e].ranked);
  }
  free(local_ok);
  hs_sweep_rank_finalize(&mpi_rk);
  free(an.cands);
  free(an.best);
  free(an.na_policy);
  free(an.na_reason);
  free(an.dev);
  free(pols);
  free(cluster_abs);
  free(conv_file_abs);
  free(calib_abs);
  free(from_profile);
  hs_store_close(prof_store);
  hs_cluster_spec_free(&spec);
  return status;
}
