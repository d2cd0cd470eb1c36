/* hetsim report: one self-contained HTML page with SVG plots of some runs — time to target, a
 * comparison table of their policies, the clusters they ran on, progress against time,
 * per-worker batch sizes, per-worker timelines, iteration-time distributions, loss and accuracy
 * against time, and for validated runs the simulation against the measurement.
 *
 * Everything is read through a read-only connection; the page is written to a temporary file
 * and renamed over --out only once complete (cli/report_file.h), so a failure leaves no half
 * page. Huge runs are drawn in part (the first workers, a zoomed window of steps beside an
 * overview in time bins, a thinned curve), and the page says what was left out. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_format.h"
#include "cli/report_file.h"
#include "cli/report_html.h"
#include "cli/report_svg.h"
#include "core/core_config.h"
#include "core/core_store.h"
#include "core/core_store_query.h"
#include "core/core_units.h"

/* Limits that keep the page small enough for a browser whatever the run's size. */
enum {
  TIMELINE_MAX_WORKERS = 32, /* rows of a timeline */
  TIMELINE_MAX_STEPS = 4000, /* step rows drawn span by span per timeline (up to 4 spans each) */
  TIMELINE_WHOLE_STEPS = 120, /* up to this many steps per worker, a run's timeline is drawn
                                 whole, span by span (8 px or more per step); above, an
                                 overview of the whole run in time bins and a zoomed window */
  OVERVIEW_BINS = 250,       /* time bins of the overview */
  ZOOM_ITERATIONS = 8,       /* the zoomed window: this many iterations of the slowest worker */
  CURVE_MAX_POINTS = 2000,   /* points of a progress or eval curve (thinned evenly) */
  HIST_MAX_VALUES = 1000000, /* iteration times per histogram */
  VALID_MAX_STEPS = 5000,    /* step indices in a simulated-against-measured plot */
  MAX_RUNS = 64,
};
/* The validation plot's y axis ends above this quantile of its values when spikes lie far
 * above it (report_svg.h: clip_quantile). */
#define VALID_CLIP_QUANTILE 0.98

static const char usage_text[] =
    "usage: hetsim report RUN... --out FILE.html [--db FILE] [--title TEXT]\n"
    "\n"
    "Writes one self-contained HTML page (inline SVG, no scripts, opens offline) about the\n"
    "given runs of the results database:\n"
    "  - a comparison table of the runs' policies and summaries, with bar charts;\n"
    "  - the clusters: device types, workers and nodes, links, compute numbers;\n"
    "  - samples processed against time;\n"
    "  - each worker's batch size against time, for runs whose batches change;\n"
    "  - per-worker timelines of compute, communication and wait, rows labelled with\n"
    "    device type and node (from step rows): a short run whole, a longer one as an\n"
    "    overview of the whole run plus a zoomed window of a few iterations; at most 32\n"
    "    workers are drawn, and the page says when it cut;\n"
    "  - the distribution of iteration times (a worker's step start to its next step start);\n"
    "  - loss and accuracy against time (eval rows; runs without a convergence model say so);\n"
    "  - for runs with validation rows, simulated against measured (a start-up spike is cut\n"
    "    off the iteration-time plot's y axis, and the page says so).\n"
    "\n"
    "  RUN...           run IDs (hetsim query runs lists them); repeats are shown once\n"
    "  --out FILE       the page to write; it appears only once complete\n"
    "  --db FILE        results database (default " HS_DEFAULT_DB "), opened read-only\n"
    "  --title TEXT     page title (default \"hetsim report: runs ...\")\n"
    "  -h, --help       this text\n"
    "\n"
    "exit status: 0 page written; 1 runtime failure (database or write error: no page is\n"
    "left behind); 2 bad usage (no runs, a run ID that is not a number or not in the database,\n"
    "no --out, a database or output folder that does not exist).\n";

#define usage_error(...) hs_cli_usage_error("report", __VA_ARGS__)

/* One run as the page shows it. Summary numbers are NaN when the run has no summary row. */
typedef struct run_row {
  int64_t id;
  char *kind, *policy, *params, *cluster, *model, *status, *error, *store;
  char *cluster_text;         /* the cluster file the run was given; NULL for real runs */
  char label[96];             /* "#3 lbb:k=2", the run's name on plots */
  int64_t global_batch;
  int has_summary;
  double workers, iterations, samples, sim_time_s, mean_iteration_s, samples_per_s;
  double wait_fraction, final_loss, final_accuracy, time_to_target_s;
  double target_loss, target_accuracy; /* the run's targets; NaN when it had none */
  char *group;                /* what the run is apart from its seed (runs that differ only in
                                 the seed share it) */
  int64_t nworkers, nsteps, nevals;
  int color;
} run_row;

typedef struct report {
  hs_store *store;
  hs_diag qd;                 /* SQLite's message of the last failed read */
  FILE *f;
  const char *db_path;
  run_row *runs;
  int nruns;
  hs_diag *d;
} report;

static int db_error(report *r, const char *what) {
  return hs_diag_set(r->d, HS_EDB, "%s: %s: %s", r->db_path, what, r->qd.msg);
}

/* Opens the store's rows q of run (bounded by n where q says; core_store_query.h). */
static int prep(report *r, hs_report_query q, int64_t run, int64_t n, hs_rows **st) {
  if (hs_store_report_open(r->store, q, run, n, st, &r->qd)) return db_error(r, "preparing a query");
  return 0;
}

static char *col_text(const hs_rows *st, int i) {
  const char *t = hs_rows_text(st, i, NULL);
  return t ? strdup(t) : NULL;
}

static double col_real(const hs_rows *st, int i) { return hs_rows_real_or_nan(st, i); }

/* A number for a table cell: integers without a decimal point, others with 6 digits. */
static const char *num(char *buf, size_t n, double v) {
  if (!isfinite(v)) return NULL;
  if (v == floor(v) && fabs(v) < 1e15) snprintf(buf, n, "%.0f", v);
  else snprintf(buf, n, "%.6g", v);
  return buf;
}

/* The same with 4 significant digits (all the integer digits from 10^4 up, not 2.455e+05),
 * for the wide runs table. */
static const char *num_short(char *buf, size_t n, double v) {
  if (!isfinite(v)) return NULL;
  if ((v == floor(v) || fabs(v) >= 1e4) && fabs(v) < 1e15) snprintf(buf, n, "%.0f", v);
  else snprintf(buf, n, "%.4g", v);
  return buf;
}

/* Growable arrays of doubles for curves. */
typedef struct dvec {
  double *v;
  size_t n, cap;
} dvec;

static int dvec_push(dvec *a, double x) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 256;
    double *b = realloc(a->v, cap * sizeof *b);
    if (!b) return HS_ENOMEM;
    a->v = b;
    a->cap = cap;
  }
  a->v[a->n++] = x;
  return 0;
}

static void dvec_free(dvec *a) {
  free(a->v);
  memset(a, 0, sizeof *a);
}

static int oom(report *r) { return hs_diag_set(r->d, HS_ENOMEM, "out of memory"); }

/* ---- loading ------------------------------------------------------------------------------ */

static int load_run(report *r, run_row *run) {
  hs_rows *st = NULL;
  int rc = prep(r, HS_REPORT_RUN, run->id, 0, &st);
  if (rc) return rc;
  int step = hs_rows_next(st, &r->qd);
  if (step != 1) {
    hs_rows_close(st);
    return step == 0 ? hs_diag_set(r->d, HS_ENOTFOUND, "no run %lld", (long long)run->id)
                               : db_error(r, "reading a run");
  }
  run->kind = col_text(st, 0);
  run->policy = col_text(st, 1);
  run->params = col_text(st, 2);
  run->cluster = col_text(st, 3);
  run->model = col_text(st, 4);
  run->status = col_text(st, 5);
  run->error = col_text(st, 6);
  run->global_batch = hs_rows_int(st, 7);
  run->has_summary = (int)hs_rows_int(st, 8);
  run->workers = col_real(st, 9);
  run->iterations = col_real(st, 10);
  run->samples = col_real(st, 11);
  run->sim_time_s = col_real(st, 12);
  run->mean_iteration_s = col_real(st, 13);
  run->samples_per_s = col_real(st, 14);
  run->wait_fraction = col_real(st, 15);
  run->final_loss = col_real(st, 16);
  run->final_accuracy = col_real(st, 17);
  run->time_to_target_s = col_real(st, 18);
  run->nworkers = hs_rows_int(st, 19);
  run->nsteps = hs_rows_int(st, 20);
  run->nevals = hs_rows_int(st, 21);
  run->store = col_text(st, 22);
  run->target_loss = col_real(st, 23);
  run->target_accuracy = col_real(st, 24);
  if (!(run->target_loss > 0)) run->target_loss = NAN;
  if (!(run->target_accuracy > 0)) run->target_accuracy = NAN;
  run->group = col_text(st, 25);
  run->cluster_text = col_text(st, 26);
  hs_rows_close(st);
  if (!run->kind || !run->policy || !run->status || !run->group) return oom(r);
  return 0;
}

/* Whether the "k=v" item of length len appears among params (comma-separated). */
static int has_item(const char *params, const char *item, size_t len) {
  for (const char *p = params; p && *p;) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == len && strncmp(p, item, len) == 0) return 1;
    p = e ? e + 1 : NULL;
  }
  return 0;
}

/* A run's name on plots: "#ID policy", plus the parameters that differ from another shown
 * run of the same policy ("#4 ssp:s=4"), since the canonical parameter list is long and the
 * table below has it whole. */
