#include "calib/cal_fit.h"

#include <gsl/gsl_blas.h>
#include <gsl/gsl_multifit.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Free parameters of each form, the knee counted for piecewise: a form needs at least this
 * many samples to be fitted, and one more to be judged on a held-out one. */
static const int form_min_points[HS_PERF_FORMS] = {
    [HS_PERF_LINEAR] = 2, [HS_PERF_CUBIC] = 4, [HS_PERF_PIECEWISE] = 4, [HS_PERF_SATURATING] = 3,
};
/* Order of preference when held-out errors are close: fewest parameters first. */
static const hs_perf_form simplest_first[HS_PERF_FORMS] = {
    HS_PERF_LINEAR, HS_PERF_SATURATING, HS_PERF_PIECEWISE, HS_PERF_CUBIC,
};
enum { SAT_GRID = 48 };

/* Weighted linear least squares y ~ X c with weights w; returns the weighted chi^2 or a
 * negative code. */
static int wls(const gsl_matrix *X, const gsl_vector *w, const gsl_vector *y, gsl_vector *c,
               double *chisq) {
  gsl_multifit_linear_workspace *ws = gsl_multifit_linear_alloc(X->size1, X->size2);
  gsl_matrix *cov = gsl_matrix_alloc(X->size2, X->size2);
  int rc = HS_ENOMEM;
  if (ws && cov) rc = gsl_multifit_wlinear(X, w, y, c, cov, chisq, ws) ? HS_EINVAL : 0;
  gsl_matrix_free(cov);
  gsl_multifit_linear_free(ws);
  return rc;
}

typedef struct lin_basis {
  int p;        /* columns */
  double scale; /* b is divided by this before the powers (cubic) */
  double knee;  /* piecewise */
} lin_basis;

static void basis_row(hs_perf_form f, const lin_basis *lb, double b, double *row) {
  double u = b / lb->scale;
  switch (f) {
  case HS_PERF_LINEAR: row[0] = 1; row[1] = b; break;
  case HS_PERF_CUBIC: row[0] = 1; row[1] = u; row[2] = u * u; row[3] = u * u * u; break;
  case HS_PERF_PIECEWISE:
    row[0] = 1;
    row[1] = b < lb->knee ? b : lb->knee;
    row[2] = b > lb->knee ? b - lb->knee : 0;
    break;
  case HS_PERF_SATURATING: {
    double b0 = lb->knee; /* b0 for a fixed-b0 solve */
    row[0] = 1;
    row[1] = b + b0 * expm1(-b / b0);
    break;
  }
  }
}

/* Solves a linear-in-parameters form with a given basis; fills m->p and *chisq. */
static int solve_linear(hs_perf_form f, const lin_basis *lb, const double *b, const double *t,
                        int n, hs_perf_model *m, double *chisq) {
  gsl_matrix *X = gsl_matrix_alloc((size_t)n, (size_t)lb->p);
  gsl_vector *w = gsl_vector_alloc((size_t)n), *y = gsl_vector_alloc((size_t)n);
  gsl_vector *c = gsl_vector_alloc((size_t)lb->p);
  int rc = HS_ENOMEM;
  m->n_points = 0;
  if (X && w && y && c) {
    double row[HS_PERF_MAX_PARAMS];
    for (int i = 0; i < n; i++) {
      basis_row(f, lb, b[i], row);
      for (int j = 0; j < lb->p; j++) gsl_matrix_set(X, (size_t)i, (size_t)j, row[j]);
      gsl_vector_set(w, (size_t)i, 1.0 / (t[i] * t[i]));
      gsl_vector_set(y, (size_t)i, t[i]);
    }
    rc = wls(X, w, y, c, chisq);
  }
  if (!rc) {
    memset(m->p, 0, sizeof m->p);
    m->form = f;
    switch (f) {
    case HS_PERF_LINEAR:
      m->p[0] = gsl_vector_get(c, 0), m->p[1] = gsl_vector_get(c, 1);
      break;
    case HS_PERF_CUBIC:
      for (int j = 0; j < 4; j++) m->p[j] = gsl_vector_get(c, (size_t)j) / pow(lb->scale, j);
      break;
    case HS_PERF_PIECEWISE:
      m->p[0] = gsl_vector_get(c, 0), m->p[1] = gsl_vector_get(c, 1);
      m->p[2] = gsl_vector_get(c, 2), m->p[3] = lb->knee;
      break;
    case HS_PERF_SATURATING:
      m->p[0] = gsl_vector_get(c, 0), m->p[1] = gsl_vector_get(c, 1), m->p[2] = lb->knee;
      break;
    }
  }
  gsl_matrix_free(X);
  gsl_vector_free(w);
  gsl_vector_free(y);
  gsl_vector_free(c);
  return rc;
}

