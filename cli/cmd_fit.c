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
 * lambda_s only when their mean staleness differs by more than 0.5; lambda_tau only when their
 * local steps between model averages tau differ (a localsgd run's iteration is one average of
 * tau local steps: u is then one local step's samples over the workers, an evaluation after j
 * averages is at j tau of them, and its progress is discounted by Ptau(tau)). With accuracies, the
 * accuracy map is then fitted to the (loss, accuracy) pairs (the exponential one, acc_max and
 * acc_alpha, or the rational one, acc_max, acc_slope and acc_bend, whichever fits better per
 * degree of freedom), and the accuracy noise acc_noise estimated. The other parameters keep the
 * values given with --convergence (or the model's defaults).
 *
 * --curves FILE.csv fits the same way to curves recorded elsewhere (a CSV of samples or epochs,
 * loss, accuracy, batch, workers, policy, period, seed; docs/convergence.md), for any model, and
 * stores the fit in the convergence_fit table (sim/sim_conv_fit.h), where `hetsim sim
 * --convergence analytic` finds it. Each distinct (samples per update u, staleness s, period
 * tau, seed) of the rows is one group, which plays the part of a run above: a synchronous row
 * (ssgd, ddp, lbb) updates the model with u = batch x workers samples at staleness 0, an
 * asynchronous one (asp) with u = batch at staleness workers - 1, a local-SGD one (localsgd)
 * averages period local steps of u = batch x workers samples; a point after S samples is at
 * j = S / u of those. */
#include <errno.h>
#include <getopt.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/core_hash.h"
#include "core/core_json.h"
#include "core/core_stats.h"
#include "core/core_store.h"
#include "nn/nn_zoo.h"
#include "policies/pol_params.h"
#include "policies/pol_policy.h"
#include "policies/pol_registry.h"
#include "sim/sim_conv.h"
#include "sim/sim_conv_curves.h"
#include "sim/sim_conv_fit.h"

typedef struct fit_point {
  int run;                    /* index into the runs */
  double step, loss, acc;     /* acc NaN when not recorded */
} fit_point;

typedef struct fit_run {
  int64_t id;
  char model[64];
  double D, u, stale;
  double tau;                 /* local steps between model averages (localsgd); 1 otherwise */
  uint64_t curve;             /* --curves: the rows' seed, hashed (0 = none) */
} fit_run;

typedef struct fit_data {
  fit_run *runs;
  int n_runs;
  fit_point *pts;
  int n, cap;
  hs_conv_coef c;             /* fixed values, and the fitted ones as they are written back */
  int fit_phi, fit_ls, fit_lt;
  int stage;                  /* the loss fit's points and parameters (enum stage) */
  int classes;                /* of the model: chance accuracy is 1/classes */
} fit_data;

static int usage(FILE *out, int code) {
  fprintf(out,
"usage: hetsim fit-convergence RUN_ID... [--db FILE] [--convergence analytic[:k=v,...]]\n"
"                              [--out FILE] [--json]\n"
"       hetsim fit-convergence --curves FILE.csv --model NAME [--dataset-size N]\n"
"                              [--classes N] [--db FILE] [--convergence analytic[:k=v,...]]\n"
"                              [--out FILE] [--json]\n"
"\n"
"Fits the analytic convergence model (docs/convergence.md) to the evaluations (eval rows) of\n"
"the given runs, all of one model, or to loss and accuracy curves recorded elsewhere (--curves):\n"
"beta0, beta1, beta2 always; phi when the samples per update differ; lambda_s when the mean\n"
"staleness differs; lambda_tau when the local steps between model averages differ (localsgd);\n"
"the accuracy map (acc_max and acc_alpha, or acc_slope and acc_bend) and acc_noise when there\n"
"are accuracies. Prints the parameters and writes them as key=value lines to FILE (default:\n"
"none) for `hetsim sim --convergence analytic --convergence-params FILE`. A fit to --curves is\n"
"also stored in the database (table convergence_fit), where `hetsim sim --convergence analytic`\n"
"takes the newest fit of its model. A local-SGD curve that levels off above the fit (a stall\n"
"lambda_tau cannot follow) is named in a warning and in the JSON's stalls.\n"
"\n"
"  --curves FILE.csv    a CSV with a header row: samples (or epoch), loss, batch, and optionally\n"
"                       accuracy, workers, policy (ssgd, ddp, lbb: synchronous; asp; localsgd\n"
"                       with period, its local steps between model averages), seed (rows of one\n"
"                       seed are one run's curves); other columns are ignored;\n"
"                       docs/convergence.md says exactly\n"
"  --model NAME         the model the curves are of (any name; needed with --curves)\n"
"  --dataset-size N     training samples per epoch (default: samples/epoch of rows that have\n"
"                       both, else the zoo model's training set)\n"
"  --classes N          the model's classes, for chance accuracy 1/N (default: the zoo's, else\n"
"                       none)\n"
"  --db FILE            database: the runs, or where a --curves fit is stored (default %s)\n"
"  --convergence SPEC   starting and fixed values (default: the model's defaults)\n"
"  --out FILE           write the fitted parameters there\n"
"  --json               print one JSON object\n"
"\n"
"exit status: 0 fitted, 1 the fit failed, 2 bad usage or bad input (nothing stored).\n", HS_DEFAULT_DB);
  return code;
}

#define bad(...) hs_cli_usage("fit-convergence", 0, __VA_ARGS__)

/* Progress of point i under coefficients c. */
static double progress(const fit_data *f, const hs_conv_coef *c, const fit_point *p) {
  const fit_run *r = &f->runs[p->run];
  return p->step * r->u * hs_conv_efficiency(c, r->u) * hs_conv_stale_factor(c, r->stale) *
         hs_conv_local_factor(c, r->tau) / r->D;
}

/* The loss fit in one stage (every point; the curve's parameters and lambda_tau together) or,
 * when there are synchronous and local-SGD groups, in two: the curve's parameters to the groups
 * without local steps, then lambda_tau alone to the others (fit_points says why). */
enum stage { STAGE_ALL, STAGE_SYNC, STAGE_LOCAL };

static int run_in_stage(const fit_data *f, const fit_run *r) {
  return f->stage == STAGE_ALL || (f->stage == STAGE_SYNC ? r->tau == 1 : r->tau > 1);
}

static int in_stage(const fit_data *f, const fit_point *p) { return run_in_stage(f, &f->runs[p->run]); }

/* Parameters are fitted as logarithms, which keeps them positive. */
static void unpack(const fit_data *f, const gsl_vector *x, hs_conv_coef *c) {
  *c = f->c;
  if (f->stage == STAGE_LOCAL) {
    c->lambda_tau = exp(gsl_vector_get(x, 0));
    return;
  }
  c->beta0 = exp(gsl_vector_get(x, 0));
  c->beta1 = exp(gsl_vector_get(x, 1));
  c->beta2 = exp(gsl_vector_get(x, 2));
  size_t i = 3;
  if (f->fit_phi) c->phi = exp(gsl_vector_get(x, i++));
  if (f->fit_ls) c->lambda_s = exp(gsl_vector_get(x, i++));
  if (f->fit_lt && f->stage == STAGE_ALL) c->lambda_tau = exp(gsl_vector_get(x, i++));
}

/* Point p's fitted loss less its own. */
static double loss_error(const fit_data *f, const hs_conv_coef *c, const fit_point *p) {
  return hs_conv_loss(c, progress(f, c, p)) - p->loss;
}

static int loss_resid(const gsl_vector *x, void *ctx, gsl_vector *r) {
  fit_data *f = ctx;
  hs_conv_coef c;
  unpack(f, x, &c);
  size_t k = 0;
  for (int i = 0; i < f->n; i++)
    if (in_stage(f, &f->pts[i])) gsl_vector_set(r, k++, loss_error(f, &c, &f->pts[i]));
  return GSL_SUCCESS;
}

/* The accuracy map's residuals over the points with an accuracy, under coefficients c. */
static int map_resid(const fit_data *f, const hs_conv_coef *c, gsl_vector *r) {
  size_t k = 0;
  for (int i = 0; i < f->n; i++)
    if (!isnan(f->pts[i].acc))
      gsl_vector_set(r, k++, hs_conv_accuracy(c, f->pts[i].loss, f->classes) - f->pts[i].acc);
  return GSL_SUCCESS;
}

/* The exponential map: acc_max as a logistic, acc_alpha as a logarithm. */
static void exp_unpack(const gsl_vector *x, hs_conv_coef *c) {
  c->acc_max = 1.0 / (1.0 + exp(-gsl_vector_get(x, 0)));
  c->acc_alpha = exp(gsl_vector_get(x, 1));
  c->acc_slope = 0;
}

static int exp_resid(const gsl_vector *x, void *ctx, gsl_vector *r) {
  const fit_data *f = ctx;
  hs_conv_coef c = f->c;
  exp_unpack(x, &c);
  return map_resid(f, &c, r);
}

/* The rational map: acc_max as a logistic, acc_slope and acc_bend as logarithms. */
static void rat_unpack(const gsl_vector *x, hs_conv_coef *c) {
  c->acc_max = 1.0 / (1.0 + exp(-gsl_vector_get(x, 0)));
  c->acc_slope = exp(gsl_vector_get(x, 1));
  c->acc_bend = exp(gsl_vector_get(x, 2));
}

static int rat_resid(const gsl_vector *x, void *ctx, gsl_vector *r) {
  const fit_data *f = ctx;
  hs_conv_coef c = f->c;
  rat_unpack(x, &c);
  return map_resid(f, &c, r);
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

static int load_run(hs_store *s, int64_t id, fit_data *f, hs_diag *d) {
  fit_run *r = &f->runs[f->n_runs];
  memset(r, 0, sizeof *r);
  r->id = id;
  r->tau = 1;
  hs_run_record rec;
  int rc = hs_store_run_get(s, id, &rec, d);
  if (rc < 0) {
    char msg[sizeof d->msg];
    snprintf(msg, sizeof msg, "%s", d->msg);
    rc = hs_diag_set(d, HS_EDB, "reading run %lld: %s", (long long)id, msg);
  } else if (!rc) {
    rc = hs_diag_set(d, HS_ENOTFOUND, "run %lld: no such run", (long long)id);
  } else {
    rc = 0;
    snprintf(r->model, sizeof r->model, "%s", rec.model);
    double samples = (double)rec.samples, iters = (double)rec.iterations;
    const hs_model_info *mi = hs_zoo_find(r->model);
    if (!mi)
      rc = hs_diag_set(d, HS_EINVAL, "run %lld: %s is not a model of the zoo (an imported one): its runs count "
                       "progress in the epochs of the curves it was fitted to; fit those curves instead "
                       "(`hetsim fit-convergence --curves FILE.csv --model %s`)", (long long)id, r->model, r->model);
    else if (!(samples > 0) || !(iters > 0))
      rc = hs_diag_set(d, HS_EINVAL, "run %lld has no summary with samples and iterations (did it finish?)", (long long)id);
    else {
      r->D = (double)mi->dataset_train_size;
      r->u = samples / iters;
      /* One localsgd iteration averages tau local steps of each worker: its samples per update
       * (the argument of E) are one local step's over the workers, and an evaluation after j
       * averages comes after j tau of those (progress as the analytic model's model average). */
      if (!strcmp(rec.policy, "localsgd")) {
        hs_params pp;
        if ((rc = hs_params_parse(&pp, hs_policy_find("localsgd")->params, "localsgd", rec.params, d))) {
          char msg[sizeof d->msg];
          snprintf(msg, sizeof msg, "%s", d->msg);
          rc = hs_diag_set(d, HS_EINVAL, "run %lld: %s", (long long)id, msg);
        } else {
          r->tau = hs_params_get(&pp, "tau");
          r->u /= r->tau;
        }
      }
    }
    if (!rc && (rc = hs_store_step_mean_staleness(s, id, &r->stale, d))) {
      char msg[sizeof d->msg];
      snprintf(msg, sizeof msg, "%s", d->msg);
      rc = hs_diag_set(d, HS_EDB, "reading run %lld: %s", (long long)id, msg);
    }
    if (isnan(r->stale)) r->stale = 0; /* a run without steps */
  }
  hs_run_record_free(&rec);
  if (rc) return rc;
  hs_eval_row *ev;
  int64_t ne = hs_store_evals_get(s, id, &ev, d);
  if (ne < 0) {
    free(ev);
    char msg[sizeof d->msg];
    snprintf(msg, sizeof msg, "%s", d->msg);
    return hs_diag_set(d, HS_EDB, "reading run %lld's evaluations: %s", (long long)id, msg);
  }
  for (int64_t i = 0; i < ne; i++) {
    if (f->n == f->cap) {
      int nc = f->cap ? 2 * f->cap : 256;
      fit_point *p = realloc(f->pts, (size_t)nc * sizeof *p);
      if (!p) {
        free(ev);
        return hs_diag_set(d, HS_ENOMEM, "out of memory");
      }
      f->pts = p;
      f->cap = nc;
    }
    f->pts[f->n++] = (fit_point){.run = f->n_runs, .step = (double)ev[i].step * r->tau, .loss = ev[i].loss, .acc = ev[i].accuracy};
  }
  free(ev);
  if (!ne) return hs_diag_set(d, HS_EINVAL, "run %lld has no evaluations with a loss (run it with --convergence proxy)", (long long)id);
  f->n_runs++;
  return 0;
}

/* --- curves recorded elsewhere (--curves FILE.csv) ---------------------------------------- */

/* Reads the curves of path (sim/sim_conv_curves.h; dataset_size: --dataset-size or 0, zoo_size:
 * the zoo model's training set or 0) into f, one fit_run per distinct (u, stale, tau, seed) of
 * the rows and the points after them, their source ("NAME fnv1a64:HEX": the file's name and the
 * FNV-1a 64 hash of its bytes) into source and the samples per epoch they count in into *D.
 * Notes the columns it ignores on stderr. HS_EINVAL with FILE:LINE for bad input. */
static int load_curves(const char *path, double dataset_size, int64_t zoo_size, fit_data *f, char *source,
                       size_t slen, double *D, hs_diag *d) {
  FILE *in = fopen(path, "rb");
  if (!in) return hs_diag_set(d, HS_EINVAL, "--curves %s: %s", path, strerror(errno));
  char *text = NULL;
  size_t len = 0, cap = 0;
  int rc = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? 2 * cap : 65536;
      char *t = realloc(text, cap);
      if (!t) {
        rc = hs_diag_set(d, HS_ENOMEM, "out of memory reading %s", path);
        break;
      }
      text = t;
    }
    size_t got = fread(text + len, 1, 4096, in);
    len += got;
    if (got < 4096) break;
  }
  if (!rc && ferror(in)) rc = hs_diag_set(d, HS_EINVAL, "--curves %s: read error", path);
  fclose(in);
  if (rc) {
    free(text);
    return rc;
  }
  text[len] = '\0';
  const char *base = strrchr(path, '/');
  snprintf(source, slen, "%s fnv1a64:%016llx", base ? base + 1 : path,
           (unsigned long long)hs_fnv64(HS_FNV64_INIT, text, len));
  hs_conv_curves c;
  rc = hs_conv_curves_parse(path, text, len, dataset_size, zoo_size, &c, d);
  free(text);
  if (rc) return rc;
  if (c.ignored[0]) fprintf(stderr, "hetsim fit-convergence: %s: ignoring columns %s\n", path, c.ignored);
  for (int i = 0; !rc && i < c.n; i++) {
    const hs_conv_curve_row *r = &c.rows[i];
    int g = 0;
    while (g < f->n_runs && !(f->runs[g].u == r->u && f->runs[g].stale == r->stale && f->runs[g].tau == r->tau &&
                              f->runs[g].curve == r->seed))
      g++;
    if (g == f->n_runs) {
      fit_run *nr = realloc(f->runs, (size_t)(g + 1) * sizeof *nr);
      if (!nr) {
        rc = hs_diag_set(d, HS_ENOMEM, "out of memory");
        break;
      }
      f->runs = nr;
      f->runs[g] = (fit_run){.id = g + 1, .D = c.dataset_size, .u = r->u, .stale = r->stale, .tau = r->tau,
                             .curve = r->seed};
      f->n_runs++;
    }
    if (f->n == f->cap) {
      int nc = f->cap ? 2 * f->cap : 256;
      fit_point *pp = realloc(f->pts, (size_t)nc * sizeof *pp);
      if (!pp) {
        rc = hs_diag_set(d, HS_ENOMEM, "out of memory");
        break;
      }
      f->pts = pp;
      f->cap = nc;
    }
    f->pts[f->n++] = (fit_point){.run = g, .step = r->samples / r->u, .loss = r->loss, .acc = r->acc};
  }
  *D = c.dataset_size;
  hs_conv_curves_free(&c);
  return rc;
}