static void make_label(report *r, run_row *run) {
  size_t o = (size_t)snprintf(run->label, sizeof run->label, "#%lld %s", (long long)run->id, run->policy);
  char sep = ':';
  for (const char *p = run->params; p && *p;) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    int differs = 0;
    for (int k = 0; k < r->nruns; k++) {
      const run_row *q = &r->runs[k];
      if (q != run && q->policy && strcmp(q->policy, run->policy) == 0 && !has_item(q->params, p, n))
        differs = 1;
    }
    if (differs) {
      char item[256], shown[256];
      snprintf(item, sizeof item, "%.*s", (int)(n < sizeof item ? n : sizeof item - 1), p);
      hs_fmt_params(item, ",", shown, sizeof shown);
      if (o + strlen(shown) + 2 < sizeof run->label) {
        o += (size_t)snprintf(run->label + o, sizeof run->label - o, "%c%s", sep, shown);
        sep = ',';
      }
    }
    p = e ? e + 1 : NULL;
  }
}

static void free_run(run_row *run) {
  free(run->kind);
  free(run->policy);
  free(run->params);
  free(run->cluster);
  free(run->model);
  free(run->status);
  free(run->error);
  free(run->store);
  free(run->group);
  free(run->cluster_text);
}

/* Why a run has no step rows, for the notes under the step-based plots. */
static const char *why_no_steps(const run_row *run) {
  if (run->store && strcmp(run->store, "summary") == 0) return "stored with --store summary";
  if (strcmp(run->status, "complete") != 0) return "the run did not finish its first batch of rows";
  return "no step rows stored";
}

/* ---- comparison ----------------------------------------------------------------------------- */

static void section_compare(report *r) {
  hs_html_heading(r->f, "compare", "Runs and policies");
  /* Fifteen columns within the page: the kind and (when not complete) the status share the run's
   * cell, reals show 4 significant digits (`hetsim query run ID` shows them whole), and only the
   * parameter list may break inside a word. */
  static const char *const head[] = {
      "run", "policy", "params", "cluster", "model", "global batch", "workers", "iterations",
      "time (s)", "mean iteration (s)", "samples/s", "wait fraction", "final loss",
      "final accuracy", "time to target (s)"};
  hs_html_table_begin(r->f, head, (int)(sizeof head / sizeof head[0]));
  int incomplete = 0;
  for (int i = 0; i < r->nruns; i++) {
    const run_row *run = &r->runs[i];
    char b[16][48];
    int bad = strcmp(run->status, "complete") != 0;
    incomplete += bad;
    hs_html_row_begin(r->f, bad ? "warn" : NULL);
    snprintf(b[0], sizeof b[0], "%lld %s%s%s", (long long)run->id, run->kind, bad ? ", " : "", bad ? run->status : "");
    hs_html_cell(r->f, b[0]);
    hs_html_cell(r->f, run->policy);
    /* A space after each comma lets the long canonical list wrap in its cell; reals in their
     * shortest exact form (0.05, not 0.050000000000000003). */
    char params[1024] = "";
    hs_fmt_params(run->params, ", ", params, sizeof params);
    hs_html_cell_class(r->f, "params", params);
    hs_html_cell(r->f, run->cluster);
    hs_html_cell(r->f, run->model);
    hs_html_cell(r->f, num_short(b[1], sizeof b[1], (double)run->global_batch));
    hs_html_cell(r->f, num_short(b[2], sizeof b[2], run->has_summary ? run->workers : (double)run->nworkers));
    hs_html_cell(r->f, num_short(b[3], sizeof b[3], run->iterations));
    hs_html_cell(r->f, num_short(b[4], sizeof b[4], run->sim_time_s));
    hs_html_cell(r->f, num_short(b[5], sizeof b[5], run->mean_iteration_s));
    hs_html_cell(r->f, num_short(b[6], sizeof b[6], run->samples_per_s));
    hs_html_cell(r->f, num_short(b[7], sizeof b[7], run->wait_fraction));
    hs_html_cell(r->f, num_short(b[8], sizeof b[8], run->final_loss));
    hs_html_cell(r->f, num_short(b[9], sizeof b[9], run->final_accuracy));
    hs_html_cell(r->f, num_short(b[10], sizeof b[10], run->time_to_target_s));
    hs_html_row_end(r->f);
  }
  hs_html_table_end(r->f);
  if (incomplete)
    hs_html_para(r->f, "warn",
                 "%d of these runs did not complete (highlighted, their status beside their ID): \"running\" means still going or "
                 "stopped without finishing (a crash, kill -9), \"interrupted\" stopped by SIGINT, "
                 "\"failed\" ended with an error. Their numbers cover only what was stored.",
                 incomplete);
  for (int i = 0; i < r->nruns; i++)
    if (r->runs[i].error) hs_html_para(r->f, "warn", "Run %lld failed: %s", (long long)r->runs[i].id, r->runs[i].error);

  const char **labels = malloc((size_t)r->nruns * sizeof *labels);
  double *v = malloc((size_t)r->nruns * 2 * sizeof *v);
  int *colors = malloc((size_t)r->nruns * sizeof *colors);
  if (!labels || !v || !colors) {
    free(labels), free(v), free(colors);
    return;
  }
  for (int i = 0; i < r->nruns; i++) {
    labels[i] = r->runs[i].label;
    v[i] = r->runs[i].samples_per_s;
    v[r->nruns + i] = r->runs[i].wait_fraction;
    colors[i] = r->runs[i].color;
  }
  int h = 60 + 26 * r->nruns;
  hs_svg_frame a = {.kind = "bars", .title = "Throughput", .xlabel = "samples per second",
                    .width = 520, .height = h};
  hs_svg_frame b = {.kind = "bars", .title = "Share of worker time waiting",
                    .xlabel = "wait fraction", .width = 520, .height = h};
  fputs("<div class=\"plots\">\n", r->f);
  hs_svg_bars(r->f, &a, labels, v, colors, r->nruns);
  hs_svg_bars(r->f, &b, labels, v + r->nruns, colors, r->nruns);
  fputs("</div>\n", r->f);
  free(labels), free(v), free(colors);
}

/* ---- time to target ------------------------------------------------------------------------ */

typedef struct ttt_bar {
  char label[128];
  double mean, lo, hi;
  int color, runs, reached;
  char note[64];
} ttt_bar;

static int ttt_cmp(const void *pa, const void *pb) {
  const ttt_bar *a = pa, *b = pb;
  if (isnan(a->mean) != isnan(b->mean)) return isnan(a->mean) ? 1 : -1;
  if (a->mean < b->mean) return -1;
  if (a->mean > b->mean) return 1;
  return 0;
}

/* The page's first view: how long each run took to its target, fastest first. Runs that differ
 * only in their seed make one bar, their mean, with a whisker from the fastest to the slowest
 * seed. Only when some run had a target. */
static int section_ttt(report *r) {
  int any = 0;
  for (int i = 0; i < r->nruns; i++)
    any |= isfinite(r->runs[i].target_loss) || isfinite(r->runs[i].target_accuracy) ||
           isfinite(r->runs[i].time_to_target_s);
  if (!any) return 0;
  hs_html_heading(r->f, "target", "Time to target");
  ttt_bar *b = calloc((size_t)r->nruns, sizeof *b);
  int *owner = calloc((size_t)r->nruns, sizeof *owner);
  if (!b || !owner) {
    free(b), free(owner);
    return oom(r);
  }
  int nb = 0, grouped = 0;
  for (int i = 0; i < r->nruns; i++) {
    const run_row *run = &r->runs[i];
    int g = -1;
    for (int k = 0; k < i && g < 0; k++)
      if (!strcmp(r->runs[k].group, run->group)) g = owner[k];
    if (g < 0) {
      g = nb++;
      b[g].color = run->color;
      b[g].mean = b[g].lo = b[g].hi = NAN;
      const char *sp = strchr(run->label, ' ');
      snprintf(b[g].label, sizeof b[g].label, "%s", sp ? sp + 1 : run->label);
    } else {
      grouped = 1;
    }
    owner[i] = g;
    b[g].runs++;
    double t = run->time_to_target_s;
    if (isfinite(t)) {
      b[g].mean = isfinite(b[g].mean) ? b[g].mean + t : t;
      b[g].lo = isfinite(b[g].lo) ? fmin(b[g].lo, t) : t;
      b[g].hi = isfinite(b[g].hi) ? fmax(b[g].hi, t) : t;
      b[g].reached++;
    }
  }
  for (int g = 0; g < nb; g++) {
    if (b[g].reached) b[g].mean /= b[g].reached;
    size_t l = strlen(b[g].label);
    if (!grouped) {
      /* One bar per run: name it by its id as the other plots do. */
      for (int i = 0; i < r->nruns; i++)
        if (owner[i] == g) snprintf(b[g].label, sizeof b[g].label, "%s", r->runs[i].label);
    } else if (b[g].runs > 1 && l + 24 < sizeof b[g].label) {
      if (b[g].reached == b[g].runs) snprintf(b[g].label + l, sizeof b[g].label - l, " (%d runs)", b[g].runs);
      else snprintf(b[g].label + l, sizeof b[g].label - l, " (%d of %d)", b[g].reached, b[g].runs);
    }
    snprintf(b[g].note, sizeof b[g].note, "not reached%s", b[g].runs > 1 ? " in any run" : "");
  }
  qsort(b, (size_t)nb, sizeof *b, ttt_cmp);
  const char **labels = calloc((size_t)nb, sizeof *labels), **notes = calloc((size_t)nb, sizeof *notes);
  double *v = calloc((size_t)nb * 3, sizeof *v);
  int *colors = calloc((size_t)nb, sizeof *colors);
  int rc = 0;
  if (!labels || !notes || !v || !colors) {
    rc = oom(r);
  } else {
    for (int g = 0; g < nb; g++) {
      labels[g] = b[g].label;
      notes[g] = b[g].note;
      v[g] = b[g].mean;
      v[nb + g] = b[g].lo;
      v[2 * nb + g] = b[g].hi;
      colors[g] = b[g].color;
    }
    hs_svg_frame fr = {.kind = "time-to-target", .title = "Time to target, fastest first",
                       .xlabel = "time to target (s)", .width = 1000, .height = 60 + 26 * nb};
    hs_svg_bars_range(r->f, &fr, labels, v, v + nb, v + 2 * nb, notes, colors, nb);
    if (grouped)
      hs_html_para(r->f, "note",
                   "Runs that differ only in their seed make one bar: the mean time over the runs "
                   "that reached the target, the whisker from the fastest to the slowest of them; "
                   "\"(k of n)\": only k of the n runs reached it.");
    else
      hs_html_para(r->f, "note", "Simulated (or, for real runs, measured) time to the first evaluation "
                                 "that met the run's target.");
  }
  free(labels), free(notes), free(v), free(colors), free(b), free(owner);
  return rc;
}

