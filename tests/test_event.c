/* Tests of the event engine: ordering, FIFO ties, pool reuse, growth, limits, determinism, and
 * the radix heap's own edge cases (peek before an earlier schedule, one time's events over many
 * chunks while more are scheduled at that time, extreme times), checked against a linear-scan
 * reference queue. */
#include <float.h>
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

static void test_fifo_across_chunks_with_schedules_at_now(void) {
  /* Many events at one time (over several chunks of its bucket), popped while more are
   * scheduled at that time (appended behind them) and at later times: schedule order within
   * each time, times in order. */
  hs_engine *e;
  ASSERT_EQ(hs_engine_open(&e, 0, NULL), 0);
  int64_t counter = 0, last = -1;
  double last_t = -1;
  int ok = 1;
  for (int i = 0; i < 1000; i++) ASSERT_EQ(hs_engine_schedule(e, 1.0, 0, 0, counter++, NULL), 0);
  for (int round = 0; round < 5000; round++) {
    for (int k = 0; k < 2; k++)
      if (hs_engine_schedule(e, hs_engine_now(e) + (double)(round % 3 == 0), 0, 0, counter++, NULL)) ok = 0;
    hs_event ev;
    if (hs_engine_pop(e, &ev) != 1 || ev.time < last_t) ok = 0;
    if (ev.time != last_t) last = -1;
    if (ev.arg <= last) ok = 0;
    last = ev.arg;
    last_t = ev.time;
  }
  ASSERT(ok);
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

/* A reference queue: an unsorted array, popped by a linear scan for the least (time, seq). */
typedef struct ref_queue {
  hs_event *ev;
  size_t n, cap;
  uint64_t next_seq;
} ref_queue;

static void ref_push(ref_queue *q, double time, uint32_t kind, uint32_t worker, int64_t arg) {
  if (q->n == q->cap) {
    q->cap = q->cap ? q->cap * 2 : 64;
    q->ev = realloc(q->ev, q->cap * sizeof *q->ev);
  }
  q->ev[q->n++] = (hs_event){.time = time + 0.0, .seq = q->next_seq++, .kind = kind,
                             .worker = worker, .arg = arg};
}

static size_t ref_min(const ref_queue *q) {
  size_t best = 0;
  for (size_t i = 1; i < q->n; i++)
    if (q->ev[i].time < q->ev[best].time ||
        (q->ev[i].time == q->ev[best].time && q->ev[i].seq < q->ev[best].seq))
      best = i;
  return best;
}

static int same_event(const hs_event *a, const hs_event *b) {
  return a->time == b->time && a->seq == b->seq && a->kind == b->kind && a->worker == b->worker &&
         a->arg == b->arg;
}

/* An increment drawn to hit the structure's corners: zero (ties), the smallest step (1 ulp),
 * small and large steps, and jumps across many binary exponents. */
static double odd_increment(uint64_t *s, double now) {
  switch (xs(s) % 8) {
  case 0:
  case 1: return 0.0;
  case 2: return nextafter(now, INFINITY) - now;
  case 3: return (double)(xs(s) % 1000) * 1e-3;
  case 4: return (double)(xs(s) % 16);
  case 5: return ldexp(1.0, (int)(xs(s) % 80) - 40);
  case 6: return (double)(xs(s) % 1000000) * 1e-9;
  default: return -log((double)(xs(s) % 1000000 + 1) * 1e-6);
  }
}

/* Interleaves schedules, peeks and pops on the engine and the reference queue and compares
 * every peek and pop. */
static int compare_with_reference(uint64_t seed, int ops, size_t target) {
  hs_engine *e;
  if (hs_engine_open(&e, 0, NULL)) return 0;
  ref_queue q = {0};
  uint64_t s = seed;
  int ok = 1;
  for (int i = 0; i < ops && ok; i++) {
    /* Keep the queue near `target` pending, with bursts of schedules and of pops. */
    int sched = q.n < target ? (int)(xs(&s) % 4) : (int)(xs(&s) % 2);
    for (int k = 0; k < sched; k++) {
      double t = hs_engine_now(e) + odd_increment(&s, hs_engine_now(e));
      if (!isfinite(t)) t = hs_engine_now(e);
      uint32_t kind = (uint32_t)(xs(&s) % 7), worker = (uint32_t)(xs(&s) % 1000);
      int64_t arg = (int64_t)(xs(&s) % 100000) - 50000;
      if (hs_engine_schedule(e, t, kind, worker, arg, NULL)) ok = 0;
      ref_push(&q, t, kind, worker, arg);
    }
    hs_event got, want;
    if (xs(&s) % 3 == 0) {
      int r = hs_engine_peek(e, &got);
      if (r != (q.n > 0) || (r && !same_event(&got, &q.ev[ref_min(&q)]))) ok = 0;
    }
    int r = hs_engine_pop(e, &got);
    if (r != (q.n > 0)) ok = 0;
    if (r && ok) {
      size_t m = ref_min(&q);
      want = q.ev[m];
      q.ev[m] = q.ev[--q.n];
      if (!same_event(&got, &want) || hs_engine_now(e) != want.time) ok = 0;
    }
    if (hs_engine_pending(e) != q.n) ok = 0;
  }
  /* Drain: the rest must come out in reference order too. */
  hs_event got;
  while (ok && q.n > 0) {
    size_t m = ref_min(&q);
    if (hs_engine_pop(e, &got) != 1 || !same_event(&got, &q.ev[m])) ok = 0;
    q.ev[m] = q.ev[--q.n];
  }
  if (ok && hs_engine_pop(e, &got) != 0) ok = 0;
  hs_engine_close(e);
  free(q.ev);
  return ok;
}

static void test_random_against_reference(void) {
  for (uint64_t seed = 1; seed <= 4; seed++) ASSERT(compare_with_reference(seed, 10000, 300));
  ASSERT(compare_with_reference(77, 5000, 4000)); /* buckets spanning several chunks */
  ASSERT(compare_with_reference(11, 20000, 50));
}

static void test_peek_then_earlier_schedule(void) {
  hs_engine *e;
  ASSERT_EQ(hs_engine_open(&e, 0, NULL), 0);
  hs_event ev;
  ASSERT_EQ(hs_engine_peek(e, &ev), 0);
  ASSERT_EQ(hs_engine_schedule(e, 10.0, 1, 0, 0, NULL), 0);
  ASSERT_EQ(hs_engine_peek(e, &ev), 1);
  ASSERT_NEAR(ev.time, 10.0, 0.0);
  ASSERT_NEAR(hs_engine_now(e), 0.0, 0.0); /* peeking does not advance the clock */
  /* Earlier than the peeked event but not earlier than now: must come out first. */
  ASSERT_EQ(hs_engine_schedule(e, 5.0, 2, 0, 0, NULL), 0);
  ASSERT_EQ(hs_engine_schedule(e, 0.0, 3, 0, 0, NULL), 0);
  ASSERT_EQ(hs_engine_peek(e, &ev), 1);
  ASSERT_EQ(ev.kind, 3);
  ASSERT_EQ(hs_engine_pop(e, &ev), 1);
  ASSERT_EQ(ev.kind, 3);
  ASSERT_EQ(hs_engine_pop(e, &ev), 1);
  ASSERT_EQ(ev.kind, 2);
  ASSERT_NEAR(hs_engine_now(e), 5.0, 0.0);
  ASSERT_EQ(hs_engine_peek(e, &ev), 1);
  ASSERT_EQ(ev.kind, 1);
  /* At now, after the peek: before the event at 10, and FIFO among its equals. */
  ASSERT_EQ(hs_engine_schedule(e, 5.0, 4, 0, 0, NULL), 0);
  ASSERT_EQ(hs_engine_schedule(e, 5.0, 5, 0, 0, NULL), 0);
  ASSERT_EQ(hs_engine_schedule(e, nextafter(5.0, 0.0) + 1e-15, 6, 0, 0, NULL), 0);
  ASSERT_EQ(hs_engine_pop(e, &ev), 1);
  ASSERT_EQ(ev.kind, 4);
  ASSERT_EQ(hs_engine_pop(e, &ev), 1);
  ASSERT_EQ(ev.kind, 5);
  ASSERT_EQ(hs_engine_pop(e, &ev), 1);
  ASSERT_EQ(ev.kind, 6);
  ASSERT_EQ(hs_engine_pop(e, &ev), 1);
  ASSERT_EQ(ev.kind, 1);
  ASSERT_EQ(hs_engine_pop(e, &ev), 0);
  hs_engine_close(e);
}

static void test_extreme_times(void) {
  /* Signed zero, subnormals, the largest finite double: the bit-pattern keys must still sort
   * like the numbers. */
  hs_engine *e;
  ASSERT_EQ(hs_engine_open(&e, 0, NULL), 0);
  double ts[] = {DBL_MAX, 1e300, 1.0, 4.9e-324, -0.0, 0.0, 2.2250738585072014e-308, 1e-310};
  int want[] = {4, 5, 3, 7, 6, 2, 1, 0}; /* indices of ts in pop order */
  for (int i = 0; i < 8; i++) ASSERT_EQ(hs_engine_schedule(e, ts[i], (uint32_t)i, 0, 0, NULL), 0);
  hs_event ev;
  for (int i = 0; i < 8; i++) {
    ASSERT_EQ(hs_engine_pop(e, &ev), 1);
    ASSERT_EQ(ev.kind, want[i]);
  }
  ASSERT_NEAR(hs_engine_now(e), DBL_MAX, 0.0);
  ASSERT_EQ(hs_engine_schedule(e, DBL_MAX, 9, 0, 0, NULL), 0);
  ASSERT_EQ(hs_engine_pop(e, &ev), 1);
  ASSERT_EQ(ev.kind, 9);
  hs_engine_close(e);
}

static void test_equal_times_many_chunks(void) {
  /* 100,000 events at one time: one bucket spanning thousands of chunks, redistributed by the
   * tie-break word alone; the pops must be in schedule order. */
  hs_engine *e;
  ASSERT_EQ(hs_engine_open(&e, 0, NULL), 0);
  const int n = 100000;
  for (int i = 0; i < n; i++) ASSERT_EQ(hs_engine_schedule(e, 3.5, 0, 0, i, NULL), 0);
  hs_event ev;
  int ok = 1;
  for (int i = 0; i < n; i++) {
    if (hs_engine_pop(e, &ev) != 1 || ev.arg != i || ev.time != 3.5) ok = 0;
    /* Keep refilling the first half at the same time: those must follow every earlier one. */
    if (i < n / 2 && hs_engine_schedule(e, 3.5, 0, 0, n + i, NULL)) ok = 0;
  }
  for (int i = 0; i < n / 2; i++)
    if (hs_engine_pop(e, &ev) != 1 || ev.arg != n + i) ok = 0;
  ASSERT(ok);
  ASSERT_EQ(hs_engine_pending(e), 0);
  hs_engine_close(e);
}

static void test_errors_leave_engine_unchanged(void) {
  hs_engine *e;
  hs_diag d = {0};
  ASSERT_EQ(hs_engine_open(&e, 4, &d), 0);
  for (int i = 0; i < 4; i++) ASSERT_EQ(hs_engine_schedule(e, 2.0 + i, (uint32_t)i, 0, 0, &d), 0);
  hs_event ev;
  ASSERT_EQ(hs_engine_pop(e, &ev), 1); /* now = 2, three pending */
  ASSERT_EQ(hs_engine_schedule(e, 1.0, 9, 0, 0, &d), HS_EINVAL);
  ASSERT_EQ(hs_engine_schedule(e, 6.0, 9, 0, 0, &d), 0);
  ASSERT_EQ(hs_engine_schedule(e, 7.0, 9, 0, 0, &d), HS_ELIMIT);
  ASSERT_CONTAINS(d.msg, "more than 4 pending events");
  ASSERT_CONTAINS(d.msg, "--max-events 8");
  ASSERT_EQ(hs_engine_pending(e), 4);
  ASSERT_EQ(hs_engine_peek(e, &ev), 1);
  ASSERT_EQ(ev.kind, 1);
  int kinds[] = {1, 2, 3, 9};
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(hs_engine_pop(e, &ev), 1);
    ASSERT_EQ(ev.kind, kinds[i]);
  }
  ASSERT_EQ(hs_engine_pop(e, &ev), 0);
  ASSERT_EQ(hs_engine_processed(e), 5);
  ASSERT_EQ(hs_engine_schedule(e, 7.0, 9, 0, 0, &d), 0); /* room again after the pops */
  hs_engine_close(e);
}

