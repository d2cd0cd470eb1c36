/* pol_clock: the stale synchronous clocks in two binary heaps. See pol_clock.h. */
#include "policies/pol_clock.h"

#include <stdlib.h>

#include "core/core_error.h"

int hs_pol_clocks_reserve(hs_pol_clocks *c, int n) {
  if (n <= c->cap) return 0;
  size_t m = (size_t)n;
  int64_t *clock = realloc(c->clock, m * sizeof *clock);
  if (clock) c->clock = clock;
  char *blocked = realloc(c->blocked, m);
  if (blocked) c->blocked = blocked;
  int *pos = realloc(c->pos, m * sizeof *pos);
  if (pos) c->pos = pos;
  int *heap = realloc(c->heap, m * sizeof *heap);
  if (heap) c->heap = heap;
  int *bheap = realloc(c->bheap, m * sizeof *bheap);
  if (bheap) c->bheap = bheap;
  int *out = realloc(c->out, m * sizeof *out);
  if (out) c->out = out;
  if (!clock || !blocked || !pos || !heap || !bheap || !out) return HS_ENOMEM;
  for (int w = c->cap; w < n; w++) {
    c->clock[w] = 0;
    c->blocked[w] = 0;
    c->pos[w] = -1;
  }
  c->cap = n;
  return 0;
}

/* --- the active workers: a min-heap on clock, with each worker's index in pos ----------- */

static void heap_put(hs_pol_clocks *c, int i, int w) {
  c->heap[i] = w;
  c->pos[w] = i;
}

static void heap_up(hs_pol_clocks *c, int i) {
  int w = c->heap[i];
  while (i > 0) {
    int p = (i - 1) / 2;
    if (c->clock[c->heap[p]] <= c->clock[w]) break;
    heap_put(c, i, c->heap[p]);
    i = p;
  }
  heap_put(c, i, w);
}

static void heap_down(hs_pol_clocks *c, int i) {
  int w = c->heap[i];
  for (;;) {
    int l = 2 * i + 1;
    if (l >= c->n) break;
    int m = l + 1 < c->n && c->clock[c->heap[l + 1]] < c->clock[c->heap[l]] ? l + 1 : l;
    if (c->clock[c->heap[m]] >= c->clock[w]) break;
    heap_put(c, i, c->heap[m]);
    i = m;
  }
  heap_put(c, i, w);
}

/* --- the blocked active workers: a min-heap on (clock, worker), pushed and popped only ---- */

static int before(const hs_pol_clocks *c, int a, int b) {
  return c->clock[a] < c->clock[b] || (c->clock[a] == c->clock[b] && a < b);
}

static void bheap_up(hs_pol_clocks *c, int i) {
  int w = c->bheap[i];
  while (i > 0) {
    int p = (i - 1) / 2;
    if (!before(c, w, c->bheap[p])) break;
    c->bheap[i] = c->bheap[p];
    i = p;
  }
  c->bheap[i] = w;
}

static void bheap_down(hs_pol_clocks *c, int i) {
  int w = c->bheap[i];
  for (;;) {
    int l = 2 * i + 1;
    if (l >= c->nb) break;
    int m = l + 1 < c->nb && before(c, c->bheap[l + 1], c->bheap[l]) ? l + 1 : l;
    if (!before(c, c->bheap[m], w)) break;
    c->bheap[i] = c->bheap[m];
    i = m;
  }
  c->bheap[i] = w;
}

static void bheap_build(hs_pol_clocks *c) {
  for (int i = c->nb / 2 - 1; i >= 0; i--) bheap_down(c, i);
}

int hs_pol_clocks_members(hs_pol_clocks *c, const int *ws, int n) {
  for (int i = 0; i < c->n; i++) c->pos[c->heap[i]] = -1;
  c->n = 0;
  c->nb = 0;
  for (int i = 0; i < n; i++) {
    if (ws[i] < 0 || ws[i] >= c->cap) return HS_EINVAL;
    heap_put(c, c->n++, ws[i]);
    if (c->blocked[ws[i]]) c->bheap[c->nb++] = ws[i];
  }
  for (int i = c->n / 2 - 1; i >= 0; i--) heap_down(c, i);
  bheap_build(c);
  return 0;
}

void hs_pol_clocks_set(hs_pol_clocks *c, int w, int64_t clock) {
  int64_t old = c->clock[w];
  c->clock[w] = clock;
  int i = c->pos[w];
  if (i < 0) return;
  if (clock < old) heap_up(c, i);
  else heap_down(c, i);
  /* A blocked worker's key moved inside the blocked heap: rebuild it (the policies never do
   * this in their normal course; the rebuild keeps the heap right if one does). */
  if (c->blocked[w] && clock != old) bheap_build(c);
}

void hs_pol_clocks_block(hs_pol_clocks *c, int w) {
  if (c->blocked[w]) return;
  c->blocked[w] = 1;
  if (c->pos[w] < 0) return;
  c->bheap[c->nb] = w;
  bheap_up(c, c->nb++);
}

int64_t hs_pol_clocks_min_now(const hs_pol_clocks *c) {
  return c->n > 0 ? c->clock[c->heap[0]] : INT64_MAX;
}

static int by_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int hs_pol_clocks_release(hs_pol_clocks *c, int64_t staleness) {
  if (c->n == 0) return 0;
  c->min = c->clock[c->heap[0]];
  int r = 0;
  while (c->nb > 0 && c->clock[c->bheap[0]] - c->min <= staleness) {
    int w = c->bheap[0];
    c->blocked[w] = 0;
    c->out[r++] = w;
    c->bheap[0] = c->bheap[--c->nb];
    if (c->nb > 0) bheap_down(c, 0);
  }
  if (r > 1) qsort(c->out, (size_t)r, sizeof *c->out, by_int);
  return r;
}

void hs_pol_clocks_free(hs_pol_clocks *c) {
  free(c->clock);
  free(c->blocked);
  free(c->pos);
  free(c->heap);
  free(c->bheap);
  free(c->out);
  *c = (hs_pol_clocks){0};
}
