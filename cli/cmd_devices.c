/* hetsim devices: the calibrated devices in a database, with the models calibrated on each, the
 * chosen form of the step fit, its held-out error, the batch limit and where the numbers come
 * from (timed here by `hetsim calib`, or an imported profile). Read-only. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/core_json.h"
#include "core/core_store.h"

static void usage(FILE *out) {
  fprintf(out,
"usage: hetsim devices [--db FILE | --bundled] [--csv | --json]\n"
"\n"
"Lists the devices calibrated in the database (`hetsim calib`), one line per device and\n"
"model: the chosen form of the step-time fit, its median error on held-out batch sizes,\n"
"the largest batch that fitted in memory (blank: no limit seen) and the batch sizes timed.\n"
"A device without calibrated models is listed once with an empty model. The source\n"
"column says where the numbers come from: `hetsim calib` on this host, or the profile\n"
"imported by `hetsim calib import` (its content hash, the tool that wrote it, when, and\n"
"how the steps ran).\n"
"\n"
"  --db FILE   database (default %s)\n"
"  --bundled   the cards of the bundled profiles instead (traces/profiles, or $HETSIM_PROFILES:\n"
"              published measurements, each with the source it was converted from)\n"
"  --csv       comma-separated values with a header line\n"
"  --json      one JSON array of objects\n",
          HS_DEFAULT_DB);
}

static void csv_field(const char *s) {
  if (!s) return;
  if (!strpbrk(s, ",\"\n")) {
    fputs(s, stdout);
    return;
  }
  putchar('"');
  for (; *s; s++) {
    if (*s == '"') putchar('"');
    putchar(*s);
  }
  putchar('"');
}

typedef struct list_ctx {
  int json, csv, rows;
  hs_json j;
} list_ctx;

/* Prints one row of hs_store_device_fits_each in the chosen form. */
static int print_row(void *ctx, const hs_device_fit_row *r) {
  list_ctx *lc = ctx;
  lc->rows++;
  long long id = r->device_id, maxb = r->max_batch, nb = r->batches;
  const char *name = r->name, *kind = r->kind, *host = r->host, *model = r->model, *form = r->form;
  const char *source = r->source; /* NULL: timed here */
  int has_err = !isnan(r->heldout_rel_error), has_max = r->has_max_batch;
  double err = r->heldout_rel_error;
  if (lc->json) {
    hs_json *j = &lc->j;
    hs_json_object_begin(j);
    hs_json_key(j, "device_id"); hs_json_int(j, id);
    hs_json_key(j, "name"); hs_json_string(j, name);
    hs_json_key(j, "kind"); hs_json_string(j, kind);
    hs_json_key(j, "host"); hs_json_string(j, host);
    hs_json_key(j, "model"); hs_json_string(j, model);
    hs_json_key(j, "form"); hs_json_string(j, form);
    hs_json_key(j, "heldout_rel_error"); if (has_err) hs_json_double(j, err); else hs_json_null(j);
    hs_json_key(j, "max_batch"); if (has_max) hs_json_int(j, maxb); else hs_json_null(j);
    hs_json_key(j, "batches"); hs_json_int(j, nb);
    hs_json_key(j, "source"); hs_json_string(j, source);
    hs_json_object_end(j);
  } else if (lc->csv) {
    printf("%lld,", id);
    csv_field(name); putchar(',');
    csv_field(kind); putchar(',');
    csv_field(host); putchar(',');
    csv_field(model); putchar(',');
    csv_field(form); putchar(',');
    if (has_err) printf("%.17g", err);
    putchar(',');
    if (has_max) printf("%lld", maxb);
    printf(",%lld,", nb);
    csv_field(source);
    putchar('\n');
  } else {
    char e[32] = "", m[32] = "";
    if (has_err) snprintf(e, sizeof e, "%.2f%%", err * 100);
    if (has_max) snprintf(m, sizeof m, "%lld", maxb);
    printf("%-4lld %-40s %-5s %-12s %-10s %-10s %-9s %-9s %-7lld %s\n", id, name ? name : "", kind ? kind : "",
           host ? host : "", model ? model : "-", form ? form : "-", e, m, nb, source ? source : "hetsim calib");
  }
  return 0;
}

int hs_cmd_devices(int argc, char **argv) {
  static const struct option opts[] = {
      {"db", required_argument, NULL, 'd'}, {"csv", no_argument, NULL, 'c'},
      {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'},
      {"bundled", no_argument, NULL, 'b'}, {NULL, 0, NULL, 0},
  };
  const char *db = HS_DEFAULT_DB;
  int csv = 0, json = 0, bundled = 0, db_given = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'd': db = optarg; db_given = 1; break;
    case 'b': bundled = 1; break;
    case 'c': csv = 1; break;
    case 'j': json = 1; break;
    case 'h': usage(stdout); return 0;
    default:
      fprintf(stderr, "hetsim devices: unknown or incomplete option \"%s\"\nrun `hetsim devices --help` for the options\n", argv[optind - 1]);
      return 2;
    }
  }
  if (optind < argc || (csv && json) || (bundled && db_given)) {
    fprintf(stderr, "hetsim devices: %s\nrun `hetsim devices --help` for the options\n",
            csv && json ? "--csv and --json exclude each other"
            : bundled && db_given ? "--bundled and --db exclude each other" : "unexpected argument");
    return 2;
  }
  hs_diag d = {0};
  hs_store *s = NULL;
  int rc;
  if (bundled) {
    if ((rc = hs_cli_open_bundled("devices", &s, &db))) return rc;
  } else {
    if ((rc = hs_store_open(&s, db, HS_STORE_READONLY, &d))) {
      fprintf(stderr, "hetsim devices: %s\n", d.msg);
      return rc == HS_ENOTFOUND ? 2 : hs_exit_code(rc);
    }
  }
  list_ctx lc = {.json = json, .csv = csv};
  if (json) {
    hs_json_init(&lc.j, stdout, 1);
    hs_json_array_begin(&lc.j);
  } else if (csv) {
    printf("device_id,name,kind,host,model,form,heldout_rel_error,max_batch,batches,source\n");
  } else {
    printf("%-4s %-40s %-5s %-12s %-10s %-10s %-9s %-9s %-7s %s\n", "id", "name", "kind", "host", "model",
           "form", "held-out", "max batch", "batches", "source");
  }
  int ok = !hs_store_device_fits_each(s, print_row, &lc, &d);
  if (!ok) fprintf(stderr, "hetsim devices: %s\n", d.msg);
  if (json) {
    hs_json_array_end(&lc.j);
    printf("\n");
  } else if (!csv && !lc.rows) {
    printf("(no calibrated devices in %s; run `hetsim calib --device cpu` or `hetsim calib import PROFILE`)\n", db);
  }
  hs_store_close(s);
  return ok ? 0 : 1;
}
