/* core_rng: seeding taus2 streams from (seed, stream) without collisions. */
#include "core/core_rng.h"

#include <math.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_randist.h>

static uint64_t splitmix64_next(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t hs_rng_mix(uint64_t seed, uint64_t stream) {
  uint64_t x = seed;
  uint64_t h = splitmix64_next(&x);
  x = h ^ (stream * 0xD1B54A32D192ED03ULL);
  return splitmix64_next(&x);
}

/* GSL's taus2 layout (gsl/rng/taus.c): three unsigned longs, each used modulo 2^32. */
typedef struct taus_state {
  unsigned long s1, s2, s3;
} taus_state;

/* The three state words of stream (seed, stream), before the warm-up. */
static void taus_seed(uint64_t seed, uint64_t stream, uint32_t w[3]) {
  uint64_t x = hs_rng_mix(seed, stream);
  /* gsl_rng_set seeds taus2 through a 32-bit LCG, so only 2^32 distinct streams exist and
   * among 100,000 workers two would likely share one (birthday bound). Filling the three
   * 32-bit state words from 64-bit mixes gives 2^88-ish distinct starts instead. The taus2
   * state words must exceed 1, 7 and 15 respectively; OR-ing in high-ish bits ensures it. */
  for (int i = 0; i < 3; i++) w[i] = (uint32_t)(splitmix64_next(&x) & 0xffffffffU) | 0x10U;
}

/* Warm-up draws after seeding, as gsl's own seeding does, so the first outputs are well mixed. */
enum { TAUS_WARMUP = 6 };

gsl_rng *hs_rng_stream(uint64_t seed, uint64_t stream) {
  gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
  if (!r) return NULL;
  if (gsl_rng_size(r) == sizeof(taus_state)) {
    uint32_t w[3];
    taus_seed(seed, stream, w);
    taus_state st = {w[0], w[1], w[2]};
    memcpy(gsl_rng_state(r), &st, sizeof st);
    for (int i = 0; i < TAUS_WARMUP; i++) (void)gsl_rng_get(r);
  } else {
    /* Unknown layout (a different GSL): fall back to the documented seeding. */
    uint64_t x = hs_rng_mix(seed, stream);
    gsl_rng_set(r, (unsigned long)(x ^ (x >> 32)));
  }
  return r;
}

void hs_rng_init(hs_rng *r, uint64_t seed, uint64_t stream) {
  uint32_t w[3];
  taus_seed(seed, stream, w);
  r->s1 = w[0];
  r->s2 = w[1];
  r->s3 = w[2];
  for (int i = 0; i < TAUS_WARMUP; i++) (void)hs_rng_get(r);
}

double hs_rng_lognormal_unit(gsl_rng *r, double cv) {
  if (cv == 0.0) return 1.0;
  if (!(cv > 0.0)) return NAN;
  double s2 = log1p(cv * cv);
  return gsl_ran_lognormal(r, -0.5 * s2, sqrt(s2));
}

double hs_rng_lognormal(hs_rng *r, double cv) {
  if (cv == 0.0) return 1.0;
  if (!(cv > 0.0)) return NAN;
  double s2 = log1p(cv * cv), zeta = -0.5 * s2, sigma = sqrt(s2);
  /* gsl_ran_lognormal (randist/lognormal.c), step for step: a point drawn uniformly in the
   * square until it falls inside the unit circle (and not at its centre), then Box-Muller. */
  double u, v, r2;
  do {
    u = -1 + 2 * hs_rng_uniform(r);
    v = -1 + 2 * hs_rng_uniform(r);
    r2 = u * u + v * v;
  } while (r2 > 1.0 || r2 == 0);
  double normal = u * sqrt(-2.0 * log(r2) / r2);
  return exp(sigma * normal + zeta);
}

void hs_gsl_init(void) { gsl_set_error_handler_off(); }
