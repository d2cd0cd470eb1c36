/* core_stats: see core_stats.h. */
#include "core/core_stats.h"

#include <stdlib.h>

int hs_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double hs_median_inplace(double *v, size_t n) {
  qsort(v, n, sizeof *v, hs_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