/* --- the fit, shared by runs and curves ---------------------------------------------------- */

static int by_run_step(const void *a, const void *b) {
  const fit_point *x = a, *y = b;
  if (x->run != y->run) return x->run < y->run ? -1 : 1;
  return x->step < y->step ? -1 : x->step > y->step;
}

/* The accuracy noise: the standard deviation of an evaluation's accuracy about a smooth curve,
 * from each point's distance to the line through its two neighbours (of the same run or group,
 * in order of progress). For independent noise of deviation s that distance has deviation
 * s sqrt(1 + w^2 + (1 - w)^2), w the point's weight of the earlier neighbour; the median of the
 * distances so scaled, over 0.6745 (the normal's median absolute value), estimates s and is not
 * moved by the few points where the curve bends sharply (its first updates). NaN with fewer than
 * 5 such points. */
static double acc_noise_of(const fit_data *f) {
  fit_point *p = malloc((size_t)f->n * sizeof *p);
  double *r = malloc((size_t)f->n * sizeof *r);
  double sigma = NAN;
  if (!p || !r) goto done;
  int n = 0, m = 0;
  for (int i = 0; i < f->n; i++)
    if (!isnan(f->pts[i].acc)) p[n++] = f->pts[i];
  qsort(p, (size_t)n, sizeof *p, by_run_step);
  for (int i = 1; i + 1 < n; i++) {
    const fit_point *a = &p[i - 1], *b = &p[i], *c = &p[i + 1];
    if (a->run != b->run || c->run != b->run || !(c->step > a->step)) continue;
    double w = (c->step - b->step) / (c->step - a->step);
    r[m++] = fabs(b->acc - (w * a->acc + (1 - w) * c->acc)) / sqrt(1 + w * w + (1 - w) * (1 - w));
  }
  if (m < 5) goto done;
  sigma = hs_median_inplace(r, (size_t)m) / 0.6745;
done:
  free(p);
  free(r);
  return sigma;
}