/* --- saturating: t0 + k (b + b0 expm1(-b/b0)), parameters (t0, k, log b0) --------------- */

typedef struct sat_data {
  const double *b, *t;
  int n;
} sat_data;

static int sat_f(const gsl_vector *x, void *ctx, gsl_vector *f) {
  const sat_data *s = ctx;
  double t0 = gsl_vector_get(x, 0), k = gsl_vector_get(x, 1), b0 = exp(gsl_vector_get(x, 2));
  for (int i = 0; i < s->n; i++) {
    double model = t0 + k * (s->b[i] + b0 * expm1(-s->b[i] / b0));
    gsl_vector_set(f, (size_t)i, (model - s->t[i]) / s->t[i]);
  }
  return GSL_SUCCESS;
}

static int sat_df(const gsl_vector *x, void *ctx, gsl_matrix *J) {
  const sat_data *s = ctx;
  double k = gsl_vector_get(x, 1), b0 = exp(gsl_vector_get(x, 2));
  for (int i = 0; i < s->n; i++) {
    double b = s->b[i], e = exp(-b / b0);
    double g = b + b0 * expm1(-b / b0);
    /* d/db0 [b0 (e^{-b/b0} - 1)] = e^{-b/b0} (1 + b/b0) - 1; times b0 for the log parameter. */
    double dg_dlog = (e * (1 + b / b0) - 1) * b0;
    gsl_matrix_set(J, (size_t)i, 0, 1.0 / s->t[i]);
    gsl_matrix_set(J, (size_t)i, 1, g / s->t[i]);
    gsl_matrix_set(J, (size_t)i, 2, k * dg_dlog / s->t[i]);
  }
  return GSL_SUCCESS;
}

static double rel_chisq(const hs_perf_model *m, const double *b, const double *t, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) {
    double r = (hs_perf_eval(m, b[i]) - t[i]) / t[i];
    s += r * r;
  }
  return s;
}

static int fit_saturating(const double *b, const double *t, int n, hs_perf_model *m) {
  double bmin = b[0], bmax = b[0];
  for (int i = 1; i < n; i++) bmin = fmin(bmin, b[i]), bmax = fmax(bmax, b[i]);
  /* Start: the best b0 on a geometric grid, each a linear solve for t0 and k. */
  double best = INFINITY;
  hs_perf_model start = {0};
  double lo = log(bmin / 8), hi = log(bmax * 4);
  for (int g = 0; g < SAT_GRID; g++) {
    lin_basis lb = {.p = 2, .scale = 1, .knee = exp(lo + (hi - lo) * g / (SAT_GRID - 1))};
    hs_perf_model c;
    double chisq;
    if (solve_linear(HS_PERF_SATURATING, &lb, b, t, n, &c, &chisq)) continue;
    if (chisq < best) best = chisq, start = c;
  }
  if (!isfinite(best)) return HS_EINVAL;
  *m = start;
  if (n < 4) return 0; /* three samples: the grid solve interpolates them already */

  /* Refine all three parameters together. */
  sat_data sd = {.b = b, .t = t, .n = n};
  gsl_multifit_nlinear_fdf fdf = {.f = sat_f, .df = sat_df, .n = (size_t)n, .p = 3, .params = &sd};
  gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
  gsl_multifit_nlinear_workspace *w =
      gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &fp, (size_t)n, 3);
  gsl_vector *x = gsl_vector_alloc(3);
  if (!w || !x) {
    gsl_multifit_nlinear_free(w);
    gsl_vector_free(x);
    return HS_ENOMEM;
  }
  gsl_vector_set(x, 0, start.p[0]);
  gsl_vector_set(x, 1, start.p[1]);
  gsl_vector_set(x, 2, log(start.p[2]));
  int info = 0;
  if (!gsl_multifit_nlinear_init(x, &fdf, w) &&
      !gsl_multifit_nlinear_driver(200, 1e-10, 1e-10, 1e-12, NULL, NULL, &info, w)) {
    const gsl_vector *r = gsl_multifit_nlinear_position(w);
    hs_perf_model c = {.form = HS_PERF_SATURATING};
    c.p[0] = gsl_vector_get(r, 0), c.p[1] = gsl_vector_get(r, 1), c.p[2] = exp(gsl_vector_get(r, 2));
    /* Keep the refinement only when it is finite and no worse than the start. */
    if (isfinite(c.p[0]) && isfinite(c.p[1]) && isfinite(c.p[2]) && c.p[2] > 0 &&
        rel_chisq(&c, b, t, n) <= rel_chisq(&start, b, t, n))
      *m = c;
  }
  gsl_multifit_nlinear_free(w);
  gsl_vector_free(x);
  return 0;
}