/* ---- progress ------------------------------------------------------------------------------- */

/* Samples of finished steps against the time each step's work ended, thinned to at most
 * CURVE_MAX_POINTS points (every k-th, plus the last). */
static int load_progress(report *r, const run_row *run, dvec *x, dvec *y) {
  hs_rows *st = NULL;
  int rc = prep(r, HS_REPORT_PROGRESS, run->id, 0, &st);
  if (rc) return rc;
  int64_t stride = run->nsteps / CURVE_MAX_POINTS + 1, i = 0;
  double total = 0.0, t = 0.0;
  int step;
  rc = dvec_push(x, 0.0) || dvec_push(y, 0.0) ? HS_ENOMEM : 0;
  while (!rc && (step = hs_rows_next(st, &r->qd)) == 1) {
    t = hs_rows_real(st, 0);
    total += hs_rows_real(st, 1);
    if (++i % stride == 0 && (dvec_push(x, t) || dvec_push(y, total))) rc = HS_ENOMEM;
  }
  if (!rc && step != 0) rc = db_error(r, "reading step rows");
  if (!rc && i % stride != 0 && (dvec_push(x, t) || dvec_push(y, total))) rc = HS_ENOMEM;
  if (rc == HS_ENOMEM) oom(r);
  hs_rows_close(st);
  return rc;
}

static int section_progress(report *r) {
  hs_html_heading(r->f, "progress", "Progress against time");
  hs_svg_series *s = calloc((size_t)r->nruns, sizeof *s);
  dvec *xs = calloc((size_t)r->nruns * 2, sizeof *xs);
  if (!s || !xs) {
    free(s), free(xs);
    return oom(r);
  }
  int ns = 0, rc = 0;
  for (int i = 0; i < r->nruns && !rc; i++) {
    const run_row *run = &r->runs[i];
    if (run->nsteps == 0) {
      hs_html_para(r->f, "note", "Run %lld: no curve (%s).", (long long)run->id, why_no_steps(run));
      continue;
    }
    rc = load_progress(r, run, &xs[2 * i], &xs[2 * i + 1]);
    s[ns++] = (hs_svg_series){.label = run->label, .x = xs[2 * i].v, .y = xs[2 * i + 1].v,
                              .n = xs[2 * i].n, .steps = 1, .color = run->color};
  }
  if (!rc && ns) {
    hs_svg_frame fr = {.kind = "progress", .title = "Samples processed",
                       .xlabel = "time (s)", .ylabel = "samples", .width = 1000, .height = 320};
    hs_svg_lines(r->f, &fr, s, ns);
    hs_html_para(r->f, "note", "Each step counts at the end of its communication (its compute when it had none).");
  }
  for (int i = 0; i < r->nruns * 2; i++) dvec_free(&xs[i]);
  free(xs);
  free(s);
  return rc;
}

/* ---- the cluster ---------------------------------------------------------------------------- */

/* The run's cluster file parsed, or HS_ENOTFOUND when the run has none (real runs), or the
 * parser's error. On 0 the caller frees spec. */
static int parse_cluster(const run_row *run, hs_cluster_spec *spec) {
  memset(spec, 0, sizeof *spec);
  if (!run->cluster_text) return HS_ENOTFOUND;
  hs_diag d = {0};
  int rc = hs_cluster_parse(spec, run->cluster ? run->cluster : "cluster", run->cluster_text,
                            strlen(run->cluster_text), &d);
  if (rc) hs_cluster_spec_free(spec);
  return rc;
}

/* One line of a cluster's table: the workers of one device type on one node. */
typedef struct comp_row {
  char node[HS_NAME_MAX], type[HS_NAME_MAX];
  int64_t count, first, last; /* workers, and the first and last worker index */
} comp_row;

/* What a run ran on: from its worker rows (which include workers that joined during the run),
 * else from its cluster file. *n is 0 when neither says. */
static int load_composition(report *r, const run_row *run, const hs_cluster_spec *spec,
                            comp_row **out, int *n) {
  *out = NULL;
  *n = 0;
  hs_rows *st = NULL;
  int rc = prep(r, HS_REPORT_COMPOSITION, run->id, 0, &st);
  if (rc) return rc;
  int step;
  while (!rc && (step = hs_rows_next(st, &r->qd)) == 1) {
    comp_row *b = realloc(*out, (size_t)(*n + 1) * sizeof *b);
    if (!b) {
      rc = oom(r);
      break;
    }
    *out = b;
    comp_row *c = &b[(*n)++];
    snprintf(c->node, sizeof c->node, "%s", hs_rows_text(st, 0, NULL));
    snprintf(c->type, sizeof c->type, "%s", hs_rows_text(st, 1, NULL));
    c->count = hs_rows_int(st, 2);
    c->first = hs_rows_int(st, 3);
    c->last = hs_rows_int(st, 4);
  }
  if (!rc && step != 0) rc = db_error(r, "reading worker rows");
  hs_rows_close(st);
  if (rc || *n || !spec) return rc;
  /* No worker rows: the cluster file's workers, in file order (runs of one type on one node). */
  for (int w = 0; w < spec->n_workers; w++) {
    const hs_worker_spec *ws = &spec->workers[w];
    comp_row *last = *n ? &(*out)[*n - 1] : NULL;
    if (last && last->last == w - 1 && !strcmp(last->node, spec->nodes[ws->node].name) &&
        !strcmp(last->type, spec->types[ws->type].name)) {
      last->count++;
      last->last = w;
      continue;
    }
    comp_row *b = realloc(*out, (size_t)(*n + 1) * sizeof *b);
    if (!b) return oom(r);
    *out = b;
    comp_row *c = &b[(*n)++];
    snprintf(c->node, sizeof c->node, "%s", spec->nodes[ws->node].name);
    snprintf(c->type, sizeof c->type, "%s", spec->types[ws->type].name);
    c->count = 1;
    c->first = c->last = w;
  }
  return 0;
}

/* The compute numbers a device type gives `model`, and whether they were measured. */
static void compute_text(hs_device_type *t, const char *model, char *buf, size_t n) {
  hs_compute_spec *c = hs_cluster_compute_pick(t, model);
  char a[32], b[32];
  switch (c ? c->kind : HS_COMPUTE_NONE) {
  case HS_COMPUTE_INLINE:
    snprintf(buf, n, "inline: %s + %s per sample", hs_units_format_time(c->t0, a, sizeof a),
             hs_units_format_time(c->per_sample, b, sizeof b));
    break;
  case HS_COMPUTE_ROOFLINE: {
    char eff[32];
    hs_fmt_real(eff, sizeof eff, c->efficiency);
    snprintf(buf, n, "roofline: %.4g TFLOPS x %s, t0 %s", c->flops / 1e12, eff,
             hs_units_format_time(c->t0, a, sizeof a));
    break;
  }
  case HS_COMPUTE_CALIB: snprintf(buf, n, "calibrated: %s", c->calib); break;
  case HS_COMPUTE_PROFILE: snprintf(buf, n, "profile: %s", c->profile); break;
  default: snprintf(buf, n, "none for %s", model ? model : "the model"); break;
  }
}

static void link_text(const hs_link_spec *l, const hs_link_calib *calib, char *buf, size_t n) {
  char a[32], b[32];
  if (calib && calib->name[0])
    snprintf(buf, n, "measured: %s%s%s", calib->name, calib->backend[0] ? ", backend " : "", calib->backend);
  else snprintf(buf, n, "%s, %s latency", hs_units_format_bandwidth(l->bandwidth, a, sizeof a),
                hs_units_format_time(l->latency, b, sizeof b));
}

/* What makes two runs' cluster tables the same: the cluster's name and file, the model (for
 * the compute numbers) and the workers. *key is malloc'ed. */
static int cluster_key(report *r, const run_row *run, char **key) {
  hs_cluster_spec spec;
  int have = parse_cluster(run, &spec) == 0;
  comp_row *c = NULL;
  int nc = 0;
  int rc = load_composition(r, run, have ? &spec : NULL, &c, &nc);
  if (have) hs_cluster_spec_free(&spec);
  size_t klen = strlen(run->cluster ? run->cluster : "") + strlen(run->cluster_text ? run->cluster_text : "") +
                strlen(run->model ? run->model : "") + (size_t)nc * (2 * HS_NAME_MAX + 64) + 8;
  *key = rc ? NULL : malloc(klen);
  if (!rc && !*key) rc = oom(r);
  if (!rc) {
    size_t o = (size_t)snprintf(*key, klen, "%s\x1f%s\x1f%s", run->cluster ? run->cluster : "",
                                run->cluster_text ? run->cluster_text : "", run->model ? run->model : "");
    for (int k = 0; k < nc; k++)
      o += (size_t)snprintf(*key + o, klen - o, "\x1f%s/%s/%lld/%lld", c[k].node, c[k].type,
                            (long long)c[k].first, (long long)c[k].last);
  }
  free(c);
  return rc;
}

