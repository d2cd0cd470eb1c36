/* hetsim models: the model zoo with parameter counts, gradient bytes and FLOPs per sample, and
 * with --db the models imported into a database (`hetsim calib import`), with where their
 * numbers come from. Read-only. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/core_json.h"
#include "core/core_store.h"
#include "nn/nn_zoo.h"

static void usage(FILE *out) {
  fprintf(out,
"usage: hetsim models [--db FILE | --bundled] [--json]\n"
"\n"
"Lists the models hetsim knows, computed from their layer graphs: trainable\n"
"parameters, fp32 gradient bytes (4 per parameter, what one all-reduce moves),\n"
"forward FLOPs per sample (a multiply-add counts 2), and the fp32 activation\n"
"bytes per sample kept for the backward pass (used for memory limits).\n"
"\n"
"  --db FILE   also list the models imported into FILE (`hetsim calib import`): their\n"
"              parameters, gradient bytes and training FLOPs per sample (forward +\n"
"              backward) from the profile, and a source column saying where each\n"
"              model's numbers come from\n"
"  --bundled   also list the models of the bundled profiles (traces/profiles, or\n"
"              $HETSIM_PROFILES), which a cluster file's `compute: {profile: ...}` brings\n"
"  --json      one JSON array of objects\n");
}

typedef struct list_ctx {
  int json;
  hs_json j;
} list_ctx;

/* Prints one imported model (hs_store_imported_models_each). */
static int print_imported(void *ctx, const hs_model_row *r) {
  list_ctx *lc = ctx;
  long long params = r->params, grad = r->grad_bytes;
  int has_flops = !isnan(r->flops_per_sample);
  double flops = r->flops_per_sample;
  if (lc->json) {
    hs_json *j = &lc->j;
    hs_json_object_begin(j);
    hs_json_key(j, "name"); hs_json_string(j, r->name);
    hs_json_key(j, "description"); hs_json_string(j, r->description);
    hs_json_key(j, "dataset"); hs_json_null(j);
    hs_json_key(j, "params"); hs_json_int(j, params);
    hs_json_key(j, "grad_bytes"); hs_json_int(j, grad);
    hs_json_key(j, "flops_per_sample"); hs_json_null(j);
    hs_json_key(j, "train_flops_per_sample"); hs_json_double(j, has_flops ? flops : NAN);
    hs_json_key(j, "act_bytes_per_sample"); hs_json_null(j);
    hs_json_key(j, "layers"); hs_json_null(j);
    hs_json_key(j, "source"); hs_json_string(j, r->source);
    hs_json_object_end(j);
  } else {
    /* A profile gives training FLOPs (forward + backward) only. */
    char gf[32] = "-";
    if (has_flops) snprintf(gf, sizeof gf, "%.4f", flops / 1e9);
    printf("%-12s %-14s %12lld %14lld %14s %14s %18s  %s\n", r->name ? r->name : "", "-", params, grad, "-", "-", gf,
           r->source ? r->source : "");
  }
  return 0;
}

int hs_cmd_models(int argc, char **argv) {
  static const struct option opts[] = {
      {"db", required_argument, NULL, 'd'}, {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'}, {"bundled", no_argument, NULL, 'b'}, {NULL, 0, NULL, 0},
  };
  const char *db = NULL;
  int json = 0, bundled = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'd': db = optarg; break;
    case 'b': bundled = 1; break;
    case 'j': json = 1; break;
    case 'h': usage(stdout); return 0;
    default:
      fprintf(stderr, "hetsim models: unknown argument \"%s\"\nrun `hetsim models --help` for the options\n", argv[optind - 1]);
      return 2;
    }
  }
  if (optind < argc || (db && bundled)) {
    fprintf(stderr, "hetsim models: %s\nrun `hetsim models --help` for the options\n",
            db && bundled ? "--bundled and --db exclude each other" : "unknown argument");
    return 2;
  }
  hs_store *s = NULL;
  if (db || bundled) {
    int rc = bundled ? hs_cli_open_bundled("models", &s, &db) : hs_cli_store_open("models", &s, db, HS_STORE_READONLY);
    if (rc) return rc;
  }
  list_ctx lc = {.json = json};
  hs_json *jp = &lc.j;
  if (json) {
    hs_json_init(jp, stdout, 1);
    hs_json_array_begin(jp);
  } else {
    printf("%-12s %-14s %12s %14s %14s %14s%s\n", "model", "dataset", "params", "grad_bytes",
           "GFLOP/sample", "act_MiB/sample", db ? " train_GFLOP/sample  source" : "");
  }
  for (int i = 0; i < hs_zoo_count(); i++) {
    const hs_model_info *m = hs_zoo_info(i);
    hs_model_stats ms;
    hs_diag d = {0};
    if (hs_zoo_stats(m->name, &ms, &d)) {
      fprintf(stderr, "hetsim models: %s\n", d.msg);
      hs_store_close(s);
      return 1;
    }
    if (json) {
      hs_json_object_begin(jp);
      hs_json_key(jp, "name"); hs_json_string(jp, m->name);
      hs_json_key(jp, "description"); hs_json_string(jp, m->description);
      hs_json_key(jp, "dataset"); hs_json_string(jp, m->dataset);
      hs_json_key(jp, "params"); hs_json_int(jp, ms.params);
      hs_json_key(jp, "grad_bytes"); hs_json_int(jp, ms.grad_bytes);
      hs_json_key(jp, "flops_per_sample"); hs_json_double(jp, ms.flops_per_sample);
      hs_json_key(jp, "train_flops_per_sample"); hs_json_double(jp, ms.train_flops_per_sample);
      hs_json_key(jp, "act_bytes_per_sample"); hs_json_double(jp, ms.act_bytes_per_sample);
      hs_json_key(jp, "layers"); hs_json_int(jp, ms.layers);
      if (db) {
        hs_json_key(jp, "source"); hs_json_string(jp, "zoo");
      }
      hs_json_object_end(jp);
    } else {
      printf("%-12s %-14s %12lld %14lld %14.4f %14.3f", m->name, m->dataset, (long long)ms.params,
             (long long)ms.grad_bytes, ms.flops_per_sample / 1e9, ms.act_bytes_per_sample / 1048576.0);
      if (db) printf(" %18.4f  zoo (nn/nn_zoo.c)", ms.train_flops_per_sample / 1e9);
      printf("\n");
    }
  }
  hs_diag ld = {0};
  int ok = !s || !hs_store_imported_models_each(s, print_imported, &lc, &ld);
  if (!ok) fprintf(stderr, "hetsim models: %s\n", ld.msg);
  hs_store_close(s);
  if (json) hs_json_array_end(jp);
  return ok ? 0 : 1;
}
