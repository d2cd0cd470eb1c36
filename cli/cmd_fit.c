/* hetsim fit-convergence: fits the analytic convergence model's parameters to the evaluations
 * of recorded runs (simulated with --convergence proxy, or real), by GSL nonlinear least
 * squares, and writes them as key=value lines that `hetsim sim --convergence-params FILE`
 * reads back.
 *
 * Per run: D = the model's training-set size, u = samples per global update (the run's
 * samples / iterations), s = the mean staleness of its step rows (0 without step rows). An
 * evaluation after j updates is at progress k = j u E(u) Ps(s) / D, and the fit minimises the
 * squared error of l(k) = 1/(beta0 k + beta1) + beta2 over every evaluation of every run.
 * beta0, beta1 and beta2 are always fitted; phi only when the runs' u differ by more than 5%;
 * lambda_s only when their mean staleness differs by more than 0.5. With accuracies, acc_max and
 * acc_alpha are then fitted to the (loss, accuracy) pairs. The other parameters keep the values
 * given with --convergence (or the model's defaults). */
#include <getopt.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/core_json.h"
#include "core/core_store.h"
#include "nn/nn_zoo.h"
#include "sim/sim_conv.h"

typedef struct fit_point {
  int run;                    /* index into the runs */
  double step, loss, acc;     /* acc NaN when not recorded */
} fit_point;

typedef struct fit_run {
  int64_t id;
  char model[32];
  double D, u, stale;
} fit_run;

typedef struct fit_data {
  fit_run *runs;
  int n_runs;
  fit_point *pts;
  int n, cap;
  hs_conv_coef c;             /* fixed values, and the fitted ones as they are written back */
  int fit_phi, fit_ls;
  int classes;                /* of the model: chance accuracy is 1/classes */
} fit_data;

static int usage(FILE *out, int code) {
  fprintf(out,
"usage: hetsim fit-convergence RUN_ID... [--db FILE] [--convergence analytic[:k=v,...]]\n"
"                              [--out FILE] [--json]\n"
"\n"
"Fits the analytic convergence model (docs/convergence.md) to the evaluations (eval rows) of\n"
"the given runs, all of one model: beta0, beta1, beta2 always; phi when the runs' samples per\n"
"update differ; lambda_s when their mean staleness differs; acc_max and acc_alpha when the\n"
"evaluations have accuracies. Writes the parameters as key=value lines to FILE (default: none)\n"
"for `hetsim sim --convergence analytic --convergence-params FILE`, and prints them.\n"
"\n"
"  --db FILE            results database (default %s)\n"
"  --convergence SPEC   starting and fixed values (default: the model's defaults)\n"
"  --out FILE           write the fitted parameters there\n"
"  --json               print one JSON object\n"
"\n"
"exit status: 0 fitted, 1 the fit failed, 2 bad usage or bad input.\n", HS_DEFAULT_DB);
  return code;
}

#define bad(...) hs_cli_usage("fit-convergence", 0, __VA_ARGS__)

/* Progress of point i under coefficients c. */
static double progress(const fit_data *f, const hs_conv_coef *c, const fit_point *p) {
  const fit_run *r = &f->runs[p->run];
  return p->step * r->u * hs_conv_efficiency(c, r->u) * hs_conv_stale_factor(c, r->stale) / r->D;
}

/* Parameters are fitted as logarithms, which keeps them positive. */
static void unpack(const fit_data *f, const gsl_vector *x, hs_conv_coef *c) {
  *c = f->c;
  c->beta0 = exp(gsl_vector_get(x, 0));
  c->beta1 = exp(gsl_vector_get(x, 1));
  c->beta2 = exp(gsl_vector_get(x, 2));
  size_t i = 3;
  if (f->fit_phi) c->phi = exp(gsl_vector_get(x, i++));
  if (f->fit_ls) c->lambda_s = exp(gsl_vector_get(x, i++));
}

static int loss_resid(const gsl_vector *x, void *ctx, gsl_vector *r) {
  fit_data *f = ctx;
  hs_conv_coef c;
  unpack(f, x, &c);
  for (int i = 0; i < f->n; i++)
    gsl_vector_set(r, (size_t)i, hs_conv_loss(&c, progress(f, &c, &f->pts[i])) - f->pts[i].loss);
  return GSL_SUCCESS;
}