/* A local-SGD group (run) whose losses level off above the fit. */
typedef struct stall {
  double tau;   /* its local steps between model averages */
  double above; /* the mean of its loss less the fitted one over the last third of its points */
  double level; /* the median loss of that last third */
} stall;

enum { MAX_STALLS = 8 };

/* The local-SGD groups whose last third of points (at least 3, in order of progress) lies above
 * the fit by more, on average, than three times the RMS loss error of the groups without local
 * steps (of every group when there is none) and than 5% of the group's own range of losses.
 * lambda_tau only slows progress: real local SGD that stalls (measured against PyTorch's at a
 * high learning rate, docs/convergence.md) is fitted as slowness, and a target below its level
 * would be predicted reached. Writes at most MAX_STALLS into out; returns how many, or -1 out of
 * memory. */
static int stalls_of(const fit_data *f, stall *out) {
  fit_point *p = malloc((size_t)f->n * sizeof *p);
  double *tail = malloc((size_t)f->n * sizeof *tail);
  int ns = -1;
  if (!p || !tail) goto done;
  memcpy(p, f->pts, (size_t)f->n * sizeof *p);
  qsort(p, (size_t)f->n, sizeof *p, by_run_step);
  int have_sync = 0;
  for (int r = 0; r < f->n_runs; r++) have_sync |= f->runs[r].tau == 1;
  double ss = 0;
  int m = 0;
  for (int i = 0; i < f->n; i++)
    if (!have_sync || f->runs[p[i].run].tau == 1) {
      double e = loss_error(f, &f->c, &p[i]);
      ss += e * e, m++;
    }
  double rms = m ? sqrt(ss / m) : 0;
  ns = 0;
  for (int a = 0; a < f->n && ns < MAX_STALLS;) {
    int b = a;
    while (b < f->n && p[b].run == p[a].run) b++;
    const fit_run *r = &f->runs[p[a].run];
    int n = b - a, k = n / 3;
    if (r->tau > 1 && k >= 3) {
      double lo = INFINITY, hi = -INFINITY, above = 0;
      for (int i = a; i < b; i++) lo = fmin(lo, p[i].loss), hi = fmax(hi, p[i].loss);
      for (int i = b - k; i < b; i++) {
        above -= loss_error(f, &f->c, &p[i]);
        tail[i - (b - k)] = p[i].loss;
      }
      above /= k;
      if (above > 3 * rms && above > 0.05 * (hi - lo))
        out[ns++] = (stall){.tau = r->tau, .above = above, .level = hs_median_inplace(tail, (size_t)k)};
    }
    a = b;
  }
done:
  free(p);
  free(tail);
  return ns;
}