/* --- one form, then selection ------------------------------------------------------------ */

static int check_points(const double *b, const double *t, int n, int need, hs_diag *d) {
  if (n < need)
    return hs_diag_set(d, HS_EINVAL, "too few batch sizes to fit: need at least %d, got %d", need, n);
  for (int i = 0; i < n; i++) {
    if (!(b[i] > 0) || !isfinite(b[i]))
      return hs_diag_set(d, HS_EINVAL, "sample %d: batch must be positive, got %g", i, b[i]);
    if (!(t[i] > 0) || !isfinite(t[i]))
      return hs_diag_set(d, HS_EINVAL, "sample %d (batch %g): time must be positive and finite, got %g s", i, b[i], t[i]);
    for (int j = 0; j < i; j++)
      if (b[j] == b[i]) return hs_diag_set(d, HS_EINVAL, "samples %d and %d have the same batch %g; give one time per batch size", j, i, b[i]);
  }
  return 0;
}

int hs_fit_form(hs_perf_form f, const double *b, const double *t, int n, hs_perf_model *out,
                double *r2, hs_diag *d) {
  if (!hs_perf_form_name(f)) return hs_diag_set(d, HS_EINVAL, "unknown form %d", (int)f);
  int rc = check_points(b, t, n, form_min_points[f], d);
  if (rc) {
    hs_diag_prefix(d, "%s fit", hs_perf_form_name(f));
    return rc;
  }
  double bmax = 0, chisq = 0;
  for (int i = 0; i < n; i++) bmax = fmax(bmax, b[i]);
  hs_perf_model m = {.form = f};
  switch (f) {
  case HS_PERF_LINEAR:
  case HS_PERF_CUBIC: {
    lin_basis lb = {.p = f == HS_PERF_LINEAR ? 2 : 4, .scale = bmax};
    rc = solve_linear(f, &lb, b, t, n, &m, &chisq);
    break;
  }
  case HS_PERF_PIECEWISE: {
    /* The knee is searched over the interior sample batches. */
    double *sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) return hs_diag_set(d, HS_ENOMEM, "out of memory");
    memcpy(sorted, b, (size_t)n * sizeof *sorted);
    gsl_sort(sorted, 1, (size_t)n);
    double best = INFINITY;
    for (int j = 1; j + 1 < n; j++) {
      lin_basis lb = {.p = 3, .scale = 1, .knee = sorted[j]};
      hs_perf_model c;
      if (solve_linear(f, &lb, b, t, n, &c, &chisq)) continue;
      if (chisq < best) best = chisq, m = c;
    }
    free(sorted);
    rc = isfinite(best) ? 0 : HS_EINVAL;
    break;
  }
  case HS_PERF_SATURATING: rc = fit_saturating(b, t, n, &m); break;
  }
  if (rc == HS_ENOMEM) return hs_diag_set(d, rc, "%s fit: out of memory", hs_perf_form_name(f));
  if (rc) return hs_diag_set(d, HS_EINVAL, "%s fit: the least-squares solve failed", hs_perf_form_name(f));
  for (int j = 0; j < hs_perf_form_nparams(f); j++)
    if (!isfinite(m.p[j])) return hs_diag_set(d, HS_EINVAL, "%s fit: non-finite parameter", hs_perf_form_name(f));
  if (r2) {
    double mean = 0, ss_res = 0, ss_tot = 0;
    for (int i = 0; i < n; i++) mean += t[i] / n;
    for (int i = 0; i < n; i++) {
      double e = hs_perf_eval(&m, b[i]) - t[i];
      ss_res += e * e;
      ss_tot += (t[i] - mean) * (t[i] - mean);
    }
    *r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : (ss_res == 0 ? 1 : 0);
  }
  *out = m;
  return 0;
}

