/* bench_events: the classic "hold" benchmark of the event engine.
 *
 * The queue is filled with `pending` events, warmed up, then each timed operation pops the
 * earliest event and schedules one at now + an exponential increment (mean 1 s), so the queue
 * size stays constant. Increments come from a precomputed table indexed by a xorshift generator,
 * so that the timed loop measures the queue rather than log().
 *
 * Increment distributions (all with mean 1 s except "equal"), so that a queue structure with a
 * pathological case shows it:
 *   exp      Exponential(1), the classic hold model (default)
 *   uniform  Uniform(0, 2)
 *   bimodal  Uniform(0, 0.1) with probability 0.9, else Uniform(9.1, 10.1): two time scales
 *   equal    0: every event at the same time, so only the FIFO tie-break orders them
 *   const    1: a few large groups of equal times
 *
 * Usage: bench_events [pending] [ops] [dist]   (no arguments: exp at 10,000 and 1,000,000
 * pending). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core_error.h"
#include "sim/sim_event.h"

#define INC_TABLE_BITS 16
#define INC_TABLE_SIZE (1u << INC_TABLE_BITS)

typedef struct bench_rng {
  uint64_t s;
} bench_rng;

static inline uint64_t bench_next(bench_rng *r) {
  /* xorshift64*: a few cycles, good enough to index a table. */
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * 0x2545F4914F6CDD1DULL;
}

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run_hold(size_t pending, uint64_t ops, const double *inc) {
  hs_diag d = {0};
  hs_engine *e = NULL;
  if (hs_engine_open(&e, 0, &d)) {
    fprintf(stderr, "bench_events: %s\n", d.msg);
    return 1;
  }
  bench_rng r = {0x9E3779B97F4A7C15ULL};
  for (size_t i = 0; i < pending; i++) {
    uint64_t u = bench_next(&r);
    if (hs_engine_schedule(e, inc[u >> (64 - INC_TABLE_BITS)], (uint32_t)i, (uint32_t)i, 0, &d)) {
      fprintf(stderr, "bench_events: %s\n", d.msg);
      hs_engine_close(e);
      return 1;
    }
  }
  /* Warm-up: let the time distribution in the queue reach its steady state and the caches
   * settle before timing. */
  uint64_t warm = pending < 1000000 ? 2 * (uint64_t)pending : (uint64_t)pending;
  hs_event ev;
  for (uint64_t i = 0; i < warm; i++) {
    hs_engine_pop(e, &ev);
    uint64_t u = bench_next(&r);
    hs_engine_schedule(e, ev.time + inc[u >> (64 - INC_TABLE_BITS)], ev.kind, ev.worker, ev.arg,
                       &d);
  }

  uint64_t check = 0;
  double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  for (uint64_t i = 0; i < ops; i++) {
    hs_engine_pop(e, &ev);
    check += ev.kind;
    uint64_t u = bench_next(&r);
    if (hs_engine_schedule(e, ev.time + inc[u >> (64 - INC_TABLE_BITS)], ev.kind, ev.worker,
                           ev.arg, &d)) {
      fprintf(stderr, "bench_events: %s\n", d.msg);
      hs_engine_close(e);
      return 1;
    }
  }
  double secs = clock_s(CLOCK_MONOTONIC) - t0, cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  /* On a shared machine the wall clock also counts time spent waiting for a core; the CPU
   * time does not, so compare runs by the per-CPU-second figure there. */
  printf("pending=%zu ops=%llu seconds=%.3f Mevents/s=%.2f cpu_s=%.3f Mevents/cpu_s=%.2f "
         "(check %llu, now %.1f)\n",
         pending, (unsigned long long)ops, secs, (double)ops / secs / 1e6, cpu,
         (double)ops / cpu / 1e6, (unsigned long long)check, hs_engine_now(e));
  hs_engine_close(e);
  return 0;
}

static const char *const dists[] = {"exp", "uniform", "bimodal", "equal", "const", NULL};

/* Fills inc with INC_TABLE_SIZE increments of the named distribution, each evaluated at the
 * midpoint of an equal-probability cell (inversion), so the table is the distribution. */
static int fill_increments(double *inc, const char *dist) {
  for (uint32_t i = 0; i < INC_TABLE_SIZE; i++) {
    double u = ((double)i + 0.5) / INC_TABLE_SIZE;
    if (!strcmp(dist, "exp"))
      inc[i] = -log(1.0 - u);
    else if (!strcmp(dist, "uniform"))
      inc[i] = 2.0 * u;
    else if (!strcmp(dist, "bimodal"))
      inc[i] = u < 0.9 ? 0.1 * (u / 0.9) : 9.1 + (u - 0.9) / 0.1;
    else if (!strcmp(dist, "equal"))
      inc[i] = 0.0;
    else if (!strcmp(dist, "const"))
      inc[i] = 1.0;
    else
      return -1;
  }
  return 0;
}

static int usage(void) {
  fprintf(stderr, "usage: bench_events [pending] [ops] [dist]   dist: one of");
  for (int i = 0; dists[i]; i++) fprintf(stderr, " %s", dists[i]);
  fprintf(stderr, "\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc > 4) return usage();
  const char *dist = argc > 3 ? argv[3] : "exp";
  double *inc = malloc(INC_TABLE_SIZE * sizeof *inc);
  if (!inc) {
    fprintf(stderr, "bench_events: out of memory\n");
    return 1;
  }
  if (fill_increments(inc, dist)) {
    free(inc);
    return usage();
  }

  int rc = 0;
  if (argc > 1) {
    char *end;
    unsigned long long p = strtoull(argv[1], &end, 10);
    unsigned long long ops = 10000000ULL;
    if (*end || p == 0) {
      free(inc);
      return usage();
    }
    if (argc > 2) {
      ops = strtoull(argv[2], &end, 10);
      if (*end || ops == 0) {
        free(inc);
        return usage();
      }
    }
    printf("dist=%s ", dist);
    rc = run_hold((size_t)p, ops, inc);
  } else {
    printf("dist=%s ", dist);
    rc = run_hold(10000, 20000000ULL, inc);
    if (!rc) {
      printf("dist=%s ", dist);
      rc = run_hold(1000000, 10000000ULL, inc);
    }
  }
  free(inc);
  return rc;
}