/* Fits f's points (f->c holds the starting and fixed values): the loss curve, then the
 * accuracy map when at least 3 points have an accuracy. Returns 0, 2 when there are too few
 * points for the parameters (message printed), 1 when the loss fit did not converge. */
static int fit_points(fit_data *f, double *rms, double *arms, int *n_fitted, const char **fitted) {
  double tmin = INFINITY, tmax = 0, lmin = INFINITY, lmax = 0;
  for (int i = 0; i < f->n_runs; i++) {
    tmin = fmin(tmin, f->runs[i].tau);
    tmax = fmax(tmax, f->runs[i].tau);
  }
  for (int i = 0; i < f->n; i++) {
    lmin = fmin(lmin, f->pts[i].loss);
    lmax = fmax(lmax, f->pts[i].loss);
  }
  f->fit_lt = tmax > tmin;
  /* With groups without local steps (tau 1) beside local-SGD ones, the curve is fitted to the
   * former alone and lambda_tau then to the latter: local SGD's curves differ from a slowed
   * synchronous curve in shape too (a higher floor, a bump after each average with momentum),
   * and fitted together they bend the curve every other policy uses (measured against PyTorch's
   * local SGD: docs/performance.md). */
  f->stage = f->fit_lt && tmin == 1 ? STAGE_SYNC : STAGE_ALL;
  /* phi and lambda_s as the groups of the (first) stage tell them */
  double umin = INFINITY, umax = 0, smin = INFINITY, smax = -INFINITY;
  for (int i = 0; i < f->n_runs; i++) {
    if (!run_in_stage(f, &f->runs[i])) continue;
    umin = fmin(umin, f->runs[i].u);
    umax = fmax(umax, f->runs[i].u);
    smin = fmin(smin, f->runs[i].stale);
    smax = fmax(smax, f->runs[i].stale);
  }
  f->fit_phi = umax > 1.05 * umin;
  f->fit_ls = smax - smin > 0.5;
  int n_stage = 0;
  for (int i = 0; i < f->n; i++) n_stage += in_stage(f, &f->pts[i]);
  size_t np = 3 + (size_t)f->fit_phi + (size_t)f->fit_ls + (size_t)(f->fit_lt && f->stage == STAGE_ALL);
  if ((size_t)n_stage < np + 1)
    return bad("%d points are too few to fit %zu parameters%s; record (or evaluate) more often", n_stage, np,
               f->stage == STAGE_SYNC ? " to the curves without local steps" : "");
  if (f->stage == STAGE_SYNC && f->n - n_stage < 2)
    return bad("%d points of local SGD are too few to fit lambda_tau; record (or evaluate) more often", f->n - n_stage);
  gsl_vector *x = gsl_vector_alloc(np), *xa = NULL, *xr = NULL, *xl = NULL;
  /* Start from the model's values, with beta2 below the lowest loss seen. */
  double b2 = fmin(f->c.beta2, 0.5 * lmin);
  gsl_vector_set(x, 0, log(f->c.beta0));
  gsl_vector_set(x, 1, log(1.0 / fmax(lmax - b2, 1e-3)));
  gsl_vector_set(x, 2, log(fmax(b2, 1e-3)));
  size_t k = 3;
  if (f->fit_phi) gsl_vector_set(x, k++, log(fmax(f->c.phi, 1.0)));
  if (f->fit_ls) gsl_vector_set(x, k++, log(fmax(f->c.lambda_s, 1e-3)));
  if (f->fit_lt && f->stage == STAGE_ALL) gsl_vector_set(x, k++, log(fmax(f->c.lambda_tau, 1e-3)));
  gsl_multifit_nlinear_fdf fdf = {.f = loss_resid, .df = NULL, .fvv = NULL, .n = (size_t)n_stage, .p = np, .params = f};
  *rms = solve(&fdf, x, (size_t)n_stage);
  *arms = NAN;
  int status = 1;
  if (!isnan(*rms)) unpack(f, x, &f->c);
  if (!isnan(*rms) && f->stage == STAGE_SYNC) {
    f->stage = STAGE_LOCAL;
    xl = gsl_vector_alloc(1);
    gsl_vector_set(xl, 0, log(fmax(f->c.lambda_tau, 1e-3)));
    gsl_multifit_nlinear_fdf fl = {.f = loss_resid, .n = (size_t)(f->n - n_stage), .p = 1, .params = f};
    if (!isnan(solve(&fl, xl, (size_t)(f->n - n_stage)))) {
      unpack(f, xl, &f->c);
      /* The RMS error over every point. */
      double ss = 0;
      for (int i = 0; i < f->n; i++) {
        double e = loss_error(f, &f->c, &f->pts[i]);
        ss += e * e;
      }
      *rms = sqrt(ss / f->n);
    } else {
      *rms = NAN;
    }
  }
  if (isnan(*rms)) {
    fprintf(stderr, "hetsim fit-convergence: the loss fit did not converge\n");
    goto done;
  }
  int m = 0;
  fitted[m++] = "beta0";
  fitted[m++] = "beta1";
  fitted[m++] = "beta2";
  if (f->fit_phi) fitted[m++] = "phi";
  if (f->fit_ls) fitted[m++] = "lambda_s";
  if (f->fit_lt) fitted[m++] = "lambda_tau";
  int na = 0;
  for (int i = 0; i < f->n; i++) na += !isnan(f->pts[i].acc);
  if (na >= 3) {
    xa = gsl_vector_alloc(2);
    gsl_vector_set(xa, 0, 2.0);
    gsl_vector_set(xa, 1, 0.0);
    gsl_multifit_nlinear_fdf fa = {.f = exp_resid, .n = (size_t)na, .p = 2, .params = f};
    *arms = solve(&fa, xa, (size_t)na);
    if (!isnan(*arms)) {
      exp_unpack(xa, &f->c);
      /* The rational map too, with one parameter more, and the map whose RMS error per degree
       * of freedom is the lower kept. It starts from the exponential map's slope at beta2 and
       * bends to chance at the highest loss seen. */
      double xmax = 0;
      for (int i = 0; i < f->n; i++)
        if (!isnan(f->pts[i].acc)) xmax = fmax(xmax, f->pts[i].loss - f->c.beta2);
      double chance = f->classes > 0 ? 1.0 / f->classes : 0, am = f->c.acc_max;
      double slope = fmax((am - chance) * f->c.acc_alpha, 1e-6);
      double bend = xmax > 0 ? fmax((slope * xmax / fmax(am - chance, 1e-6) - 1) / xmax, 1e-3) : 1;
      double rrms = NAN;
      if (na >= 4) {
        xr = gsl_vector_alloc(3);
        gsl_vector_set(xr, 0, log(am / fmax(1 - am, 1e-9)));
        gsl_vector_set(xr, 1, log(slope));
        gsl_vector_set(xr, 2, log(bend));
        gsl_multifit_nlinear_fdf fr = {.f = rat_resid, .n = (size_t)na, .p = 3, .params = f};
        rrms = solve(&fr, xr, (size_t)na);
      }
      if (!isnan(rrms) && rrms * sqrt(na / (na - 3.0)) < *arms * sqrt(na / (na - 2.0))) {
        rat_unpack(xr, &f->c);
        f->c.acc_alpha = 0;
        *arms = rrms;
        fitted[m++] = "acc_max";
        fitted[m++] = "acc_slope";
        fitted[m++] = "acc_bend";
      } else {
        f->c.acc_slope = f->c.acc_bend = 0;
        fitted[m++] = "acc_max";
        fitted[m++] = "acc_alpha";
      }
      /* Two estimates of the noise, each of which can only overstate it: the scatter about
       * the neighbours (and the curve's bends), and the map's residuals (and its misfit). */
      double noise = acc_noise_of(f);
      if (!isnan(noise)) {
        f->c.acc_noise = fmin(fmin(noise, *arms), 1);
        fitted[m++] = "acc_noise";
      }
    }
  }
  fitted[m] = NULL;
  *n_fitted = m;
  status = 0;
done:
  gsl_vector_free(x);
  gsl_vector_free(xa);
  gsl_vector_free(xr);
  gsl_vector_free(xl);
  f->stage = STAGE_ALL;
  return status;
}

