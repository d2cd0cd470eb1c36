/* pol_clock: the stale synchronous clocks in heaps against the scan they replace (the former
 * code of ssp and ashl: the smallest clock of the active workers by a pass over them, and the
 * blocked workers within the bound released in worker order), on random scripts of pushes,
 * joins, leaves and clock resets; and a small case by hand. */
#include <stdint.h>
#include <stdlib.h>

#include "policies/pol_clock.h"
#include "tests/hs_test.h"

enum { MAXW = 200 };

/* The oracle: the former scan, on plain arrays. */
typedef struct ref {
  int64_t clock[MAXW];
  char blocked[MAXW], active[MAXW];
  int n;
  int64_t min;
} ref;

static int ref_release(ref *r, int64_t s, int *out) {
  int64_t m = INT64_MAX;
  for (int w = 0; w < r->n; w++)
    if (r->active[w] && r->clock[w] < m) m = r->clock[w];
  if (m == INT64_MAX) return 0;
  r->min = m;
  int k = 0;
  for (int w = 0; w < r->n; w++)
    if (r->active[w] && r->blocked[w] && r->clock[w] - r->min <= s) {
      r->blocked[w] = 0;
      out[k++] = w;
    }
  return k;
}

static uint64_t lcg(uint64_t *x) {
  *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
  return *x >> 33;
}

static int members(hs_pol_clocks *c, const ref *r) {
  int ws[MAXW], n = 0;
  for (int w = 0; w < r->n; w++)
    if (r->active[w]) ws[n++] = w;
  return hs_pol_clocks_members(c, ws, n);
}

/* One random script: n0 workers, staleness s, steps operations. Returns mismatches. */
static int script(uint64_t seed, int n0, int64_t s, int steps) {
  uint64_t x = seed;
  ref r = {.n = n0};
  hs_pol_clocks c = {0};
  int bad = 0, out[MAXW];
  if (hs_pol_clocks_reserve(&c, MAXW)) return 1;
  for (int w = 0; w < n0; w++) r.active[w] = 1;
  if (members(&c, &r)) bad++;
  for (int i = 0; i < steps && !bad; i++) {
    int op = (int)(lcg(&x) % 100), w = (int)(lcg(&x) % (uint64_t)r.n);
    if (op < 88) {
      /* A push, as ssp does it: tick, pull or block by the old minimum, release when the
       * pusher was at it. Blocked workers do not push; inactive ones may (in flight). */
      if (r.blocked[w] && r.active[w]) continue;
      int64_t before = r.clock[w];
      r.clock[w]++;
      hs_pol_clocks_set(&c, w, c.clock[w] + 1);
      int rel = !r.active[w] || before == r.min;
      if (r.active[w] && r.clock[w] - r.min > s) {
        r.blocked[w] = 1;
        hs_pol_clocks_block(&c, w);
      }
      if (rel) {
        int k = ref_release(&r, s, out), k2 = hs_pol_clocks_release(&c, s);
        if (k != k2) bad++;
        for (int j = 0; j < k && !bad; j++) bad += out[j] != c.out[j];
      }
    } else if (op < 93 && r.n < MAXW) {
      /* A join: a new worker, or a former one back, level with the slowest. */
      int j = lcg(&x) % 2 ? r.n++ : w;
      if (r.active[j]) continue;
      r.active[j] = 1;
      r.clock[j] = r.min;
      r.blocked[j] = 0;
      c.clock[j] = c.min;
      c.blocked[j] = 0;
      if (members(&c, &r)) bad++;
    } else if (op < 97) {
      /* A leave (its blocked flag stays, as the policies leave it), then a release. */
      r.active[w] = 0;
      if (members(&c, &r)) bad++;
      int k = ref_release(&r, s, out), k2 = hs_pol_clocks_release(&c, s);
      if (k != k2) bad++;
      for (int j = 0; j < k && !bad; j++) bad += out[j] != c.out[j];
    } else if (r.active[w] && !r.blocked[w]) {
      /* ashl's entry into SHL: the clock set level with the slowest. */
      r.clock[w] = r.min;
      hs_pol_clocks_set(&c, w, c.min);
    }
    if (c.min != r.min) bad++;
    int64_t m = INT64_MAX;
    for (int v = 0; v < r.n; v++)
      if (r.active[v] && r.clock[v] < m) m = r.clock[v];
    if (hs_pol_clocks_min_now(&c) != m) bad++;
    for (int v = 0; v < r.n; v++) bad += c.clock[v] != r.clock[v] || c.blocked[v] != r.blocked[v];
  }
  if (bad) fprintf(stderr, "  script seed %llu n0 %d s %lld: mismatch\n", (unsigned long long)seed, n0, (long long)s);
  hs_pol_clocks_free(&c);
  return bad;
}

static void test_random_scripts_match_scan(void) {
  const int64_t bounds[] = {0, 1, 3, 7};
  const int sizes[] = {1, 2, 5, 17, 64};
  int bad = 0, k = 0;
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 5; b++)
      for (int seed = 1; seed <= 6; seed++, k++) bad += script((uint64_t)seed * 7919 + (uint64_t)k, sizes[b], bounds[a], 4000);
  ASSERT_EQ(bad, 0);
}

/* By hand: s = 1, workers 0..2. Worker 0 pushes twice (clock 2, two ahead of 0: blocked);
 * worker 2 then pushes (clock 1) and worker 1 pushes (clock 1): the minimum becomes 1 and
 * worker 0 is released. */
static void test_by_hand(void) {
  hs_pol_clocks c = {0};
  ASSERT_EQ(hs_pol_clocks_reserve(&c, 3), 0);
  const int ws[3] = {0, 1, 2};
  ASSERT_EQ(hs_pol_clocks_members(&c, ws, 3), 0);
  ASSERT_EQ(hs_pol_clocks_min_now(&c), 0);
  hs_pol_clocks_set(&c, 0, 1);
  hs_pol_clocks_set(&c, 0, 2);
  hs_pol_clocks_block(&c, 0);
  ASSERT_EQ(hs_pol_clocks_release(&c, 1), 0); /* the minimum is still 0 */
  hs_pol_clocks_set(&c, 2, 1);
  ASSERT_EQ(hs_pol_clocks_release(&c, 1), 0);
  ASSERT_EQ(c.min, 0);
  hs_pol_clocks_set(&c, 1, 1);
  ASSERT_EQ(hs_pol_clocks_release(&c, 1), 1);
  ASSERT_EQ(c.min, 1);
  ASSERT_EQ(c.out[0], 0);
  ASSERT_EQ(c.blocked[0], 0);
  /* No active worker: nothing moves. */
  ASSERT_EQ(hs_pol_clocks_members(&c, ws, 0), 0);
  ASSERT_EQ(hs_pol_clocks_min_now(&c), INT64_MAX);
  ASSERT_EQ(hs_pol_clocks_release(&c, 1), 0);
  ASSERT_EQ(c.min, 1);
  /* A worker beyond the table is refused. */
  const int far[1] = {3};
  ASSERT(hs_pol_clocks_members(&c, far, 1) != 0);
  hs_pol_clocks_free(&c);
}

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
      {"random_scripts_match_scan", test_random_scripts_match_scan},
      {"by_hand", test_by_hand},
      {NULL, NULL},
  };
  return hs_test_main("pol_clock", cases, argc, argv);
}