/* The table of run's cluster, for the runs listed in who. */
static int cluster_table(report *r, const run_row *run, const char *who, int count) {
  hs_cluster_spec spec;
  int have = parse_cluster(run, &spec) == 0;
  comp_row *c = NULL;
  int nc = 0;
  int rc = load_composition(r, run, have ? &spec : NULL, &c, &nc);
  if (rc) {
    if (have) hs_cluster_spec_free(&spec);
    return rc;
  }
  int64_t workers = 0;
  int ntypes = 0, nnodes = 0;
  for (int k = 0; k < nc; k++) {
    workers += c[k].count;
    int tseen = 0, nseen = 0;
    for (int j = 0; j < k; j++) {
      tseen |= !strcmp(c[j].type, c[k].type);
      nseen |= !strcmp(c[j].node, c[k].node);
    }
    ntypes += !tseen;
    nnodes += !nseen;
  }
  fprintf(r->f, "<h3>");
  hs_html_escape(r->f, run->cluster ? run->cluster : "(unnamed cluster)");
  fprintf(r->f, "</h3>\n");
  char net[224] = "";
  if (have && nnodes > 1) {
    char l[192];
    link_text(&spec.network, &spec.network_calib, l, sizeof l);
    snprintf(net, sizeof net, "; network between nodes: %s", l);
  }
  hs_html_para(r->f, NULL, "Run%s %s (%s): %lld worker%s of %d device type%s on %d node%s%s.",
               count > 1 ? "s" : "", who, run->model ? run->model : "?", (long long)workers,
               workers == 1 ? "" : "s", ntypes, ntypes == 1 ? "" : "s", nnodes,
               nnodes == 1 ? "" : "s", net);
  if (nc) {
    /* Consecutive nodes alike in everything but their name (a big cluster's racks of one kind)
     * share one line: "n000-n047 (48 nodes)", their workers counted together. */
    static const char *const head[] = {"node", "link inside the node", "device type", "workers",
                                       "memory", "compute numbers"};
    hs_html_table_begin(r->f, head, 6);
    for (int k = 0; k < nc;) {
      char link[192] = "not stored", mem[32] = "", comp[640] = "not stored", wk[96], nodes[160];
      int ti = have ? hs_cluster_find_type(&spec, c[k].type) : -1;
      int ni = have ? hs_cluster_find_node(&spec, c[k].node) : -1;
      if (ni >= 0) link_text(&spec.nodes[ni].link, &spec.nodes[ni].link_calib, link, sizeof link);
      if (ti >= 0) {
        if (spec.types[ti].memory > 0) hs_units_format_bytes(spec.types[ti].memory, mem, sizeof mem);
        else snprintf(mem, sizeof mem, "no limit");
        compute_text(&spec.types[ti], run->model, comp, sizeof comp);
      }
      int e = k + 1;
      for (; e < nc; e++) {
        int nj = have ? hs_cluster_find_node(&spec, c[e].node) : -1;
        char other[192] = "not stored";
        if (nj >= 0) link_text(&spec.nodes[nj].link, &spec.nodes[nj].link_calib, other, sizeof other);
        int one_node_each = 1;
        for (int j = k; j < e; j++) one_node_each &= strcmp(c[j].node, c[e].node) != 0;
        if (strcmp(c[e].type, c[k].type) || c[e].count != c[k].count || strcmp(other, link) ||
            c[e].first != c[e - 1].last + 1 || !one_node_each)
          break;
      }
      int64_t nwk = 0;
      for (int j = k; j < e; j++) nwk += c[j].count;
      if (e - k > 1) {
        snprintf(nodes, sizeof nodes, "%s-%s (%d nodes)", c[k].node, c[e - 1].node, e - k);
        snprintf(wk, sizeof wk, "%lld per node, %lld (w%lld-w%lld)", (long long)c[k].count,
                 (long long)nwk, (long long)c[k].first, (long long)c[e - 1].last);
      } else {
        snprintf(nodes, sizeof nodes, "%s", c[k].node);
        if (nwk > 1 && nwk == c[k].last - c[k].first + 1)
          snprintf(wk, sizeof wk, "%lld (w%lld-w%lld)", (long long)nwk, (long long)c[k].first,
                   (long long)c[k].last);
        else if (nwk == 1)
          snprintf(wk, sizeof wk, "1 (w%lld)", (long long)c[k].first);
        else
          snprintf(wk, sizeof wk, "%lld", (long long)nwk);
      }
      hs_html_row_begin(r->f, NULL);
      hs_html_cell(r->f, nodes);
      hs_html_cell(r->f, link);
      hs_html_cell(r->f, c[k].type);
      hs_html_cell(r->f, wk);
      hs_html_cell(r->f, mem);
      hs_html_cell(r->f, comp);
      hs_html_row_end(r->f);
      k = e;
    }
    hs_html_table_end(r->f);
  }
  if (!have)
    hs_html_para(r->f, "note", "%s",
                 run->cluster_text ? "The stored cluster file no longer parses; links and device numbers are not shown."
                                   : "A real run stores no cluster file: its workers are as the run recorded them; "
                                     "their links and device numbers are not described here.");
  free(c);
  if (have) hs_cluster_spec_free(&spec);
  return 0;
}

/* One table per distinct cluster among the runs: its nodes, the link inside each, and the
 * device types on them with their worker counts, memory and compute numbers. */
static int section_clusters(report *r) {
  hs_html_heading(r->f, "cluster", "Clusters");
  char **keys = calloc((size_t)r->nruns, sizeof *keys);
  if (!keys) return oom(r);
  int rc = 0;
  for (int i = 0; i < r->nruns && !rc; i++) rc = cluster_key(r, &r->runs[i], &keys[i]);
  for (int i = 0; i < r->nruns && !rc; i++) {
    int seen = 0;
    for (int k = 0; k < i; k++) seen |= !strcmp(keys[k], keys[i]);
    if (seen) continue;
    char who[256];
    size_t o = 0;
    int count = 0;
    for (int k = i; k < r->nruns && o < sizeof who - 24; k++)
      if (!strcmp(keys[k], keys[i])) {
        o += (size_t)snprintf(who + o, sizeof who - o, "%s%lld", count ? ", " : "", (long long)r->runs[k].id);
        count++;
      }
    rc = cluster_table(r, &r->runs[i], who, count);
  }
  for (int i = 0; i < r->nruns; i++) free(keys[i]);
  free(keys);
  return rc;
}

/* ---- workers ------------------------------------------------------------------------------- */

/* Names of a run's first nw workers for row labels and legends: "w2 m40 (server0)", the
 * device type and node from the worker table, or "w2" when it has no row for the worker. */
typedef char worker_name[160];

static int load_worker_names(report *r, const run_row *run, int nw, worker_name *names, int *longest) {
  for (int w = 0; w < nw; w++) snprintf(names[w], sizeof names[w], "w%d", w);
  /* The cluster file first (a run without worker rows still has it), the worker table over
   * it (it also knows workers that joined during the run). */
  hs_cluster_spec spec;
  if (parse_cluster(run, &spec) == 0) {
    for (int w = 0; w < nw && w < spec.n_workers; w++)
      snprintf(names[w], sizeof names[w], "w%d %s (%s)", w, spec.types[spec.workers[w].type].name,
               spec.nodes[spec.workers[w].node].name);
    hs_cluster_spec_free(&spec);
  }
  hs_rows *st = NULL;
  int rc = prep(r, HS_REPORT_WORKER_NAMES, run->id, nw, &st);
  if (rc) return rc;
  int step;
  while ((step = hs_rows_next(st, &r->qd)) == 1) {
    int w = (int)hs_rows_int(st, 0);
    const char *type = hs_rows_text(st, 1, NULL), *node = hs_rows_text(st, 2, NULL);
    if (w < 0 || w >= nw) continue;
    if (type && node) snprintf(names[w], sizeof names[w], "w%d %s (%s)", w, type, node);
    else if (type) snprintf(names[w], sizeof names[w], "w%d %s", w, type);
  }
  if (step != 0) rc = db_error(r, "reading worker rows");
  hs_rows_close(st);
  *longest = 0;
  for (int w = 0; w < nw; w++)
    if ((int)strlen(names[w]) > *longest) *longest = (int)strlen(names[w]);
  return rc;
}

/* Room left of a plot for row labels of `chars` characters. */
static int label_margin(int chars) {
  int m = 12 + 6 * chars;
  return m < 64 ? 64 : m > 240 ? 240 : m;
}

/* ---- batch sizes -------------------------------------------------------------------------- */

/* Keeps every other point of a curve after its first (the thinning of load_batches). */
static void halve(dvec *x, dvec *y) {
  size_t k = 1;
  for (size_t i = 2; i < x->n; i += 2, k++) {
    x->v[k] = x->v[i];
    y->v[k] = y->v[i];
  }
  x->n = y->n = k;
}

/* Each of a run's first nw workers' batch against time, as a step function: a point where the
 * batch changed (at that step's start) and one at the worker's last end. A worker whose batch
 * changed more than 2 * CURVE_MAX_POINTS times keeps every k-th change. *changes counts the
 * changes over all workers. One pass in the table's key order (no sort). */
