/* Helpers shared by every policy, declared in pol_policy.h: failure reporting, the active
 * workers and the even split of the global batch. Nothing here depends on another policy file
 * (the synchronous balanced loop's callbacks are pol_balance.c's). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "policies/pol_policy.h"

int hs_rt_fail(hs_runtime *rt, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hs_diag_vset(rt->ops->diag(rt), code, fmt, ap);
  va_end(ap);
  return code;
}

int hs_pol_active_list(hs_runtime *rt, int *ws, int cap) {
  int n = 0, total = hs_rt_n_workers(rt);
  for (int w = 0; w < total && n < cap; w++)
    if (hs_rt_active(rt, w)) ws[n++] = w;
  return n;
}

void hs_pol_even_split(int64_t B, int n, int *batches) {
  if (n <= 0) return;
  int64_t base = B / n, extra = B % n;
  for (int i = 0; i < n; i++) batches[i] = (int)(base + (i < extra ? 1 : 0));
}

static int group_reserve(hs_pol_group *g, int cap) {
  if (cap <= g->cap) return 0;
  int *ws = realloc(g->ws, (size_t)cap * sizeof *ws);
  if (ws) g->ws = ws;
  int *b = realloc(g->batch, (size_t)cap * sizeof *b);
  if (b) g->batch = b;
  int *sl = realloc(g->slot, (size_t)cap * sizeof *sl);
  if (sl) g->slot = sl;
  if (!ws || !b || !sl) return HS_ENOMEM;
  g->cap = cap;
  return 0;
}

int hs_pol_group_even(hs_pol_group *g, hs_runtime *rt) {
  int total = hs_rt_n_workers(rt);
  if (group_reserve(g, total > 0 ? total : 1))
    return hs_rt_fail(rt, HS_ENOMEM, "out of memory for %d workers", total);
  g->n = hs_pol_active_list(rt, g->ws, total);
  /* With nobody left the policy issues no work and the runtime reports the stall. */
  if (g->n == 0) return 0;
  int64_t B = hs_rt_global_batch(rt);
  if (B < g->n)
    return hs_rt_fail(rt, HS_EINVAL, "global batch %lld is smaller than the %d active workers",
                      (long long)B, g->n);
  hs_pol_even_split(B, g->n, g->batch);
  for (int w = 0; w < total; w++) g->slot[w] = -1;
  for (int i = 0; i < g->n; i++) {
    int w = g->ws[i], lim = hs_rt_max_batch(rt, w);
    g->slot[w] = i;
    if (lim > 0 && g->batch[i] > lim)
      return hs_rt_fail(rt, HS_EINVAL,
                        "worker %d cannot hold its share of the global batch: %d samples, memory "
                        "limit %d; use a smaller --global-batch or a policy that sizes batches",
                        w, g->batch[i], lim);
  }
  return 0;
}

void hs_pol_group_free(hs_pol_group *g) {
  free(g->ws);
  free(g->batch);
  free(g->slot);
  g->ws = g->batch = g->slot = NULL;
  g->n = g->cap = 0;
}