static int acc_resid(const gsl_vector *x, void *ctx, gsl_vector *r) {
  fit_data *f = ctx;
  hs_conv_coef c = f->c;
  c.acc_max = 1.0 / (1.0 + exp(-gsl_vector_get(x, 0)));
  c.acc_alpha = exp(gsl_vector_get(x, 1));
  size_t k = 0;
  for (int i = 0; i < f->n; i++)
    if (!isnan(f->pts[i].acc))
      gsl_vector_set(r, k++, hs_conv_accuracy(&c, f->pts[i].loss, f->classes) - f->pts[i].acc);
  return GSL_SUCCESS;
}

/* Runs the trust-region solver; returns the RMS residual or NaN when it failed. */
static double solve(gsl_multifit_nlinear_fdf *fdf, gsl_vector *x0, size_t n) {
  gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
  gsl_multifit_nlinear_workspace *w =
      gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &fp, n, x0->size);
  if (!w) return NAN;
  int info;
  double rms = NAN;
  if (gsl_multifit_nlinear_init(x0, fdf, w) == GSL_SUCCESS) {
    int st = gsl_multifit_nlinear_driver(500, 1e-10, 1e-10, 1e-12, NULL, NULL, &info, w);
    if (st == GSL_SUCCESS || st == GSL_EMAXITER) {
      gsl_vector_memcpy(x0, gsl_multifit_nlinear_position(w));
      gsl_vector *r = gsl_multifit_nlinear_residual(w);
      double ss = 0;
      for (size_t i = 0; i < r->size; i++) ss += gsl_vector_get(r, i) * gsl_vector_get(r, i);
      rms = sqrt(ss / (double)r->size);
    }
  }
  gsl_multifit_nlinear_free(w);
  return rms;
}

static int load_run(sqlite3 *db, int64_t id, fit_data *f, hs_diag *d) {
  sqlite3_stmt *st = NULL;
  fit_run *r = &f->runs[f->n_runs];
  memset(r, 0, sizeof *r);
  r->id = id;
  int rc = 0;
  sqlite3_prepare_v2(db,
                     "SELECT r.model, s.samples, s.iterations,"
                     " (SELECT avg(staleness) FROM step WHERE run_id = r.id)"
                     " FROM run r LEFT JOIN summary s ON s.run_id = r.id WHERE r.id = ?1",
                     -1, &st, NULL);
  if (!st) return hs_diag_set(d, HS_EDB, "reading run %lld: %s", (long long)id, sqlite3_errmsg(db));
  sqlite3_bind_int64(st, 1, id);
  if (sqlite3_step(st) != SQLITE_ROW) {
    rc = hs_diag_set(d, HS_ENOTFOUND, "run %lld: no such run", (long long)id);
  } else {
    snprintf(r->model, sizeof r->model, "%s", (const char *)sqlite3_column_text(st, 0));
    double samples = sqlite3_column_double(st, 1), iters = sqlite3_column_double(st, 2);
    r->stale = sqlite3_column_double(st, 3); /* NULL reads as 0 */
    const hs_model_info *mi = hs_zoo_find(r->model);
    if (!mi) rc = hs_diag_set(d, HS_EINVAL, "run %lld: unknown model %s", (long long)id, r->model);
    else if (!(samples > 0) || !(iters > 0))
      rc = hs_diag_set(d, HS_EINVAL, "run %lld has no summary with samples and iterations (did it finish?)", (long long)id);
    else {
      r->D = (double)mi->dataset_train_size;
      r->u = samples / iters;
    }
  }
  sqlite3_finalize(st);
  if (rc) return rc;
  st = NULL;
  sqlite3_prepare_v2(db, "SELECT step, loss, accuracy FROM eval WHERE run_id = ?1 AND loss IS NOT NULL ORDER BY step",
                     -1, &st, NULL);
  if (!st) return hs_diag_set(d, HS_EDB, "reading run %lld's evaluations: %s", (long long)id, sqlite3_errmsg(db));
  sqlite3_bind_int64(st, 1, id);
  int got = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (f->n == f->cap) {
      int nc = f->cap ? 2 * f->cap : 256;
      fit_point *p = realloc(f->pts, (size_t)nc * sizeof *p);
      if (!p) {
        sqlite3_finalize(st);
        return hs_diag_set(d, HS_ENOMEM, "out of memory");
      }
      f->pts = p;
      f->cap = nc;
    }
    f->pts[f->n++] = (fit_point){
        .run = f->n_runs, .step = sqlite3_column_double(st, 0), .loss = sqlite3_column_double(st, 1),
        .acc = sqlite3_column_type(st, 2) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 2)};
    got++;
  }
  sqlite3_finalize(st);
  if (!got) return hs_diag_set(d, HS_EINVAL, "run %lld has no evaluations with a loss (run it with --convergence proxy)", (long long)id);
  f->n_runs++;
  return 0;
}