/* Median leave-one-out relative error of form f, or NaN with `why` filled. */
static double heldout_error(hs_perf_form f, const double *b, const double *t, int n, char *why,
                            size_t why_size) {
  if (n - 1 < form_min_points[f]) {
    snprintf(why, why_size, "%s needs %d batch sizes to be judged on a held-out one, got %d",
             hs_perf_form_name(f), form_min_points[f] + 1, n);
    return NAN;
  }
  double *bb = malloc((size_t)n * sizeof *bb), *tt = malloc((size_t)n * sizeof *tt);
  double *err = malloc((size_t)n * sizeof *err);
  double med = NAN;
  if (!bb || !tt || !err) {
    snprintf(why, why_size, "out of memory");
    goto out;
  }
  for (int i = 0; i < n; i++) {
    int k = 0;
    for (int j = 0; j < n; j++)
      if (j != i) bb[k] = b[j], tt[k] = t[j], k++;
    hs_perf_model m;
    hs_diag d = {0};
    if (hs_fit_form(f, bb, tt, n - 1, &m, NULL, &d)) {
      snprintf(why, why_size, "holding out batch %g: %.100s", b[i], d.msg);
      goto out;
    }
    err[i] = fabs(hs_perf_eval(&m, b[i]) - t[i]) / t[i];
  }
  gsl_sort(err, 1, (size_t)n);
  med = gsl_stats_median_from_sorted_data(err, 1, (size_t)n);
out:
  free(bb);
  free(tt);
  free(err);
  return med;
}

enum { FALL_GRID = 256 };

/* The batches at which a fit is checked for falling: a geometric grid of FALL_GRID batches
 * from 1 to the largest sample, and every sample batch, ascending, into pts (FALL_GRID + n). */
static int fall_points(const double *b, int n, double *pts) {
  double bmax = 1;
  for (int i = 0; i < n; i++) bmax = fmax(bmax, b[i]);
  int np = 0;
  for (int g = 0; g < FALL_GRID; g++) pts[np++] = exp(log(bmax) * g / (FALL_GRID - 1));
  for (int i = 0; i < n; i++) pts[np++] = b[i];
  gsl_sort(pts, 1, (size_t)np);
  return np;
}

/* 1 when model m's time falls, or is not positive, at the ascending batches pts (fall_points),
 * with the place in why. Step times grow with the batch; a fit that falls is noise fitted as
 * shape (a flat segment tilted down by a noisy point), and its users would take it literally:
 * LBB's solve and the simulator's batch rules assume that a larger batch never takes less
 * time. */
static int model_falls(const hs_perf_model *m, const double *pts, int np, char *why, size_t why_size) {
  double prev = NAN, prev_b = NAN;
  for (int j = 0; j < np; j++) {
    double t = hs_perf_eval(m, pts[j]);
    if (!(t > 0)) {
      snprintf(why, why_size, "the fitted time is %.3g s at batch %.4g", t, pts[j]);
      return 1;
    }
    /* A fall within rounding (a flat segment evaluated at two nearby batches) is not one. */
    if (j > 0 && t < prev * (1 - 1e-9)) {
      snprintf(why, why_size, "the fitted time falls from %.4g s at batch %.4g to %.4g s at "
               "batch %.4g", prev, prev_b, t, pts[j]);
      return 1;
    }
    prev = t, prev_b = pts[j];
  }
  return 0;
}

