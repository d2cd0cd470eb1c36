/* Tests of the event engine: ordering, FIFO ties, pool reuse, growth, limits, determinism. */
#include <stdint.h>
#include <stdlib.h>

#include "hs_test.h"
#include "sim/sim_event.h"

static uint64_t xs(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void test_orders_by_time(void) {
  hs_engine *e;
  hs_diag d = {0};
  ASSERT_EQ(hs_engine_open(&e, 0, &d), 0);
  double ts[] = {5.0, 1.0, 3.0, 0.5, 4.0, 2.0};
  for (int i = 0; i < 6; i++) ASSERT_EQ(hs_engine_schedule(e, ts[i], 7, (uint32_t)i, i, &d), 0);
  double want[] = {0.5, 1.0, 2.0, 3.0, 4.0, 5.0};
  hs_event ev;
  for (int i = 0; i < 6; i++) {
    ASSERT_EQ(hs_engine_pop(e, &ev), 1);
    ASSERT_NEAR(ev.time, want[i], 0.0);
    ASSERT_NEAR(hs_engine_now(e), want[i], 0.0);
    ASSERT_EQ(ev.kind, 7);
  }
  ASSERT_EQ(hs_engine_pop(e, &ev), 0);
  ASSERT_EQ(hs_engine_processed(e), 6);
  hs_engine_close(e);
}

static void test_fifo_equal_times(void) {
  hs_engine *e;
  ASSERT_EQ(hs_engine_open(&e, 0, NULL), 0);
  /* Interleave pops and schedules at a few equal times; among equal times the pop order must
   * be the schedule order (arg carries a global counter). */
  uint64_t s = 42;
  int64_t counter = 0;
  int64_t last_arg[8];
  for (int i = 0; i < 8; i++) last_arg[i] = -1;
  double last_time = -1;
  for (int round = 0; round < 20000; round++) {
    int n = (int)(xs(&s) % 4);
    for (int k = 0; k < n; k++) {
      double t = hs_engine_now(e) + (double)(xs(&s) % 3);
      ASSERT_EQ(hs_engine_schedule(e, t, 0, 0, counter++, NULL), 0);
    }
    hs_event ev;
    if (hs_engine_pop(e, &ev)) {
      ASSERT(ev.time >= last_time);
      if (ev.time != last_time) for (int i = 0; i < 8; i++) last_arg[i] = -1;
      ASSERT(ev.arg > last_arg[0]);
      last_arg[0] = ev.arg;
      last_time = ev.time;
    }
  }
  hs_engine_close(e);
}

static void test_renumbering_keeps_fifo(void) {
  hs_engine *e;
  ASSERT_EQ(hs_engine_open(&e, 0, NULL), 0);
  hs_engine_test_rank_limit(e, 100);
  int64_t counter = 0, last = -1;
  double last_t = -1;
  for (int round = 0; round < 5000; round++) {
    for (int k = 0; k < 2; k++)
      ASSERT_EQ(hs_engine_schedule(e, hs_engine_now(e) + (double)(round % 2), 0, 0, counter++, NULL), 0);
    hs_event ev;
    ASSERT_EQ(hs_engine_pop(e, &ev), 1);
    if (ev.time != last_t) last = -1;
    ASSERT(ev.arg > last);
    last = ev.arg;
    last_t = ev.time;
  }
  hs_engine_close(e);
}

static void test_pool_reuse(void) {
  hs_engine *e;
  ASSERT_EQ(hs_engine_open(&e, 16, NULL), 0);
  /* With a limit of 16, a million schedule/pop pairs only work if slots are recycled. */
  for (int i = 0; i < 1000000; i++) {
    ASSERT_EQ(hs_engine_schedule(e, (double)i, 1, 2, i, NULL), 0);
    hs_event ev;
    ASSERT_EQ(hs_engine_pop(e, &ev), 1);
    if (ev.arg != i) { ASSERT_EQ(ev.arg, i); break; }
    if (ev.seq != (uint64_t)i) { ASSERT_EQ(ev.seq, i); break; }
  }
  ASSERT_EQ(hs_engine_pending(e), 0);
  hs_engine_close(e);
}

static void test_growth_to_1m(void) {
  hs_engine *e;
  ASSERT_EQ(hs_engine_open(&e, 0, NULL), 0);
  const int n = 1000000;
  uint64_t s = 7;
  for (int i = 0; i < n; i++)
    ASSERT_EQ(hs_engine_schedule(e, (double)(xs(&s) % 1000000) * 1e-3, 0, (uint32_t)i, i, NULL), 0);
  ASSERT_EQ(hs_engine_pending(e), n);
  hs_event ev, prev = {0};
  int ok = 1;
  for (int i = 0; i < n; i++) {
    hs_engine_pop(e, &ev);
    if (i && (ev.time < prev.time || (ev.time == prev.time && ev.seq < prev.seq))) ok = 0;
    prev = ev;
  }
  ASSERT(ok);
  ASSERT_EQ(hs_engine_pending(e), 0);
  hs_engine_close(e);
}

static void test_limit_message(void) {
  hs_engine *e;
  hs_diag d = {0};
  ASSERT_EQ(hs_engine_open(&e, 3, &d), 0);
  for (int i = 0; i < 3; i++) ASSERT_EQ(hs_engine_schedule(e, 1.0, 0, 0, 0, &d), 0);
  ASSERT_EQ(hs_engine_schedule(e, 1.0, 0, 0, 0, &d), HS_ELIMIT);
  ASSERT_EQ(d.code, HS_ELIMIT);
  ASSERT_CONTAINS(d.msg, "3");
  ASSERT_CONTAINS(d.msg, "--max-events");
  ASSERT_EQ(hs_engine_pending(e), 3);
  hs_engine_close(e);
}

static void test_schedule_in_past(void) {
  hs_engine *e;
  hs_diag d = {0};
  ASSERT_EQ(hs_engine_open(&e, 0, &d), 0);
  ASSERT_EQ(hs_engine_schedule(e, 2.0, 0, 0, 0, &d), 0);
  hs_event ev;
  ASSERT_EQ(hs_engine_pop(e, &ev), 1);
  ASSERT_EQ(hs_engine_schedule(e, 1.0, 0, 0, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "before now");
  ASSERT_EQ(hs_engine_schedule(e, NAN, 0, 0, 0, &d), HS_EINVAL);
  ASSERT_EQ(hs_engine_schedule(e, INFINITY, 0, 0, 0, &d), HS_EINVAL);
  ASSERT_EQ(hs_engine_schedule(e, 2.0, 0, 0, 0, &d), 0); /* equal to now is fine */
  ASSERT_EQ(hs_engine_pending(e), 1);
  hs_engine_close(e);
}

/* Runs a seeded random workload and records the popped sequence. */
static size_t run_workload(uint64_t seed, hs_event *log, size_t cap) {
  hs_engine *e;
  if (hs_engine_open(&e, 0, NULL)) return 0;
  uint64_t s = seed;
  size_t n = 0;
  for (int i = 0; i < 1000; i++)
    hs_engine_schedule(e, (double)(xs(&s) % 50), (uint32_t)(xs(&s) % 5), (uint32_t)i, i, NULL);
  hs_event ev;
  while (n < cap && hs_engine_pop(e, &ev)) {
    log[n++] = ev;
    if (n < cap / 2)
      for (uint64_t k = xs(&s) % 3; k > 0; k--)
        hs_engine_schedule(e, ev.time + (double)(xs(&s) % 4), ev.kind, ev.worker,
                           (int64_t)(xs(&s) % 1000), NULL);
  }
  hs_engine_close(e);
  return n;
}

static void test_determinism(void) {
  size_t cap = 20000;
  hs_event *a = calloc(cap, sizeof *a), *b = calloc(cap, sizeof *b);
  size_t na = run_workload(99, a, cap), nb = run_workload(99, b, cap);
  ASSERT_EQ(na, nb);
  ASSERT(na > 1000);
  int same = 1;
  for (size_t i = 0; i < na && i < nb; i++)
    if (a[i].time != b[i].time || a[i].seq != b[i].seq || a[i].kind != b[i].kind ||
        a[i].worker != b[i].worker || a[i].arg != b[i].arg)
      same = 0;
  ASSERT(same);
  free(a);
  free(b);
}

typedef struct ref_ev {
  double time;
  uint64_t seq;
} ref_ev;

static int ref_cmp(const void *pa, const void *pb) {
  const ref_ev *a = pa, *b = pb;
  if (a->time != b->time) return a->time < b->time ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static void test_against_sorted_reference(void) {
  /* All events scheduled up front: the pop order must be the (time, seq) sort. */
  const size_t n = 50000;
  ref_ev *ref = malloc(n * sizeof *ref);
  hs_engine *e;
  ASSERT_EQ(hs_engine_open(&e, 0, NULL), 0);
  uint64_t s = 12345;
  for (size_t i = 0; i < n; i++) {
    ref[i].time = (double)(xs(&s) % 997) * 0.25; /* many ties */
    ref[i].seq = i;
    ASSERT_EQ(hs_engine_schedule(e, ref[i].time, 0, 0, (int64_t)i, NULL), 0);
  }
  qsort(ref, n, sizeof *ref, ref_cmp);
  int ok = 1;
  hs_event ev;
  for (size_t i = 0; i < n; i++) {
    if (!hs_engine_pop(e, &ev) || ev.time != ref[i].time || ev.seq != ref[i].seq ||
        ev.arg != (int64_t)ref[i].seq) {
      ok = 0;
      break;
    }
  }
  ASSERT(ok);
  ASSERT_EQ(hs_engine_pop(e, &ev), 0);
  hs_engine_close(e);
  free(ref);
}

static const hs_test_case cases[] = {
    {"orders_by_time", test_orders_by_time},
    {"fifo_equal_times", test_fifo_equal_times},
    {"renumbering_keeps_fifo", test_renumbering_keeps_fifo},
    {"pool_reuse", test_pool_reuse},
    {"growth_to_1m", test_growth_to_1m},
    {"limit_message", test_limit_message},
    {"schedule_in_past", test_schedule_in_past},
    {"determinism", test_determinism},
    {"against_sorted_reference", test_against_sorted_reference},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("event", cases, argc, argv); }