int hs_cmd_fit(int argc, char **argv) {
  static const struct option opts[] = {
      {"db", required_argument, NULL, 'd'}, {"convergence", required_argument, NULL, 'c'},
      {"out", required_argument, NULL, 'o'}, {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
  };
  const char *db_path = HS_DEFAULT_DB, *conv = "analytic", *out = NULL;
  int json = 0, c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'd': db_path = optarg; break;
    case 'c': conv = optarg; break;
    case 'o': out = optarg; break;
    case 'j': json = 1; break;
    case 'h': return usage(stdout, 0);
    default: return bad("unknown or incomplete option \"%s\"; see --help", argv[optind - 1]);
    }
  }
  int nids = argc - optind;
  if (nids < 1) return bad("give at least one RUN_ID; see --help");
  if (strncmp(conv, "analytic", 8) || (conv[8] && conv[8] != ':'))
    return bad("--convergence: only the analytic model has parameters to fit, got \"%s\"", conv);
  fit_data f = {0};
  f.runs = calloc((size_t)nids, sizeof *f.runs);
  hs_diag d = {0};
  hs_store *s = NULL;
  int status = 2, rc;
  gsl_vector *x = NULL, *xa = NULL;
  if (!f.runs) {
    fprintf(stderr, "hetsim fit-convergence: out of memory\n");
    return 1;
  }
  if ((rc = hs_store_open(&s, db_path, HS_STORE_READONLY, &d))) {
    fprintf(stderr, "hetsim fit-convergence: %s\n", d.msg);
    goto done;
  }
  for (int i = 0; i < nids; i++) {
    char *end;
    long long id = strtoll(argv[optind + i], &end, 10);
    if (!*argv[optind + i] || *end || id < 1) {
      status = bad("expected a run id, got \"%s\"", argv[optind + i]);
      goto done;
    }
    if ((rc = load_run(hs_store_db(s), id, &f, &d))) {
      fprintf(stderr, "hetsim fit-convergence: %s\n", d.msg);
      status = hs_exit_code(rc) == 2 || rc == HS_ENOTFOUND ? 2 : 1;
      goto done;
    }
    if (strcmp(f.runs[i].model, f.runs[0].model)) {
      status = bad("runs %lld (%s) and %lld (%s) train different models; fit one model at a time",
                   (long long)f.runs[0].id, f.runs[0].model, id, f.runs[i].model);
      goto done;
    }
  }
  const hs_conv_model *m;
  hs_params p;
  if ((rc = hs_conv_parse(conv, f.runs[0].model, NULL, &m, &p, &d))) {
    fprintf(stderr, "hetsim fit-convergence: %s\n", d.msg);
    goto done;
  }
  hs_conv_coef_from(&p, &f.c);
  f.classes = hs_zoo_find(f.runs[0].model)->classes;
  double umin = INFINITY, umax = 0, smin = INFINITY, smax = -INFINITY, lmin = INFINITY, lmax = 0;
  for (int i = 0; i < f.n_runs; i++) {
    umin = fmin(umin, f.runs[i].u);
    umax = fmax(umax, f.runs[i].u);
    smin = fmin(smin, f.runs[i].stale);
    smax = fmax(smax, f.runs[i].stale);
  }
  for (int i = 0; i < f.n; i++) {
    lmin = fmin(lmin, f.pts[i].loss);
    lmax = fmax(lmax, f.pts[i].loss);
  }
  f.fit_phi = umax > 1.05 * umin;
  f.fit_ls = smax - smin > 0.5;
  size_t np = 3 + (size_t)f.fit_phi + (size_t)f.fit_ls;
  if ((size_t)f.n < np + 1) {
    status = bad("%d evaluations are too few to fit %zu parameters; evaluate more often (eval_every)", f.n, np);
    goto done;
  }
  status = 1;
  x = gsl_vector_alloc(np);
  /* Start from the model's values, with beta2 below the lowest loss seen. */
  double b2 = fmin(f.c.beta2, 0.5 * lmin);
  gsl_vector_set(x, 0, log(f.c.beta0));
  gsl_vector_set(x, 1, log(1.0 / fmax(lmax - b2, 1e-3)));
  gsl_vector_set(x, 2, log(fmax(b2, 1e-3)));
  size_t k = 3;
  if (f.fit_phi) gsl_vector_set(x, k++, log(fmax(f.c.phi, 1.0)));
  if (f.fit_ls) gsl_vector_set(x, k++, log(fmax(f.c.lambda_s, 1e-3)));
  gsl_multifit_nlinear_fdf fdf = {.f = loss_resid, .df = NULL, .fvv = NULL, .n = (size_t)f.n, .p = np, .params = &f};
  double rms = solve(&fdf, x, (size_t)f.n);
  if (isnan(rms)) {
    fprintf(stderr, "hetsim fit-convergence: the loss fit did not converge\n");
    goto done;
  }
  unpack(&f, x, &f.c);
  int na = 0;
  for (int i = 0; i < f.n; i++) na += !isnan(f.pts[i].acc);
  double arms = NAN;
  if (na >= 3) {
    xa = gsl_vector_alloc(2);
    gsl_vector_set(xa, 0, 2.0);
    gsl_vector_set(xa, 1, 0.0);
    gsl_multifit_nlinear_fdf fa = {.f = acc_resid, .n = (size_t)na, .p = 2, .params = &f};
    arms = solve(&fa, xa, (size_t)na);
    if (!isnan(arms)) {
      f.c.acc_max = 1.0 / (1.0 + exp(-gsl_vector_get(xa, 0)));
      f.c.acc_alpha = exp(gsl_vector_get(xa, 1));
    }
  }
  char text[1024];
  snprintf(text, sizeof text,
           "# hetsim fit-convergence, model %s, %d runs, %d evaluations, loss rms %.4g\n"
           "phi=%.6g\nb0=%.6g\nbeta0=%.6g\nbeta1=%.6g\nbeta2=%.6g\nlambda_s=%.6g\n"
           "lambda_tau=%.6g\nlambda_c=%.6g\nacc_max=%.6g\nacc_alpha=%.6g\n",
           f.runs[0].model, f.n_runs, f.n, rms, f.c.phi, f.c.b0, f.c.beta0, f.c.beta1, f.c.beta2,
           f.c.lambda_s, f.c.lambda_tau, f.c.lambda_c, f.c.acc_max, f.c.acc_alpha);
  if (out) {
    FILE *fo = fopen(out, "w");
    if (!fo || fputs(text, fo) < 0 || fclose(fo)) {
      fprintf(stderr, "hetsim fit-convergence: --out %s: cannot write\n", out);
      goto done;
    }
  }
  if (json) {
    hs_json j;
    hs_json_init(&j, stdout, 1);
    hs_json_object_begin(&j);
    hs_json_key(&j, "model"); hs_json_string(&j, f.runs[0].model);
    hs_json_key(&j, "runs"); hs_json_array_begin(&j);
    for (int i = 0; i < f.n_runs; i++) hs_json_int(&j, f.runs[i].id);
    hs_json_array_end(&j);
    hs_json_key(&j, "evaluations"); hs_json_int(&j, f.n);
    hs_json_key(&j, "fitted"); hs_json_array_begin(&j);
    hs_json_string(&j, "beta0"); hs_json_string(&j, "beta1"); hs_json_string(&j, "beta2");
    if (f.fit_phi) hs_json_string(&j, "phi");
    if (f.fit_ls) hs_json_string(&j, "lambda_s");
    if (!isnan(arms)) { hs_json_string(&j, "acc_max"); hs_json_string(&j, "acc_alpha"); }
    hs_json_array_end(&j);
    hs_json_key(&j, "loss_rms"); hs_json_double(&j, rms);
    hs_json_key(&j, "accuracy_rms"); hs_json_double(&j, arms);
    hs_json_key(&j, "params"); hs_json_object_begin(&j);
    const char *names[] = {"phi", "b0", "beta0", "beta1", "beta2", "lambda_s", "lambda_tau", "lambda_c", "acc_max", "acc_alpha"};
    double vals[] = {f.c.phi, f.c.b0, f.c.beta0, f.c.beta1, f.c.beta2, f.c.lambda_s, f.c.lambda_tau, f.c.lambda_c, f.c.acc_max, f.c.acc_alpha};
    for (int i = 0; i < 10; i++) {
      hs_json_key(&j, names[i]);
      hs_json_double(&j, vals[i]);
    }
    hs_json_object_end(&j);
    hs_json_key(&j, "out"); hs_json_string(&j, out);
    hs_json_object_end(&j);
  } else {
    fputs(text, stdout);
  }
  status = 0;
done:
  gsl_vector_free(x);
  gsl_vector_free(xa);
  hs_store_close(s);
  free(f.runs);
  free(f.pts);
  return status;
}