/* Where a fit came from, for its output. */
typedef struct fit_origin {
  const char *curves, *source; /* --curves: the file and its source text; NULL for runs */
  int64_t points;
  double dataset_size;
  int64_t fit_id;              /* the convergence_fit row */
  int existed;                 /* 1 when that row was already stored */
  const char *db;
} fit_origin;

/* The fit as key=value lines, under a comment line saying where it came from. */
static void fit_text(const fit_data *f, const char *model, double rms, const fit_origin *o, char *text, size_t len) {
  int k;
  if (o->curves)
    k = snprintf(text, len, "# hetsim fit-convergence, model %s, curves %s, %d points, loss rms %.4g\n", model,
                 o->source, f->n, rms);
  else
    k = snprintf(text, len, "# hetsim fit-convergence, model %s, %d runs, %d evaluations, loss rms %.4g\n", model,
                 f->n_runs, f->n, rms);
  if (k < 0 || (size_t)k >= len) return;
  snprintf(text + k, len - (size_t)k,
           "phi=%.6g\nb0=%.6g\nbeta0=%.6g\nbeta1=%.6g\nbeta2=%.6g\nlambda_s=%.6g\n"
           "lambda_tau=%.6g\nlambda_c=%.6g\nacc_max=%.6g\nacc_alpha=%.6g\nacc_slope=%.6g\nacc_bend=%.6g\n"
           "acc_noise=%.6g\n",
           f->c.phi, f->c.b0, f->c.beta0, f->c.beta1, f->c.beta2, f->c.lambda_s, f->c.lambda_tau, f->c.lambda_c,
           f->c.acc_max, f->c.acc_alpha, f->c.acc_slope, f->c.acc_bend, f->c.acc_noise);
}

