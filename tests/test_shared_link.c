/* The shared link of sim/sim_net.c (max-min fair sharing among flows with per-flow caps)
 * against a reference: the implementation it replaced (a sort of every flow by cap at each
 * event, remaining bytes brought up to date flow by flow), kept here verbatim as the oracle.
 * Random arrival sequences, with ties of time, size and cap as parameter-server rounds make
 * them, drive both; completion times must agree to 1e-9 and the finished flows must come out
 * in the same order (the simulator's later events depend on it). Plus closed forms. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "sim/sim_net.h"
#include "tests/hs_test.h"

/* --- the reference: sim_net.c's shared link before the O(log n) version ------------------ */

typedef struct ref_flow {
  int64_t id;
  double remaining, size, cap, rate;
} ref_flow;

typedef struct ref_link {
  double capacity, last;
  int n, cap_n;
  ref_flow *flows;
} ref_link;

static void ref_advance(ref_link *l, double now) {
  double dt = now - l->last;
  if (dt > 0)
    for (int i = 0; i < l->n; i++) l->flows[i].remaining -= l->flows[i].rate * dt;
  l->last = now;
}

static void ref_add(ref_link *l, int64_t id, double bytes, double cap) {
  if (l->n == l->cap_n) {
    l->cap_n = l->cap_n ? 2 * l->cap_n : 16;
    l->flows = realloc(l->flows, (size_t)l->cap_n * sizeof *l->flows);
  }
  l->flows[l->n++] = (ref_flow){.id = id, .remaining = bytes, .size = bytes, .cap = cap, .rate = 0};
}

static int ref_by_cap(const void *a, const void *b) {
  double x = ((const ref_flow *)a)->cap, y = ((const ref_flow *)b)->cap;
  if (x < y) return -1;
  if (x > y) return 1;
  return (((const ref_flow *)a)->id > ((const ref_flow *)b)->id) - (((const ref_flow *)a)->id < ((const ref_flow *)b)->id);
}

static double ref_rates(ref_link *l, double now) {
  if (l->n == 0) return INFINITY;
  qsort(l->flows, (size_t)l->n, sizeof *l->flows, ref_by_cap);
  double left = l->capacity;
  int k = 0;
  for (; k < l->n; k++) {
    double share = left / (double)(l->n - k);
    if (l->flows[k].cap > share) break;
    l->flows[k].rate = l->flows[k].cap;
    left -= l->flows[k].cap;
  }
  if (k < l->n) {
    double share = left / (double)(l->n - k);
    for (int i = k; i < l->n; i++) l->flows[i].rate = share;
  }
  double first = INFINITY;
  for (int i = 0; i < l->n; i++) {
    double t = now + (l->flows[i].remaining > 0 ? l->flows[i].remaining : 0) / l->flows[i].rate;
    if (t < first) first = t;
  }
  return first;
}

static int ref_reap(ref_link *l, int64_t *done, int cap) {
  int kept = 0, got = 0;
  for (int i = 0; i < l->n; i++) {
    ref_flow *f = &l->flows[i];
    if (f->remaining <= 1e-9 * f->size && got < cap) done[got++] = f->id;
    else l->flows[kept++] = *f;
  }
  l->n = kept;
  return got;
}