static int load_batches(report *r, const run_row *run, int nw, dvec *x, dvec *y, int64_t *changes) {
  hs_rows *st = NULL;
  int rc = prep(r, HS_REPORT_BATCHES, run->id, nw, &st);
  if (rc) return rc;
  *changes = 0;
  double *last_b = malloc((size_t)nw * sizeof *last_b), *last_end = malloc((size_t)nw * sizeof *last_end);
  int64_t *stride = malloc((size_t)nw * sizeof *stride), *seen = calloc((size_t)nw, sizeof *seen);
  if (!last_b || !last_end || !stride || !seen) rc = oom(r);
  for (int w = 0; !rc && w < nw; w++) last_b[w] = NAN, stride[w] = 1;
  int step;
  while (!rc && (step = hs_rows_next(st, &r->qd)) == 1) {
    int w = (int)hs_rows_int(st, 0);
    if (w < 0 || w >= nw) continue;
    double t = hs_rows_real(st, 1), b = hs_rows_real(st, 3);
    last_end[w] = hs_rows_real(st, 2);
    if (b == last_b[w]) continue;
    if (!isnan(last_b[w])) ++*changes;
    last_b[w] = b;
    if (seen[w]++ % stride[w] != 0) continue;
    if (dvec_push(&x[w], t) || dvec_push(&y[w], b)) rc = oom(r);
    if (x[w].n >= 2 * CURVE_MAX_POINTS) {
      halve(&x[w], &y[w]);
      stride[w] *= 2;
    }
  }
  if (!rc && step != 0) rc = db_error(r, "reading step rows");
  for (int w = 0; !rc && w < nw; w++)
    if (x[w].n && (dvec_push(&x[w], last_end[w]) || dvec_push(&y[w], last_b[w]))) rc = oom(r);
  hs_rows_close(st);
  free(last_b);
  free(last_end);
  free(stride);
  free(seen);
  return rc;
}

/* Per-worker batch sizes against time: what LBB, predbatch and dbs change. One plot per run
 * whose batches changed, one line for runs whose workers kept their first batch. */
static int section_batches(report *r) {
  hs_html_heading(r->f, "batches", "Batch sizes over time");
  hs_html_para(r->f, "note",
               "Samples in each worker's step against the step's start, one line per worker (a "
               "step function: a batch holds until the worker's next change).");
  fputs("<div class=\"plots\">\n", r->f);
  /* The runs without a plot get a line each, under the plots. */
  char **fixed = calloc((size_t)r->nruns, sizeof *fixed);
  int rc = fixed ? 0 : oom(r), plots = 0;
  for (int i = 0; i < r->nruns && !rc; i++) {
    const run_row *run = &r->runs[i];
    if (run->nsteps == 0) continue;
    int nw = (int)(run->nworkers < TIMELINE_MAX_WORKERS ? run->nworkers : TIMELINE_MAX_WORKERS);
    if (nw < 1) nw = TIMELINE_MAX_WORKERS;
    dvec *d = calloc((size_t)nw * 2, sizeof *d);
    worker_name *names = malloc((size_t)nw * sizeof *names);
    hs_svg_series *s = calloc((size_t)nw, sizeof *s);
    int64_t changes = 0;
    int longest;
    rc = d && names && s ? load_batches(r, run, nw, d, d + nw, &changes) : oom(r);
    if (!rc) rc = load_worker_names(r, run, nw, names, &longest);
    int ns = 0;
    /* Workers with equal batches would hide each other's lines: each is nudged a little. */
    for (int w = 0; !rc && w < nw; w++)
      if (d[w].n) s[ns++] = (hs_svg_series){.label = names[w], .x = d[w].v, .y = d[nw + w].v,
                                            .n = d[w].n, .steps = 1, .color = w,
                                            .nudge_px = 2.0 * (w % 4) - 3.0};
    if (!rc && changes && ns) {
      char title[160];
      snprintf(title, sizeof title, "%s: batch per worker", run->label);
      hs_svg_frame fr = {.kind = "batches", .title = title, .xlabel = "time (s)",
                         .ylabel = "samples per step", .width = 490, .height = 280, .y_from_zero = 1};
      hs_svg_lines(r->f, &fr, s, ns);
      plots++;
    } else if (!rc && ns && (fixed[i] = malloc(600)) != NULL) {
      /* Workers in a row with the same batch as one item: "w0-w7 56, w8-w15 72". */
      size_t o = 0;
      for (int w = 0, from = -1; w <= nw; w++) {
        int has = w < nw && d[w].n;
        if (from >= 0 && (!has || d[nw + w].v[0] != d[nw + from].v[0])) {
          if (o < 600 - 48)
            o += (size_t)(w - 1 > from ? snprintf(fixed[i] + o, 600 - o, "%sw%d-w%d %.0f", o ? ", " : "", from, w - 1, d[nw + from].v[0])
                                       : snprintf(fixed[i] + o, 600 - o, "%sw%d %.0f", o ? ", " : "", from, d[nw + from].v[0]));
          from = -1;
        }
        if (has && from < 0) from = w;
      }
    } else if (!rc && ns) {
      rc = oom(r);
    }
    for (int k = 0; d && k < nw * 2; k++) dvec_free(&d[k]);
    free(d);
    free(names);
    free(s);
  }
  fputs("</div>\n", r->f);
  if (plots)
    hs_html_para(r->f, "note", "Lines are drawn up to 3 px apart so that workers with equal batches "
                               "stay visible.");
  for (int i = 0; i < r->nruns && !rc; i++) {
    if (r->runs[i].nsteps == 0)
      hs_html_para(r->f, "note", "Run %lld: no batch sizes (%s).", (long long)r->runs[i].id, why_no_steps(&r->runs[i]));
    else if (fixed[i])
      hs_html_para(r->f, "note", "Run %s: every worker kept its first batch (%s).", r->runs[i].label, fixed[i]);
  }
  for (int i = 0; fixed && i < r->nruns; i++) free(fixed[i]);
  free(fixed);
  if (!rc)
    for (int i = 0; i < r->nruns; i++)
      if (r->runs[i].nworkers > TIMELINE_MAX_WORKERS) {
        hs_html_para(r->f, "note", "Runs with more than %d workers show their first %d.",
                     TIMELINE_MAX_WORKERS, TIMELINE_MAX_WORKERS);
        break;
      }
  return rc;
}

/* ---- timelines ------------------------------------------------------------------------------ */

enum { SPAN_COMPUTE = 0, SPAN_COMM = 1, SPAN_WAIT = 2, SPAN_KINDS = 3 };

/* A step row's spans: the wait before the step started (since the worker's previous record
 * ended at prev), its compute, the rest of its wait right after the compute, then its
 * communication. The row says how long the worker idled, not where inside the step; after the
 * compute is where a synchronous policy idles (its barrier before the exchange). Returns the
 * number of spans written (at most 4). */
static int step_spans(int w, double prev, double start, double cend, double end, double wait,
                      hs_svg_span *out) {
  int n = 0;
  if (!isfinite(wait) || wait < 0) wait = 0;
  double pre = isfinite(prev) ? fmin(fmax(start - prev, 0.0), wait) : 0.0;
  double in = wait - pre;
  if (pre > 0) out[n++] = (hs_svg_span){.row = w, .kind = SPAN_WAIT, .t0 = start - pre, .t1 = start};
  out[n++] = (hs_svg_span){.row = w, .kind = SPAN_COMPUTE, .t0 = start, .t1 = cend};
  double cs = cend;
  if (in > 0 && cend + in <= end + 1e-12) {
    out[n++] = (hs_svg_span){.row = w, .kind = SPAN_WAIT, .t0 = cend, .t1 = cend + in};
    cs = cend + in;
  }
  if (end > cs) out[n++] = (hs_svg_span){.row = w, .kind = SPAN_COMM, .t0 = cs, .t1 = end};
  return n;
}

/* Reads a run's step rows of its first nw workers in the table's key order (step, then
 * worker: no sort), keeping each worker's previous end for step_spans, as LAG would but without
 * sorting the whole run. A worker's first row follows its join time. */
typedef struct span_reader {
  hs_rows *st;
  int nw;
  double *prev;               /* per worker: the end of its previous row, s */
} span_reader;

static int span_reader_open(report *r, const run_row *run, int nw, span_reader *sr) {
  sr->nw = nw;
  sr->st = NULL;
  sr->prev = malloc((size_t)nw * sizeof *sr->prev);
  if (!sr->prev) return oom(r);
  for (int w = 0; w < nw; w++) sr->prev[w] = NAN;
  hs_rows *st = NULL;
  int rc = prep(r, HS_REPORT_WORKER_JOINS, run->id, nw, &st);
  if (rc) return rc;
  int step;
  while ((step = hs_rows_next(st, &r->qd)) == 1) {
    int w = (int)hs_rows_int(st, 0);
    if (w >= 0 && w < nw) sr->prev[w] = col_real(st, 1);
  }
  if (step != 0) rc = db_error(r, "reading worker rows");
  hs_rows_close(st);
  if (!rc)
    rc = prep(r, HS_REPORT_SPANS, run->id, nw, &sr->st);
  return rc;
}

/* The next row's spans (*n of them, at most 4) and its worker, start and end; 1 while there are
 * rows, 0 at the end, < 0 on a database error. */
static int span_reader_next(report *r, span_reader *sr, hs_svg_span *out, int *n, double *t0, double *t1) {
  for (;;) {
    int step = hs_rows_next(sr->st, &r->qd);
    if (step == 0) return 0;
    if (step != 1) return db_error(r, "reading step rows");
    int w = (int)hs_rows_int(sr->st, 0);
    if (w < 0 || w >= sr->nw) continue;
    double start = hs_rows_real(sr->st, 1), end = hs_rows_real(sr->st, 3);
    *n = step_spans(w, sr->prev[w], start, hs_rows_real(sr->st, 2), end, col_real(sr->st, 4), out);
    sr->prev[w] = end;
    *t0 = start;
    *t1 = end;
    return 1;
  }
}