static void test_growth_and_reuse_cycles(void) {
  /* Grow to 200,000 pending, drain, grow again: the store's chunks must all come back (a leak
   * in the free list would run the second fill past its bound, which ASan would catch). */
  hs_engine *e;
  ASSERT_EQ(hs_engine_open(&e, 0, NULL), 0);
  uint64_t s = 5;
  int ok = 1;
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 200000; i++)
      if (hs_engine_schedule(e, hs_engine_now(e) + (double)(xs(&s) % 100000) * 1e-4, 0, 0, i,
                             NULL))
        ok = 0;
    hs_event ev, prev = {0};
    for (int i = 0; i < 200000; i++) {
      if (hs_engine_pop(e, &ev) != 1) ok = 0;
      if (i && (ev.time < prev.time || (ev.time == prev.time && ev.seq < prev.seq))) ok = 0;
      prev = ev;
    }
  }
  ASSERT(ok);
  ASSERT_EQ(hs_engine_pending(e), 0);
  hs_engine_close(e);
}

static const hs_test_case cases[] = {
    {"orders_by_time", test_orders_by_time},
    {"fifo_equal_times", test_fifo_equal_times},
    {"fifo_across_chunks_with_schedules_at_now", test_fifo_across_chunks_with_schedules_at_now},
    {"pool_reuse", test_pool_reuse},
    {"growth_to_1m", test_growth_to_1m},
    {"limit_message", test_limit_message},
    {"schedule_in_past", test_schedule_in_past},
    {"determinism", test_determinism},
    {"against_sorted_reference", test_against_sorted_reference},
    {"random_against_reference", test_random_against_reference},
    {"peek_then_earlier_schedule", test_peek_then_earlier_schedule},
    {"extreme_times", test_extreme_times},
    {"equal_times_many_chunks", test_equal_times_many_chunks},
    {"errors_leave_engine_unchanged", test_errors_leave_engine_unchanged},
    {"growth_and_reuse_cycles", test_growth_and_reuse_cycles},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("event", cases, argc, argv); }