/* --- scenarios ----------------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s) { /* xorshift64*: the test's own stream, fixed by seed */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 2685821657736338717ULL;
}
static double rng_unit(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

typedef struct arrival {
  double t, bytes, cap;
} arrival;

/* What one driver saw: completion events, each a time and the ids finished then, in order. */
typedef struct outcome {
  int n_events, n_done;
  double *times;
  int *counts;
  int64_t *ids;
} outcome;

static void outcome_init(outcome *o, int n) {
  memset(o, 0, sizeof *o);
  o->times = malloc((size_t)n * sizeof *o->times);
  o->counts = malloc((size_t)n * sizeof *o->counts);
  o->ids = malloc((size_t)n * sizeof *o->ids);
}
static void outcome_free(outcome *o) {
  free(o->times);
  free(o->counts);
  free(o->ids);
}

/* Drives a link as sim/sim_run.c does: at an arrival, advance, add and recompute; at the
 * first completion, advance, reap (in chunks of reap_cap) and recompute. An arrival at the
 * same time as a completion goes first. */
#define DRIVE(o, arr, n, reap_cap, ADVANCE, ADD, RATES, REAP)                                 \
  do {                                                                                         \
    int next_ = 0;                                                                             \
    double tl_ = INFINITY;                                                                     \
    int64_t buf_[64];                                                                          \
    while (next_ < (n) || isfinite(tl_)) {                                                     \
      if (next_ < (n) && (arr)[next_].t <= tl_) {                                              \
        double t_ = (arr)[next_].t;                                                            \
        ADVANCE(t_);                                                                           \
        ADD((int64_t)next_, (arr)[next_].bytes, (arr)[next_].cap);                             \
        next_++;                                                                               \
        tl_ = RATES(t_);                                                                       \
      } else {                                                                                 \
        double t_ = tl_;                                                                       \
        ADVANCE(t_);                                                                           \
        int got_, total_ = 0;                                                                  \
        while ((got_ = REAP(buf_, (reap_cap))) > 0)                                            \
          for (int i_ = 0; i_ < got_; i_++) (o)->ids[(o)->n_done + total_++] = buf_[i_];       \
        if (total_ > 0) {                                                                      \
          (o)->times[(o)->n_events] = t_;                                                      \
          (o)->counts[(o)->n_events++] = total_;                                               \
          (o)->n_done += total_;                                                               \
        }                                                                                      \
        tl_ = RATES(t_);                                                                       \
        if ((o)->n_events > 4 * (n) + 16) break; /* a link that never finishes: fail below */ \
      }                                                                                        \
    }                                                                                          \
  } while (0)

static void drive_ref(outcome *o, const arrival *arr, int n, double capacity, int reap_cap) {
  ref_link l = {.capacity = capacity};
#define R_ADVANCE(t) ref_advance(&l, t)
#define R_ADD(id, b, c) ref_add(&l, id, b, c)
#define R_RATES(t) ref_rates(&l, t)
#define R_REAP(buf, c) ref_reap(&l, buf, c)
  DRIVE(o, arr, n, reap_cap, R_ADVANCE, R_ADD, R_RATES, R_REAP);
  free(l.flows);
}

static void drive_new(outcome *o, const arrival *arr, int n, double capacity, int reap_cap) {
  hs_shared_link l;
  hs_shared_link_init(&l, capacity);
#define N_ADVANCE(t) hs_shared_link_advance(&l, t)
#define N_ADD(id, b, c) ASSERT_EQ(hs_shared_link_add(&l, id, b, c), 0)
#define N_RATES(t) hs_shared_link_rates(&l, t)
#define N_REAP(buf, c) hs_shared_link_reap(&l, buf, c)
  DRIVE(o, arr, n, reap_cap, N_ADVANCE, N_ADD, N_RATES, N_REAP);
  hs_shared_link_free(&l);
}

/* Compares the two drivers on one arrival sequence; returns the largest relative difference
 * of a completion time, or INFINITY when the events or the order of the ids differ. */
static double compare(const arrival *arr, int n, double capacity, int reap_cap, const char *what) {
  outcome a, b;
  outcome_init(&a, 4 * n + 32);
  outcome_init(&b, 4 * n + 32);
  drive_ref(&a, arr, n, capacity, reap_cap);
  drive_new(&b, arr, n, capacity, reap_cap);
  double worst = 0;
  if (a.n_done != n || b.n_done != n || a.n_events != b.n_events) {
    HS_FAIL_AT("%s: reference finished %d flows in %d events, new %d in %d (of %d)", what,
               a.n_done, a.n_events, b.n_done, b.n_events, n);
    worst = INFINITY;
  } else {
    for (int e = 0, k = 0; e < a.n_events; k += a.counts[e], e++) {
      double d = fabs(a.times[e] - b.times[e]) / fmax(fabs(a.times[e]), 1e-300);
      if (d > worst) worst = d;
      if (a.counts[e] != b.counts[e] || memcmp(&a.ids[k], &b.ids[k], (size_t)a.counts[e] * sizeof *a.ids)) {
        HS_FAIL_AT("%s: completion event %d at %.17g: the flows finished differ (%d vs %d, first %lld vs %lld)",
                   what, e, a.times[e], a.counts[e], b.counts[e], (long long)a.ids[k], (long long)b.ids[k]);
        worst = INFINITY;
        break;
      }
    }
  }
  outcome_free(&a);
  outcome_free(&b);
  return worst;
}

/* A parameter-server-like sequence: rounds of simultaneous arrivals (same size and cap within
 * a round's cap class), between them single arrivals at random times. */
static int make_arrivals(arrival *arr, int n, uint64_t *s, double capacity, int n_caps, int sizes_vary) {
  static const double cap_frac[] = {0.25, 0.5, 2.0, 0.0371, 0.125, 1.0, 0.01};
  double t = 0;
  int i = 0;
  while (i < n) {
    double kind = rng_unit(s);
    int burst = kind < 0.3 ? 1 + (int)(rng_unit(s) * 64) : 1;
    double cap = capacity * cap_frac[(int)(rng_unit(s) * n_caps)];
    double bytes = sizes_vary ? 1e6 + rng_unit(s) * 1e8 : 44695848.0;
    if (sizes_vary && rng_unit(s) < 0.05) bytes = 100; /* a tiny flow: finishes at once */
    for (int b = 0; b < burst && i < n; b++, i++) {
      arr[i] = (arrival){.t = t, .bytes = bytes, .cap = cap};
      /* Within a burst, some flows differ in cap (a slowed worker among the others). */
      if (n_caps > 1 && rng_unit(s) < 0.2) arr[i].cap = capacity * cap_frac[(int)(rng_unit(s) * n_caps)];
    }
    t += rng_unit(s) < 0.5 ? rng_unit(s) * 0.05 : rng_unit(s) * 0.002;
  }
  return n;
}

static void test_random_sequences_match_reference(void) {
  uint64_t s = 0x9e3779b97f4a7c15ULL;
  double worst = 0;
  int cases = 0;
  for (int n_caps = 1; n_caps <= 7; n_caps++)
    for (int vary = 0; vary <= 1; vary++)
      for (int rep = 0; rep < 6; rep++) {
        int n = 50 + (int)(rng_unit(&s) * 1500);
        double capacity = rep % 2 ? 12.5e9 : 1.25e9 * (1 + rng_unit(&s));
        arrival *arr = malloc((size_t)n * sizeof *arr);
        make_arrivals(arr, n, &s, capacity, n_caps, vary);
        char what[96];
        snprintf(what, sizeof what, "caps %d, sizes %s, rep %d, %d flows", n_caps, vary ? "vary" : "equal", rep, n);
        double d = compare(arr, n, capacity, rep % 3 ? 64 : 3, what);
        if (d > worst) worst = d;
        cases++;
        free(arr);
      }
  printf("  %d sequences; largest relative difference of a completion time %.3g\n", cases, worst);
  ASSERT(worst <= 1e-9);
}

/* Every flow arrives at once with the same size and cap: one completion event, ids in order. */
static void test_equal_flows_finish_together(void) {
  enum { N = 1000 };
  arrival arr[N];
  for (int i = 0; i < N; i++) arr[i] = (arrival){.t = 0, .bytes = 44695848.0, .cap = 3.125e9};
  outcome o;
  outcome_init(&o, 4 * N + 32);
  drive_new(&o, arr, N, 12.5e9, 64);
  ASSERT_EQ(o.n_events, 1);
  ASSERT_EQ(o.n_done, N);
  ASSERT_REL(o.times[0], N * 44695848.0 / 12.5e9, 1e-15);
  for (int i = 0; i < N; i++) ASSERT_EQ(o.ids[i], i);
  outcome_free(&o);
}

/* Two flows capped below their share and one that takes the rest; then the capped ones alone
 * (the closed form of tests/test_sim.c's shared_link_max_min, with a cap change of class). */
static void test_caps_and_shares_closed_form(void) {
  hs_shared_link l;
  hs_shared_link_init(&l, 100.0);
  ASSERT_EQ(hs_shared_link_add(&l, 7, 100, 10.0), 0);
  ASSERT_EQ(hs_shared_link_add(&l, 3, 100, 20.0), 0);
  ASSERT_EQ(hs_shared_link_add(&l, 5, 700, 1000.0), 0);
  /* Rates 10, 20 and 70 (the fair share 33.3 exceeds both caps): flow 3 finishes first, at 5 s. */
  double t = hs_shared_link_rates(&l, 0.0);
  ASSERT_NEAR(t, 5.0, 1e-12);
  hs_shared_link_advance(&l, t);
  int64_t done[4];
  ASSERT_EQ(hs_shared_link_reap(&l, done, 4), 1);
  ASSERT_EQ(done[0], 3);
  /* Now 10 and 90: flow 7 has 50 left (10 s), flow 5 has 350 left (3.888... s). */
  t = hs_shared_link_rates(&l, t);
  ASSERT_NEAR(t, 5.0 + 350.0 / 90.0, 1e-12);
  hs_shared_link_advance(&l, t);
  ASSERT_EQ(hs_shared_link_reap(&l, done, 4), 1);
  ASSERT_EQ(done[0], 5);
  t = hs_shared_link_rates(&l, t);
  ASSERT_NEAR(t, 10.0, 1e-12);
  hs_shared_link_advance(&l, t);
  ASSERT_EQ(hs_shared_link_reap(&l, done, 4), 1);
  ASSERT_EQ(done[0], 7);
  ASSERT(isinf(hs_shared_link_rates(&l, t)));
  hs_shared_link_free(&l);
}

static const hs_test_case cases[] = {
    {"random_sequences_match_reference", test_random_sequences_match_reference},
    {"equal_flows_finish_together", test_equal_flows_finish_together},
    {"caps_and_shares_closed_form", test_caps_and_shares_closed_form},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("shared_link", cases, argc, argv); }