static void span_reader_close(span_reader *sr) {
  hs_rows_close(sr->st);
  free(sr->prev);
  memset(sr, 0, sizeof *sr);
}

static const char *const span_kinds[] = {"compute", "communication", "wait"};
static const char *const span_colors[] = {"#1f77b4", "#ff7f0e", "#c8c8c8"};

/* What one pass over a run's step rows gives the timelines: the spans of the steps inside
 * [z0, z1] (at most TIMELINE_MAX_STEPS rows, for the zoomed or whole timeline) and, when share
 * is not NULL, each worker's share of each of OVERVIEW_BINS bins of [t0, t1] spent in each kind
 * (the overview). */
typedef struct timeline_data {
  double t0, t1, z0, z1;
  double *share;              /* nw * OVERVIEW_BINS * SPAN_KINDS, or NULL */
  hs_svg_span *spans;         /* up to TIMELINE_MAX_STEPS * 4 */
  size_t nspans;
  int64_t drawn;              /* step rows in spans */
} timeline_data;

static void add_shares(timeline_data *td, const hs_svg_span *sp, int n) {
  double bw = (td->t1 - td->t0) / OVERVIEW_BINS;
  for (int k = 0; k < n; k++) {
    /* Clamped as doubles: a cast of a value out of int's range is undefined. */
    int b0 = (int)fmin(fmax(floor((sp[k].t0 - td->t0) / bw), 0.0), (double)OVERVIEW_BINS);
    int b1 = (int)fmax(fmin(floor((sp[k].t1 - td->t0) / bw), OVERVIEW_BINS - 1.0), -1.0);
    for (int bin = b0; bin <= b1; bin++) {
      double lo = fmax(sp[k].t0, td->t0 + bw * bin), hi = fmin(sp[k].t1, td->t0 + bw * (bin + 1));
      if (hi > lo)
        td->share[((size_t)sp[k].row * OVERVIEW_BINS + (size_t)bin) * SPAN_KINDS + (size_t)sp[k].kind] +=
            (hi - lo) / bw;
    }
  }
}

static int timeline_scan(report *r, const run_row *run, int nw, timeline_data *td) {
  span_reader sr;
  int rc = span_reader_open(r, run, nw, &sr);
  hs_svg_span sp[4];
  int n = 0;
  double a = 0.0, b = 0.0;
  while (!rc && (rc = span_reader_next(r, &sr, sp, &n, &a, &b)) == 1) {
    rc = 0;
    if (td->share) add_shares(td, sp, n);
    if (b <= td->z0 || a >= td->z1 || td->drawn == TIMELINE_MAX_STEPS) continue;
    memcpy(td->spans + td->nspans, sp, (size_t)n * sizeof *sp);
    td->nspans += (size_t)n;
    td->drawn++;
  }
  span_reader_close(&sr);
  return rc;
}

static int timeline_height(int nw) {
  int height = 90 + (nw < 4 ? 4 : nw) * 16;
  return height > 620 ? 620 : height;
}

static int section_timeline(report *r, const run_row *run) {
  char title[160];
  snprintf(title, sizeof title, "Run %s", run->label);
  fprintf(r->f, "<h3>");
  hs_html_escape(r->f, title);
  fprintf(r->f, "</h3>\n");
  if (run->nsteps == 0) {
    hs_html_para(r->f, "note", "No timeline: %s.", why_no_steps(run));
    return 0;
  }
  /* The rows drawn, the run's time span, and its slowest worker's mean iteration (a worker's
   * time from its first start to its last end over its steps), which sizes the zoom. */
  hs_rows *st = NULL;
  int rc = prep(r, HS_REPORT_TIMELINE_BOUNDS, run->id, TIMELINE_MAX_WORKERS, &st);
  if (rc) return rc;
  if (hs_rows_next(st, &r->qd) != 1) {
    hs_rows_close(st);
    return db_error(r, "reading step rows");
  }
  int64_t rows = hs_rows_int(st, 0);
  int nw = (int)hs_rows_int(st, 1);
  double t_min = fmin(hs_rows_real(st, 2), 0.0), t_max = hs_rows_real(st, 3);
  double cycle = hs_rows_real(st, 4);
  int64_t most = hs_rows_int(st, 5);
  hs_rows_close(st);
  if (nw < 1 || rows < 1) {
    hs_html_para(r->f, "note", "No timeline: no step rows of the first %d workers.", TIMELINE_MAX_WORKERS);
    return 0;
  }
  int64_t total_workers = run->nworkers > nw ? run->nworkers : nw;
  worker_name *names = malloc((size_t)nw * sizeof *names);
  const char **labels = malloc((size_t)nw * sizeof *labels);
  int longest = 0;
  rc = names && labels ? load_worker_names(r, run, nw, names, &longest) : oom(r);
  for (int w = 0; !rc && w < nw; w++) labels[w] = names[w];
  int margin = label_margin(longest);
  /* Few steps: the whole run span by span. Else the whole run as shares of time bins, and a
   * window of a few iterations in its middle (past the start-up) span by span. */
  int whole = (most <= TIMELINE_WHOLE_STEPS && rows <= TIMELINE_MAX_STEPS) || !(t_max > t_min);
  double len = fmin(ZOOM_ITERATIONS * cycle, t_max - t_min);
  timeline_data td = {.t0 = t_min, .t1 = t_max, .z0 = whole ? t_min : (t_min + t_max) / 2 - len / 2};
  td.z1 = whole ? t_max : td.z0 + len;
  td.spans = rc ? NULL : malloc((size_t)TIMELINE_MAX_STEPS * 4 * sizeof *td.spans);
  td.share = rc || whole ? NULL : calloc((size_t)nw * OVERVIEW_BINS * SPAN_KINDS, sizeof *td.share);
  if (!rc && (!td.spans || (!whole && !td.share))) rc = oom(r);
  if (!rc) rc = timeline_scan(r, run, nw, &td);
  hs_svg_frame fr = {.kind = "timeline", .xlabel = "time (s)", .width = 1000,
                     .height = timeline_height(nw), .margin_left = margin};
  if (!rc && !whole) {
    hs_svg_frame fo = fr;
    fo.kind = "timeline-overview";
    fo.title = "The whole run: share of each time bin";
    fo.height += 16;
    hs_svg_timeline_shares(r->f, &fo, labels, nw, td.share, OVERVIEW_BINS, span_kinds, span_colors,
                           SPAN_KINDS, t_min, t_max, td.z0, td.z1);
    hs_html_para(r->f, "note",
                 "Above: the whole run, %.6g s to %.6g s, in %d bins of %.3g s; in each bin a "
                 "worker's bar is split by the share of the bin it spent computing, communicating "
                 "and waiting (blank: between records). Below: the outlined window, %.6g s to "
                 "%.6g s (about %d iterations of the slowest worker, in the middle of the run), "
                 "step by step.",
                 t_min, t_max, OVERVIEW_BINS, (t_max - t_min) / OVERVIEW_BINS, td.z0, td.z1, ZOOM_ITERATIONS);
  }
  if (!rc) {
    hs_svg_timeline(r->f, &fr, labels, nw, td.spans, td.nspans, span_kinds, span_colors, SPAN_KINDS,
                    td.z0, td.z1);
    if (td.drawn == TIMELINE_MAX_STEPS)
      hs_html_para(r->f, "note", "The window holds more than %d step rows; the first %d are drawn.",
                   TIMELINE_MAX_STEPS, TIMELINE_MAX_STEPS);
  }
  free(td.spans);
  free(td.share);
  if (!rc && total_workers > nw)
    hs_html_para(r->f, "note", "Showing workers 0-%d of %lld; the others are left out to keep the page small.",
                 nw - 1, (long long)total_workers);
  free(names);
  free(labels);
  return rc;
}

static int section_timelines(report *r) {
  hs_html_heading(r->f, "timelines", "Per-worker timelines");
  hs_html_para(r->f, "note",
               "Each row is a worker, labelled with its device type and node; blue: computing, "
               "orange: communicating, grey: waiting. A step row stores how long the worker idled, "
               "not where: idle time before the step's start (a staleness bound, a late update) is "
               "drawn there, the rest right after its compute (a barrier before the exchange).");
  int rc = 0;
  for (int i = 0; i < r->nruns && !rc; i++) rc = section_timeline(r, &r->runs[i]);
  return rc;
}

/* ---- iteration times ------------------------------------------------------------------------ */

/* A worker's iteration time: from the start of one of its steps to the start of its next, so
 * compute, communication and the wait before the next step all count. */

