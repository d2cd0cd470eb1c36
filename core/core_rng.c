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

gsl_rng *hs_rng_stream(uint64_t seed, uint64_t stream) {
  gsl_rng *r = gsl_rng_alloc(gsl_rng_taus2);
  if (!r) return NULL;
  uint64_t x = hs_rng_mix(seed, stream);
  if (gsl_rng_size(r) == sizeof(taus_state)) {
    /* gsl_rng_set seeds taus2 through a 32-bit LCG, so only 2^32 distinct streams exist and
     * among 100,000 workers two would likely share one (birthday bound). Filling the three
     * 32-bit state words from 64-bit mixes gives 2^88-ish distinct starts instead. The taus2
     * state words must exceed 1, 7 and 15 respectively; OR-ing in high-ish bits ensures it. */
    taus_state st;
    st.s1 = (unsigned long)(splitmix64_next(&x) & 0xffffffffUL) | 0x10UL;
    st.s2 = (unsigned long)(splitmix64_next(&x) & 0xffffffffUL) | 0x10UL;
    st.s3 = (unsigned long)(splitmix64_next(&x) & 0xffffffffUL) | 0x10UL;
    memcpy(gsl_rng_state(r), &st, sizeof st);
    /* Warm up as gsl's own seeding does, so the first outputs are well mixed. */
    for (int i = 0; i < 6; i++) (void)gsl_rng_get(r);
  } else {
    /* Unknown layout (a different GSL): fall back to the documented seeding. */
    gsl_rng_set(r, (unsigned long)(x ^ (x >> 32)));
  }
  return r;
}

double hs_rng_lognormal_unit(gsl_rng *r, double cv) {
  if (cv == 0.0) return 1.0;
  if (!(cv > 0.0)) return NAN;
  double s2 = log1p(cv * cv);
  return gsl_ran_lognormal(r, -0.5 * s2, sqrt(s2));
}

void hs_gsl_init(void) { gsl_set_error_handler_off(); }