/* Writes the fit to --out; returns 0 or the exit status 1. */
static int write_out(const char *text, const char *out) {
  FILE *fo = fopen(out, "w");
  if (!fo || fputs(text, fo) < 0 || fclose(fo)) {
    fprintf(stderr, "hetsim fit-convergence: --out %s: cannot write\n", out);
    return 1;
  }
  return 0;
}

/* Prints the fit (text: the key=value lines; or one JSON object). */
static void emit(const fit_data *f, const char *model, double rms, double arms, const char *const *fitted,
                 const fit_origin *o, const char *text, const char *out, int json) {
  stall st[MAX_STALLS];
  int ns = stalls_of(f, st);
  for (int i = 0; i < ns; i++)
    fprintf(stderr, "hetsim fit-convergence: warning: local SGD at period %g levels off above the fit (its last third "
            "of points %.3g above it on average, at loss %.4g): lambda_tau only slows progress and cannot follow a "
            "stall, so a target below about %.4g may be predicted reached that it never reaches "
            "(docs/convergence.md)\n", st[i].tau, st[i].above, st[i].level, st[i].level);
  if (json) {
    hs_json j;
    hs_json_init(&j, stdout, 1);
    hs_json_object_begin(&j);
    hs_json_key(&j, "model"); hs_json_string(&j, model);
    if (o->curves) {
      hs_json_key(&j, "curves"); hs_json_string(&j, o->curves);
      hs_json_key(&j, "source"); hs_json_string(&j, o->source);
      hs_json_key(&j, "points"); hs_json_int(&j, f->n);
      hs_json_key(&j, "groups"); hs_json_int(&j, f->n_runs);
      hs_json_key(&j, "dataset_size"); hs_json_double(&j, o->dataset_size);
      hs_json_key(&j, "convergence_fit_id"); hs_json_int(&j, o->fit_id);
      hs_json_key(&j, "already_stored"); hs_json_bool(&j, o->existed);
      hs_json_key(&j, "db"); hs_json_string(&j, o->db);
    } else {
      hs_json_key(&j, "runs"); hs_json_array_begin(&j);
      for (int i = 0; i < f->n_runs; i++) hs_json_int(&j, f->runs[i].id);
      hs_json_array_end(&j);
      hs_json_key(&j, "evaluations"); hs_json_int(&j, f->n);
    }
    hs_json_key(&j, "fitted"); hs_json_array_begin(&j);
    for (int i = 0; fitted[i]; i++) hs_json_string(&j, fitted[i]);
    hs_json_array_end(&j);
    hs_json_key(&j, "loss_rms"); hs_json_double(&j, rms);
    hs_json_key(&j, "accuracy_rms"); hs_json_double(&j, arms);
    hs_json_key(&j, "params"); hs_json_object_begin(&j);
    const char *names[] = {"phi", "b0", "beta0", "beta1", "beta2", "lambda_s", "lambda_tau", "lambda_c", "acc_max", "acc_alpha",
                           "acc_slope", "acc_bend", "acc_noise"};
    double vals[] = {f->c.phi, f->c.b0, f->c.beta0, f->c.beta1, f->c.beta2, f->c.lambda_s, f->c.lambda_tau, f->c.lambda_c, f->c.acc_max, f->c.acc_alpha,
                     f->c.acc_slope, f->c.acc_bend, f->c.acc_noise};
    for (int i = 0; i < (int)(sizeof vals / sizeof vals[0]); i++) {
      hs_json_key(&j, names[i]);
      hs_json_double(&j, vals[i]);
    }
    hs_json_object_end(&j);
    hs_json_key(&j, "stalls");
    hs_json_array_begin(&j);
    for (int i = 0; i < ns; i++) {
      hs_json_object_begin(&j);
      hs_json_key(&j, "period"); hs_json_double(&j, st[i].tau);
      hs_json_key(&j, "above"); hs_json_double(&j, st[i].above);
      hs_json_key(&j, "level"); hs_json_double(&j, st[i].level);
      hs_json_object_end(&j);
    }
    hs_json_array_end(&j);
    hs_json_key(&j, "out"); hs_json_string(&j, out);
    hs_json_object_end(&j);
  } else {
    fputs(text, stdout);
    if (o->curves)
      printf("# %s as convergence_fit %lld in %s: `hetsim sim --convergence analytic --model %s` uses it\n",
             o->existed ? "already stored" : "stored", (long long)o->fit_id, o->db, model);
  }
}