static int section_histograms(report *r) {
  hs_html_heading(r->f, "iterations", "Iteration-time distributions");
  hs_html_para(r->f, "note",
               "Iteration time of a worker: from the start of one of its steps to the start of its "
               "next (compute, communication and wait).");
  fputs("<div class=\"plots\">\n", r->f);
  int rc = 0;
  for (int i = 0; i < r->nruns && !rc; i++) {
    const run_row *run = &r->runs[i];
    if (run->nsteps == 0) {
      hs_html_para(r->f, "note", "Run %lld: no histogram (%s).", (long long)run->id, why_no_steps(run));
      continue;
    }
    hs_rows *st = NULL;
    rc = prep(r, HS_REPORT_CYCLES, run->id, HIST_MAX_VALUES, &st);
    if (rc) break;
    dvec v = {0};
    int step;
    while (!rc && (step = hs_rows_next(st, &r->qd)) == 1)
      if (dvec_push(&v, hs_rows_real(st, 0))) rc = oom(r);
    if (!rc && step != 0) rc = db_error(r, "reading step rows");
    hs_rows_close(st);
    if (!rc) {
      char title[160];
      snprintf(title, sizeof title, "%s (%zu iterations%s)", run->label, v.n,
               v.n == HIST_MAX_VALUES ? ", first 1000000" : "");
      int bins = (int)sqrt((double)v.n);
      bins = bins < 5 ? 5 : bins > 60 ? 60 : bins;
      hs_svg_frame fr = {.kind = "histogram", .title = title, .xlabel = "iteration time (s)",
                         .ylabel = "iterations", .width = 490, .height = 260,
                         .clip_quantile = VALID_CLIP_QUANTILE};
      size_t cut = hs_svg_histogram(r->f, &fr, v.v, v.n, bins, run->color);
      if (cut)
        hs_html_para(r->f, "note",
                     "Run %lld: %zu iteration%s far above the others (start-up) %s left out of the "
                     "histogram, whose bins end a little above the %gth percentile.",
                     (long long)run->id, cut, cut == 1 ? "" : "s", cut == 1 ? "is" : "are",
                     VALID_CLIP_QUANTILE * 100);
    }
    dvec_free(&v);
  }
  fputs("</div>\n", r->f);
  return rc;
}

/* ---- convergence ---------------------------------------------------------------------------- */

/* Eval rows of a run, thinned evenly to at most CURVE_MAX_POINTS. */
static int load_evals(report *r, int64_t id, int64_t count, dvec *t, dvec *loss, dvec *acc) {
  hs_rows *st = NULL;
  int rc = prep(r, HS_REPORT_EVALS, id, 0, &st);
  if (rc) return rc;
  int64_t stride = count / CURVE_MAX_POINTS + 1, i = 0;
  int step;
  while (!rc && (step = hs_rows_next(st, &r->qd)) == 1) {
    if (i++ % stride != 0 && i != count) continue;
    if (dvec_push(t, hs_rows_real(st, 0)) || dvec_push(loss, col_real(st, 1)) ||
        dvec_push(acc, col_real(st, 2)))
      rc = oom(r);
  }
  if (!rc && step != 0) rc = db_error(r, "reading eval rows");
  hs_rows_close(st);
  return rc;
}

static int section_convergence(report *r) {
  hs_html_heading(r->f, "convergence", "Loss and accuracy against time");
  hs_svg_series *s = calloc((size_t)r->nruns * 2, sizeof *s);
  dvec *d = calloc((size_t)r->nruns * 3, sizeof *d);
  if (!s || !d) {
    free(s), free(d);
    return oom(r);
  }
  int ns = 0, rc = 0;
  for (int i = 0; i < r->nruns && !rc; i++) {
    const run_row *run = &r->runs[i];
    if (run->nevals == 0) {
      hs_html_para(r->f, "note", "Run %lld: no convergence model (no eval rows).", (long long)run->id);
      continue;
    }
    dvec *t = &d[3 * i], *l = &d[3 * i + 1], *a = &d[3 * i + 2];
    rc = load_evals(r, run->id, run->nevals, t, l, a);
    int markers = t->n <= 60;
    s[ns] = (hs_svg_series){.label = run->label, .x = t->v, .y = l->v, .n = t->n, .markers = markers, .color = run->color};
    s[r->nruns + ns] = (hs_svg_series){.label = run->label, .x = t->v, .y = a->v, .n = t->n, .markers = markers, .color = run->color};
    ns++;
  }
  int have_loss = 0, have_acc = 0;
  for (int i = 0; i < r->nruns * 3; i += 3)
    for (size_t k = 0; k < d[i].n; k++) {
      have_loss |= isfinite(d[i + 1].v[k]);
      have_acc |= isfinite(d[i + 2].v[k]);
    }
  if (!rc && ns) {
    hs_svg_frame fl = {.kind = "loss", .title = "Loss", .xlabel = "time (s)", .ylabel = "loss",
                       .width = 490, .height = 300};
    hs_svg_frame fa = {.kind = "accuracy", .title = "Accuracy", .xlabel = "time (s)",
                       .ylabel = "accuracy", .width = 490, .height = 300};
    /* The targets as dashed lines (each distinct one), and where each run met its target a
     * ring on its curve: the evaluation at its time to target. */
    enum { MAX_REFS = 8 };
    double ref[2][MAX_REFS];
    char reftext[2][MAX_REFS][48];
    const char *reflabel[2][MAX_REFS];
    int nref[2] = {0, 0};
    hs_svg_mark *mk = calloc((size_t)r->nruns * 2 + 1, sizeof *mk);
    int nmk[2] = {0, 0};
    for (int i = 0; i < r->nruns; i++) {
      const run_row *run = &r->runs[i];
      double tv[2] = {run->target_loss, run->target_accuracy};
      for (int k = 0; k < 2; k++) {
        if (!isfinite(tv[k])) continue;
        int seen = 0;
        for (int m = 0; m < nref[k]; m++) seen |= ref[k][m] == tv[k];
        if (seen || nref[k] == MAX_REFS) continue;
        /* 4 significant digits, as the tables: a real run's target is its final loss, whose
         * 17 digits ran past the plot. Targets that only differ further down share a label. */
        char num[40];
        num_short(num, sizeof num, tv[k]);
        snprintf(reftext[k][nref[k]], sizeof reftext[k][0], "target %s", num);
        reflabel[k][nref[k]] = reftext[k][nref[k]];
        ref[k][nref[k]++] = tv[k];
      }
      const dvec *t = &d[3 * i];
      if (!mk || !isfinite(run->time_to_target_s) || t->n == 0) continue;
      size_t best = 0;
      for (size_t k = 1; k < t->n; k++)
        if (fabs(t->v[k] - run->time_to_target_s) < fabs(t->v[best] - run->time_to_target_s)) best = k;
      mk[nmk[0]++] = (hs_svg_mark){.x = t->v[best], .y = d[3 * i + 1].v[best], .color = run->color};
      mk[r->nruns + nmk[1]++] = (hs_svg_mark){.x = t->v[best], .y = d[3 * i + 2].v[best], .color = run->color};
    }
    fputs("<div class=\"plots\">\n", r->f);
    if (have_loss)
      hs_svg_lines_marked(r->f, &fl, s, ns, ref[0], reflabel[0], nref[0], mk, mk ? nmk[0] : 0);
    if (have_acc)
      hs_svg_lines_marked(r->f, &fa, s + r->nruns, ns, ref[1], reflabel[1], nref[1],
                          mk ? mk + r->nruns : NULL, mk ? nmk[1] : 0);
    fputs("</div>\n", r->f);
    if (nmk[0]) hs_html_para(r->f, "note", "Dashed: the target; a ring marks the evaluation at which a run met it.");
    free(mk);
    if (!have_acc) hs_html_para(r->f, "note", "The convergence model gives no accuracy.");
    if (!have_loss) hs_html_para(r->f, "note", "The convergence model gives no loss.");
  }
  for (int i = 0; i < r->nruns * 3; i++) dvec_free(&d[i]);
  free(d);
  free(s);
  return rc;
}

/* ---- validation ----------------------------------------------------------------------------- */

/* Mean iteration time over the workers at each step index (see HS_REPORT_CYCLES). */
static int load_step_means(report *r, int64_t id, dvec *x, dvec *y) {
  hs_rows *st = NULL;
  int rc = prep(r, HS_REPORT_STEP_MEANS, id, VALID_MAX_STEPS, &st);
  if (rc) return rc;
  int step;
  while (!rc && (step = hs_rows_next(st, &r->qd)) == 1)
    if (dvec_push(x, hs_rows_real(st, 0)) || dvec_push(y, hs_rows_real(st, 1))) rc = oom(r);
  if (!rc && step != 0) rc = db_error(r, "reading step rows");
  hs_rows_close(st);
  return rc;
}

static int in_runs(const report *r, int64_t id) {
  for (int i = 0; i < r->nruns; i++)
    if (r->runs[i].id == id) return 1;
  return 0;
}

static int count_evals(report *r, int64_t id, int64_t *n) {
  hs_rows *st = NULL;
  int rc = prep(r, HS_REPORT_EVAL_COUNT, id, 0, &st);
  if (rc) return rc;
  if (hs_rows_next(st, &r->qd) == 1) *n = hs_rows_int(st, 0);
  else rc = db_error(r, "reading eval rows");
  hs_rows_close(st);
  return rc;
}

static int validation_plots(report *r, int64_t real, int64_t sim) {
  size_t clipped = 0;
  dvec d[10];
  memset(d, 0, sizeof d);
  int rc = load_step_means(r, real, &d[0], &d[1]);
  if (!rc) rc = load_step_means(r, sim, &d[2], &d[3]);
  char lm[48], ls[48];
  snprintf(lm, sizeof lm, "measured (run %lld)", (long long)real);
  snprintf(ls, sizeof ls, "simulated (run %lld)", (long long)sim);
  if (!rc) {
    hs_svg_series s[2] = {
        {.label = lm, .x = d[0].v, .y = d[1].v, .n = d[0].n, .color = 3},
        {.label = ls, .x = d[2].v, .y = d[3].v, .n = d[2].n, .color = 0},
    };
    /* Start-up iterations (allocation, autotuning, the first NCCL calls) can be many times the
     * steady ones: the y axis ends above the 98th percentile then, and the page says so. */
    hs_svg_frame fr = {.kind = "validation", .title = "Iteration time: simulated against measured",
                       .xlabel = "step", .ylabel = "mean iteration time (s)", .width = 490, .height = 300,
                       .clip_quantile = VALID_CLIP_QUANTILE};
    fputs("<div class=\"plots\">\n", r->f);
    clipped = hs_svg_lines(r->f, &fr, s, 2);
    int64_t ne[2] = {0, 0};
    rc = count_evals(r, real, &ne[0]);
    if (!rc) rc = count_evals(r, sim, &ne[1]);
    if (!rc) rc = load_evals(r, real, ne[0], &d[4], &d[5], &d[6]);
    if (!rc) rc = load_evals(r, sim, ne[1], &d[7], &d[8], &d[9]);
    if (!rc && (d[4].n || d[7].n)) {
      hs_svg_series e[2] = {
          {.label = lm, .x = d[4].v, .y = d[5].v, .n = d[4].n, .color = 3},
          {.label = ls, .x = d[7].v, .y = d[8].v, .n = d[7].n, .color = 0},
      };
      hs_svg_frame fl = {.kind = "validation", .title = "Loss: simulated against measured",
                         .xlabel = "time (s)", .ylabel = "loss", .width = 490, .height = 300};
      hs_svg_lines(r->f, &fl, e, 2);
    }
    fputs("</div>\n", r->f);
    if (clipped)
      hs_html_para(r->f, "note",
                   "Iteration time: the y axis ends a little above the %gth percentile of the values "
                   "so that the steady state stays readable; %zu point%s far above it (start-up) %s "
                   "not shown.",
                   VALID_CLIP_QUANTILE * 100, clipped, clipped == 1 ? "" : "s", clipped == 1 ? "is" : "are");
  }
  for (int i = 0; i < 10; i++) dvec_free(&d[i]);
  return rc;
}