int hs_fit_select(const double *b, const double *t, int n, hs_fit_set *out, hs_diag *d) {
  memset(out, 0, sizeof *out);
  int rc = check_points(b, t, n, HS_FIT_MIN_POINTS, d);
  if (rc) return rc;
  double *pts = malloc((size_t)(FALL_GRID + n) * sizeof *pts);
  if (!pts) return hs_diag_set(d, HS_ENOMEM, "out of memory");
  int np = fall_points(b, n, pts);
  double best = INFINITY;
  for (int f = 0; f < HS_PERF_FORMS; f++) {
    hs_fit_result *r = &out->r[f];
    hs_diag fd = {0};
    r->heldout = NAN;
    r->r2 = NAN;
    r->model.form = (hs_perf_form)f;
    if (hs_fit_form((hs_perf_form)f, b, t, n, &r->model, &r->r2, &fd)) {
      snprintf(r->why, sizeof r->why, "%.150s", fd.msg);
      continue;
    }
    r->ok = 1;
    r->heldout = heldout_error((hs_perf_form)f, b, t, n, r->why, sizeof r->why);
    if (isfinite(r->heldout))
      r->falls = model_falls(&r->model, pts, np, r->why, sizeof r->why);
    if (r->heldout < best) best = r->heldout;
  }
  free(pts);
  if (!isfinite(best))
    return hs_diag_set(d, HS_EINVAL, "no form could be judged on held-out batch sizes (%d samples)", n);
  /* Among the judged forms whose time does not fall, when there is one (a phase whose time
   * does not depend on the batch, such as the update, may have every fit tilted down by
   * noise: then among all judged forms). */
  double best_rising = INFINITY;
  for (int f = 0; f < HS_PERF_FORMS; f++)
    if (!out->r[f].falls && out->r[f].heldout < best_rising) best_rising = out->r[f].heldout;
  int rising_only = isfinite(best_rising);
  if (rising_only) best = best_rising;
  for (int i = 0; i < HS_PERF_FORMS; i++) {
    const hs_fit_result *r = &out->r[simplest_first[i]];
    if (r->ok && !(rising_only && r->falls) && r->heldout <= best * 1.1 + 0.001) {
      out->chosen = simplest_first[i];
      break;
    }
  }
  return 0;
}

int hs_fit_comm(const double *bytes, const double *t, int n, double *alpha_s,
                double *beta_bytes_per_s, double *r2, hs_diag *d) {
  int distinct = 0;
  for (int i = 0; i < n; i++) {
    if (!(bytes[i] >= 0) || !isfinite(bytes[i]))
      return hs_diag_set(d, HS_EINVAL, "sample %d: message size must be >= 0 bytes, got %g", i, bytes[i]);
    if (!(t[i] > 0) || !isfinite(t[i]))
      return hs_diag_set(d, HS_EINVAL, "sample %d (%g bytes): time must be positive and finite, got %g s", i, bytes[i], t[i]);
    int seen = 0;
    for (int j = 0; j < i; j++) seen |= bytes[j] == bytes[i];
    distinct += !seen;
  }
  if (distinct < 2)
    return hs_diag_set(d, HS_EINVAL, "communication fit: need at least 2 distinct message sizes, got %d", distinct);
  /* Weighted normal equations for t = a + s*n, weights 1/t^2, scaled by the shortest time
   * squared (the solution is the same) so that no weight overflows: at most 1, the shortest's. */
  double tmin = gsl_stats_min(t, 1, (size_t)n);
  double sw = 0, sn = 0, snn = 0, st = 0, snt = 0;
  for (int i = 0; i < n; i++) {
    double w = (tmin / t[i]) * (tmin / t[i]);
    sw += w, sn += w * bytes[i], snn += w * bytes[i] * bytes[i];
    st += w * t[i], snt += w * bytes[i] * t[i];
  }
  double det = sw * snn - sn * sn;
  double s = (sw * snt - sn * st) / det, a = (st - s * sn) / sw;
  if (isfinite(det) && !(a >= 0)) a = 0, s = snt / snn; /* through the origin */
  if (!isfinite(det) || !isfinite(s) || !isfinite(a))
    return hs_diag_set(d, HS_EINVAL, "communication fit: the sizes and times are too far apart to fit a line "
                       "(%g to %g bytes, %g to %g s)", gsl_stats_min(bytes, 1, (size_t)n),
                       gsl_stats_max(bytes, 1, (size_t)n), gsl_stats_min(t, 1, (size_t)n), gsl_stats_max(t, 1, (size_t)n));
  if (!(s > 0))
    return hs_diag_set(d, HS_EINVAL, "communication fit: time does not grow with message size (slope %g s/byte)", s);
  *alpha_s = a;
  *beta_bytes_per_s = 1.0 / s;
  if (r2) {
    double mean = 0, ss_res = 0, ss_tot = 0;
    for (int i = 0; i < n; i++) mean += t[i] / n;
    for (int i = 0; i < n; i++) {
      double e = a + s * bytes[i] - t[i];
      ss_res += e * e, ss_tot += (t[i] - mean) * (t[i] - mean);
    }
    *r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
  }
  return 0;
}