int hs_cmd_fit(int argc, char **argv) {
  static const struct option opts[] = {
      {"db", required_argument, NULL, 'd'}, {"convergence", required_argument, NULL, 'c'},
      {"out", required_argument, NULL, 'o'}, {"json", no_argument, NULL, 'j'},
      {"curves", required_argument, NULL, 'C'}, {"model", required_argument, NULL, 'm'},
      {"dataset-size", required_argument, NULL, 'D'}, {"classes", required_argument, NULL, 'K'},
      {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
  };
  const char *db_path = HS_DEFAULT_DB, *conv = "analytic", *out = NULL, *curves = NULL, *model = NULL;
  int json = 0, c;
  int64_t dsize = 0, classes = -1;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'd': db_path = optarg; break;
    case 'c': conv = optarg; break;
    case 'o': out = optarg; break;
    case 'j': json = 1; break;
    case 'C': curves = optarg; break;
    case 'm': model = optarg; break;
    case 'D':
      if (hs_cli_parse_int64(optarg, 1, &dsize)) return bad("--dataset-size: expected a positive integer, got \"%s\"", optarg);
      break;
    case 'K':
      if (hs_cli_parse_int64(optarg, 1, &classes) || classes > 1000000)
        return bad("--classes: expected a positive integer, got \"%s\"", optarg);
      break;
    case 'h': return usage(stdout, 0);
    default: return bad("unknown or incomplete option \"%s\"; see --help", argv[optind - 1]);
    }
  }
  int nids = argc - optind;
  if (curves && nids) return bad("give either RUN_IDs or --curves FILE, not both");
  if (!curves && nids < 1) return bad("give at least one RUN_ID, or --curves FILE; see --help");
  if (curves && (!model || !*model)) return bad("--curves needs --model NAME: the model the curves are of");
  if (!curves && (model || dsize || classes >= 0))
    return bad("--model, --dataset-size and --classes go with --curves (runs know their model)");
  if (!hs_cli_conv_analytic(conv))
    return bad("--convergence: only the analytic model has parameters to fit, got \"%s\"", conv);
  fit_data f = {0};
  hs_diag d = {0};
  hs_store *s = NULL;
  int status = 2, rc;
  const char *fitted[16] = {NULL};
  int n_fitted = 0;
  double rms = NAN, arms = NAN;
  fit_origin origin = {.db = db_path};
  char source[600] = "", text[2048] = "";
  const hs_conv_model *m;
  hs_params p;

  if (curves) {
    const hs_model_info *mi = hs_zoo_find(model);
    if ((rc = load_curves(curves, (double)dsize, mi ? mi->dataset_train_size : 0, &f, source, sizeof source,
                          &origin.dataset_size, &d))) {
      fprintf(stderr, "hetsim fit-convergence: %s\n", d.msg);
      status = hs_exit_code(rc) == 2 ? 2 : 1;
      goto done;
    }
    /* A model outside the zoo starts from the table's defaults. */
    if ((rc = hs_conv_parse(conv, mi ? model : NULL, NULL, &m, &p, &d))) {
      fprintf(stderr, "hetsim fit-convergence: %s\n", d.msg);
      goto done;
    }
    hs_conv_coef_from(&p, &f.c);
    f.classes = classes > 0 ? (int)classes : mi ? mi->classes : 0;
    origin.curves = curves;
    origin.source = source;
    if ((status = fit_points(&f, &rms, &arms, &n_fitted, fitted))) goto done;
    /* Stored only once the fit exists and --out is written: bad input stores nothing. */
    fit_text(&f, model, rms, &origin, text, sizeof text);
    if (out && (status = write_out(text, out))) goto done;
    if ((status = hs_cli_store_open("fit-convergence", &s, db_path, 0))) goto done;
    hs_conv_fit_row row = {.model = model, .coef = &f.c, .dataset_size = origin.dataset_size,
                           .classes = f.classes, .fitted = fitted, .accuracy_rmse = arms,
                           .source = source, .points = f.n, .rmse = rms};
    if ((rc = hs_conv_fit_store(s, &row, &origin.fit_id, &origin.existed, &d))) {
      fprintf(stderr, "hetsim fit-convergence: %s: %s\n", db_path, d.msg);
      status = 1;
      goto done;
    }
    emit(&f, model, rms, arms, fitted, &origin, text, out, json);
    status = 0;
    goto done;
  }

  f.runs = calloc((size_t)nids, sizeof *f.runs);
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
    if ((rc = load_run(s, id, &f, &d))) {
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
  if ((rc = hs_conv_parse(conv, f.runs[0].model, NULL, &m, &p, &d))) {
    fprintf(stderr, "hetsim fit-convergence: %s\n", d.msg);
    goto done;
  }
  hs_conv_coef_from(&p, &f.c);
  f.classes = hs_zoo_find(f.runs[0].model)->classes;
  if ((status = fit_points(&f, &rms, &arms, &n_fitted, fitted))) goto done;
  fit_text(&f, f.runs[0].model, rms, &origin, text, sizeof text);
  if (out && (status = write_out(text, out))) goto done;
  emit(&f, f.runs[0].model, rms, arms, fitted, &origin, text, out, json);
  status = 0;
done:
  hs_store_close(s);
  free(f.runs);
  free(f.pts);
  return status;
}