static int section_validation(report *r) {
  hs_html_heading(r->f, "validation", "Simulated against measured");
  hs_rows *st = NULL;
  int rc = prep(r, HS_REPORT_VALIDATIONS, 0, 0, &st);
  if (rc) return rc;
  /* The table holds few rows (one per `hetsim validate`), so filtering here is cheap. */
  int64_t (*pairs)[2] = NULL;
  size_t np = 0;
  int step;
  while (!rc && (step = hs_rows_next(st, &r->qd)) == 1) {
    int64_t real = hs_rows_int(st, 1);
    int sim_null = hs_rows_type(st, 2) == HS_VALUE_NULL;
    int64_t sim = hs_rows_int(st, 2);
    if (!in_runs(r, real) && (sim_null || !in_runs(r, sim))) continue;
    if (np == 0) {
      static const char *const head[] = {"validation", "real run", "simulated run",
                                         "median iteration error", "p95 iteration error",
                                         "time-to-loss error", "created"};
      hs_html_table_begin(r->f, head, 7);
    }
    char b[6][48];
    hs_html_row_begin(r->f, NULL);
    snprintf(b[0], sizeof b[0], "%lld", (long long)hs_rows_int(st, 0));
    snprintf(b[1], sizeof b[1], "%lld", (long long)real);
    snprintf(b[2], sizeof b[2], "%lld", (long long)sim);
    hs_html_cell(r->f, b[0]);
    hs_html_cell(r->f, b[1]);
    hs_html_cell(r->f, sim_null ? "(deleted)" : b[2]);
    hs_html_cell(r->f, num(b[3], sizeof b[3], col_real(st, 3)));
    hs_html_cell(r->f, num(b[4], sizeof b[4], col_real(st, 4)));
    hs_html_cell(r->f, num(b[5], sizeof b[5], col_real(st, 5)));
    hs_html_cell(r->f, hs_rows_text(st, 6, NULL));
    hs_html_row_end(r->f);
    int64_t(*bigger)[2] = realloc(pairs, (np + 1) * sizeof *pairs);
    if (!bigger) {
      rc = oom(r);
      break;
    }
    pairs = bigger;
    pairs[np][0] = real;
    pairs[np][1] = sim_null ? 0 : sim;
    np++;
  }
  if (!rc && step != 0) rc = db_error(r, "reading validation rows");
  hs_rows_close(st);
  if (!rc && np == 0)
    hs_html_para(r->f, "note",
                 "None of these runs has been validated (`hetsim validate RUN_ID` simulates a real "
                 "run and stores the comparison).");
  if (!rc && np) {
    hs_html_table_end(r->f);
    hs_html_para(r->f, "note", "Errors are relative: 0.05 = 5%%.");
  }
  for (size_t k = 0; k < np && !rc; k++) {
    if (pairs[k][1] == 0) continue;
    fprintf(r->f, "<h3>Run %lld against its simulation, run %lld</h3>\n", (long long)pairs[k][0],
            (long long)pairs[k][1]);
    rc = validation_plots(r, pairs[k][0], pairs[k][1]);
  }
  free(pairs);
  return rc;
}

/* ---- page ----------------------------------------------------------------------------------- */

static int write_page(report *r, const char *title) {
  hs_html_begin(r->f, title);
  hs_html_para(r->f, "note", "From %s; %d run%s. Made by hetsim report; `hetsim query run ID` shows every stored field.",
               r->db_path, r->nruns, r->nruns == 1 ? "" : "s");
  fputs("<p class=\"note\"><a href=\"#target\">time to target</a> · <a href=\"#compare\">runs</a> · "
        "<a href=\"#cluster\">clusters</a> · <a href=\"#progress\">progress</a> · <a href=\"#batches\">batch sizes</a> · "
        "<a href=\"#timelines\">timelines</a> · <a href=\"#iterations\">iteration times</a> · "
        "<a href=\"#convergence\">loss and accuracy</a> · <a href=\"#validation\">validation</a></p>\n",
        r->f);
  int rc = section_ttt(r);
  if (rc) {
    hs_html_end(r->f);
    return rc;
  }
  section_compare(r);
  rc = section_clusters(r);
  if (!rc) rc = section_progress(r);
  if (!rc) rc = section_batches(r);
  if (!rc) rc = section_timelines(r);
  if (!rc) rc = section_histograms(r);
  if (!rc) rc = section_convergence(r);
  if (!rc) rc = section_validation(r);
  hs_html_end(r->f);
  return rc;
}

int hs_cmd_report(int argc, char **argv) {
  const char *db_path = HS_DEFAULT_DB, *out = NULL, *title = NULL;
  int64_t ids[MAX_RUNS];
  int nids = 0, only_pos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!only_pos && strcmp(a, "--") == 0) {
      only_pos = 1;
    } else if (!only_pos && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
      fputs(usage_text, stdout);
      return 0;
    } else if (!only_pos && (strcmp(a, "--db") == 0 || strcmp(a, "--out") == 0 || strcmp(a, "--title") == 0)) {
      if (i + 1 >= argc || !argv[i + 1][0]) return usage_error("%s needs a value", a);
      const char **dst = a[2] == 'd' ? &db_path : a[2] == 'o' ? &out : &title;
      *dst = argv[++i];
    } else if (!only_pos && a[0] == '-' && a[1] != '\0') {
      return usage_error("unknown option %s", a);
    } else {
      int64_t id;
      if (hs_cli_parse_run_id(a, &id)) return usage_error("not a run ID: \"%s\"", a);
      int seen = 0;
      for (int k = 0; k < nids; k++) seen |= ids[k] == id;
      if (seen) continue;
      if (nids == MAX_RUNS) return usage_error("at most %d runs per page", MAX_RUNS);
      ids[nids++] = id;
    }
  }
  if (nids == 0) return usage_error("%s", "give at least one run ID (hetsim query runs lists them)");
  if (!out) return usage_error("%s", "--out FILE.html is required");
  if (hs_outfile_is_db(out, db_path))
    return usage_error("--out: \"%s\" is the results database (--db %s); give another file", out, db_path);

  hs_store *s = NULL;
  int rc = hs_cli_store_open("report", &s, db_path, HS_STORE_READONLY);
  if (rc) return rc;
  hs_diag d = {0};
  report r = {.store = s, .db_path = db_path, .d = &d, .nruns = nids};
  r.runs = calloc((size_t)nids, sizeof *r.runs);
  if (!r.runs) {
    hs_store_close(s);
    fputs("hetsim report: out of memory\n", stderr);
    return 1;
  }
  int missing = 0;
  for (int i = 0; i < nids; i++) {
    r.runs[i].id = ids[i];
    r.runs[i].color = i;
    rc = load_run(&r, &r.runs[i]);
    if (rc == HS_ENOTFOUND) {
      fprintf(stderr, "hetsim report: no run %lld in %s (hetsim query runs lists them)\n",
              (long long)ids[i], db_path);
      missing++;
      rc = 0;
    } else if (rc) {
      break;
    }
  }
  if (!rc && !missing)
    for (int i = 0; i < nids; i++) make_label(&r, &r.runs[i]);
  int status = 0;
  if (rc) {
    fprintf(stderr, "hetsim report: %s\n", d.msg);
    status = hs_exit_code(rc);
  } else if (missing) {
    status = 2;
  } else {
    char deftitle[256];
    if (!title) {
      size_t o = (size_t)snprintf(deftitle, sizeof deftitle, "hetsim report: run%s", nids > 1 ? "s" : "");
      for (int i = 0; i < nids && o < sizeof deftitle - 24; i++)
        o += (size_t)snprintf(deftitle + o, sizeof deftitle - o, "%s %lld", i ? "," : "", (long long)ids[i]);
      title = deftitle;
    }
    hs_outfile of;
    rc = hs_outfile_open(&of, out, &d);
    if (!rc) {
      r.f = of.f;
      rc = write_page(&r, title);
      if (rc) hs_outfile_abort(&of);
      else rc = hs_outfile_commit(&of, &d);
    }
    if (rc) {
      fprintf(stderr, "hetsim report: %s\n", d.msg);
      status = rc == HS_ENOTFOUND ? 2 : 1;
    }
  }
  for (int i = 0; i < nids; i++) free_run(&r.runs[i]);
  free(r.runs);
  hs_store_close(s);
  return status;
}
