/* Comparing two runs' iteration times. See sim_compare.h. */
#include "sim/sim_compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_stats.h"

/* A sorted copy of v[0..n); NULL when out of memory. */
static double *sorted_copy(const double *v, size_t n) {
  double *c = malloc(n * sizeof *c);
  if (!c) return NULL;
  memcpy(c, v, n * sizeof *c);
  qsort(c, n, sizeof *c, hs_cmp_double);
  return c;
}

int hs_wasserstein1(const double *a, size_t na, const double *b, size_t nb, double *out, hs_diag *d) {
  *out = NAN;
  if (!na || !nb) return hs_diag_set(d, HS_EINVAL, "Wasserstein distance of an empty list of values");
  for (size_t i = 0; i < na; i++)
    if (!isfinite(a[i])) return hs_diag_set(d, HS_EINVAL, "Wasserstein distance: value %zu of the first list is not finite", i);
  for (size_t i = 0; i < nb; i++)
    if (!isfinite(b[i])) return hs_diag_set(d, HS_EINVAL, "Wasserstein distance: value %zu of the second list is not finite", i);
  double *x = sorted_copy(a, na), *y = sorted_copy(b, nb);
  if (!x || !y) {
    free(x);
    free(y);
    return hs_diag_set(d, HS_ENOMEM, "out of memory for the Wasserstein distance");
  }
  /* Walk the quantile functions together: on u in (u_prev, u_next], Q_a = x[i] and Q_b = y[j],
   * where u_next is the nearer of (i + 1)/na and (j + 1)/nb. Comparing i*nb with j*na in integers
   * keeps equal breakpoints equal (no drift from summing 1/na). */
  double w = 0;
  size_t i = 0, j = 0;
  double u = 0;
  while (i < na && j < nb) {
    /* the next breakpoint: (i+1)/na against (j+1)/nb */
    unsigned long long ai = (unsigned long long)(i + 1) * nb, bj = (unsigned long long)(j + 1) * na;
    double next = ai <= bj ? (double)(i + 1) / (double)na : (double)(j + 1) / (double)nb;
    w += fabs(x[i] - y[j]) * (next - u);
    u = next;
    if (ai <= bj) i++;
    if (bj <= ai) j++;
  }
  free(x);
  free(y);
  *out = w;
  return 0;
}

int hs_iter_compare_times(const double *ref, const double *cmp, size_t n, hs_iter_compare *out, hs_diag *d) {
  out->n = 0;
  out->median_error = out->p95_error = out->ref_mean = out->cmp_mean = NAN;
  out->mean_error = out->wasserstein = out->wasserstein_rel = NAN;
  for (size_t i = 0; i < n; i++)
    if (!isfinite(ref[i]) || !isfinite(cmp[i]))
      return hs_diag_set(d, HS_EINVAL, "interval %zu: a time that is not finite", i);
  double *err = malloc((n ? n : 1) * sizeof *err), *r = malloc((n ? n : 1) * sizeof *r),
         *c = malloc((n ? n : 1) * sizeof *c);
  int rc = 0;
  if (!err || !r || !c) {
    rc = hs_diag_set(d, HS_ENOMEM, "out of memory comparing %zu intervals", n);
    goto out;
  }
  size_t m = 0;
  double sr = 0, sc = 0;
  for (size_t i = 0; i < n; i++) {
    if (!(ref[i] > 0)) continue;
    err[m] = fabs(cmp[i] - ref[i]) / ref[i];
    r[m] = ref[i];
    c[m] = cmp[i];
    sr += ref[i];
    sc += cmp[i];
    m++;
  }
  if (!m) goto out;
  qsort(err, m, sizeof *err, hs_cmp_double);
  out->n = (int64_t)m;
  out->median_error = m % 2 ? err[m / 2] : 0.5 * (err[m / 2 - 1] + err[m / 2]);
  size_t k = (size_t)ceil(0.95 * (double)m);
  out->p95_error = err[k ? k - 1 : 0];
  out->ref_mean = sr / (double)m;
  out->cmp_mean = sc / (double)m;
  out->mean_error = out->cmp_mean / out->ref_mean - 1;
  if ((rc = hs_wasserstein1(r, m, c, m, &out->wasserstein, d))) goto out;
  out->wasserstein_rel = out->wasserstein / out->ref_mean;
out:
  free(err);
  free(r);
  free(c);
  return rc;
}
