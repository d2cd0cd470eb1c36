/* core_stats: the order statistics several modules take of a handful of doubles. No state;
 * thread-safe. */
#ifndef HS_CORE_STATS_H
#define HS_CORE_STATS_H

#include <stddef.h>

/* qsort's comparator for doubles, ascending (NaN-free input). */
int hs_cmp_double(const void *a, const void *b);
/* The median of v[0..n), n >= 1, which it sorts in place (the mean of the middle two when n is
 * even). */
double hs_median_inplace(double *v, size_t n);

#endif
