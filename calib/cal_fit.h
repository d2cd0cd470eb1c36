/* cal_fit: least-squares fits of step time against batch size, model selection on held-out
 * batch sizes, and the alpha + n/beta fit of communication time against message size.
 *
 * Method (docs: calib/README.md):
 * - Every fit minimises the relative squared error sum(((t_hat(b_i) - t_i) / t_i)^2), i.e.
 *   weighted least squares with weights 1/t_i^2, because timings are compared in relative
 *   terms and span orders of magnitude across a batch sweep.
 * - linear, cubic: gsl_multifit_wlinear (cubic in b/b_max, for conditioning, then rescaled).
 *   piecewise: for each interior sample batch as the knee, gsl_multifit_wlinear on the basis
 *   {1, min(b, knee), max(b - knee, 0)}; the knee with the smallest weighted residual wins.
 *   saturating (core_perfmodel.h): a grid over b0 (linear in t0, k for a fixed b0) gives the
 *   start, gsl_multifit_nlinear (trust region, Levenberg-Marquardt) refines t0, k, log b0.
 * - Held-out error: leave-one-out over batch sizes. For each sample i the form is fitted to
 *   the other samples and judged on |t_hat(b_i) - t_i| / t_i; the stored figure is the median
 *   over i. A form needs one more sample than it has free parameters to be judged.
 * - Selection: the simplest form (linear, saturating, piecewise, cubic, in that order) whose
 *   held-out error is at most best * 1.1 + 0.001, where best is the smallest held-out error.
 * - R^2 is the plain coefficient of determination of the fit on all samples.
 * Contract: pure functions of their inputs; no I/O; errors as HS_EINVAL with a message.
 * Units: seconds, samples, bytes. */
#ifndef HS_CAL_FIT_H
#define HS_CAL_FIT_H

#include "core/core_error.h"
#include "core/core_perfmodel.h"

/* The fewest distinct batch sizes a selection accepts. */
#define HS_FIT_MIN_POINTS 3

typedef struct hs_fit_result {
  int ok;                /* 1: fitted on all samples (why is empty) */
  hs_perf_model model;   /* max_batch left 0 */
  double r2;             /* on all samples */
  double heldout;        /* median leave-one-out relative error; NaN when it could not be judged */
  int falls;             /* 1: the fitted time falls (or is not positive) somewhere between
                            batch 1 and the largest sample: not chosen while a form that does
                            not fall is judged */
  char why[160];         /* when !ok, heldout is NaN or falls: the reason */
} hs_fit_result;

typedef struct hs_fit_set {
  hs_fit_result r[HS_PERF_FORMS]; /* indexed by hs_perf_form */
  int chosen;                     /* an hs_perf_form */
} hs_fit_set;

/* Fits one form to n samples (batch b[i] > 0, distinct; time t[i] > 0). */
int hs_fit_form(hs_perf_form f, const double *b, const double *t, int n, hs_perf_model *out,
                double *r2, hs_diag *d);
/* Fits every form, judges each on held-out batch sizes and chooses one (see above). Needs at
 * least HS_FIT_MIN_POINTS distinct batch sizes with positive finite times. */
int hs_fit_select(const double *b, const double *t, int n, hs_fit_set *out, hs_diag *d);

/* t(n) = alpha + n / beta over message sizes bytes[i] >= 0 (at least 2 distinct) with times
 * t[i] > 0, weights 1/t^2. A negative intercept is refitted through the origin (alpha = 0);
 * a time that does not grow with size is HS_EINVAL. */
int hs_fit_comm(const double *bytes, const double *t, int n, double *alpha_s,
                double *beta_bytes_per_s, double *r2, hs_diag *d);

#endif
