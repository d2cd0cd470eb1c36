/* core_rng: per-worker random streams derived from the run's seed, on top of GSL.
 *
 * Contract:
 * - Stream k of a seed is a pure function of (seed, k): its numbers do not depend on how many
 *   other streams exist or in which order they were created, so adding a worker does not
 *   perturb the others (STYLE.md, "Events and determinism").
 * - Streams are gsl_rng_taus2 generators (24 bytes of state, fast, period ~2^88). The caller owns
 *   each stream and frees it with gsl_rng_free. A stream is not thread-safe; streams are
 *   independent of each other and may be used from different threads.
 * - hs_rng is the same stream held inline (12 bytes, no allocation): hs_rng_init(r, seed, k)
 *   followed by hs_rng_get / hs_rng_uniform / hs_rng_lognormal gives exactly the numbers that
 *   hs_rng_stream(seed, k) followed by gsl_rng_get / gsl_rng_uniform / hs_rng_lognormal_unit
 *   gives (tests/test_rng.c compares the sequences bit for bit), so a simulator can keep one
 *   per worker in its own array without changing a result. Those equalities assume the
 *   floating-point expressions are not contracted into fused multiply-adds, as in GSL's own
 *   build (x86-64 without -march: none).
 * - hs_gsl_init switches off GSL's default error handler, which aborts the process; call it
 *   once from main before using GSL anywhere. Library code then checks GSL's return codes. */
#ifndef HS_CORE_RNG_H
#define HS_CORE_RNG_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

/* Mixes (seed, stream) into a well-spread 64-bit value (splitmix64 finalizer, applied twice so
 * that nearby seeds and nearby streams give unrelated results). */
uint64_t hs_rng_mix(uint64_t seed, uint64_t stream);

/* A new taus2 generator for (seed, stream); NULL when out of memory. */
gsl_rng *hs_rng_stream(uint64_t seed, uint64_t stream);

/* A lognormal factor with mean exactly 1 and coefficient of variation cv (std/mean):
 * sigma^2 = ln(1 + cv^2), mu = -sigma^2 / 2. cv == 0 returns 1.0 without drawing, so that a
 * run without jitter consumes no random numbers; cv < 0 or NaN returns NaN. */
double hs_rng_lognormal_unit(gsl_rng *r, double cv);

/* GSL's taus2 state (gsl/rng/taus.c), as three 32-bit words: the stream of hs_rng_stream
 * without the gsl_rng around it. */
typedef struct hs_rng {
  uint32_t s1, s2, s3;
} hs_rng;

/* Stream `stream` of `seed`, in the state hs_rng_stream leaves its generator in. */
void hs_rng_init(hs_rng *r, uint64_t seed, uint64_t stream);

/* The next 32-bit number: gsl_rng_get on the same stream (taus_get). */
static inline uint32_t hs_rng_get(hs_rng *r) {
  r->s1 = ((r->s1 & 4294967294U) << 12) ^ (((r->s1 << 13) ^ r->s1) >> 19);
  r->s2 = ((r->s2 & 4294967288U) << 4) ^ (((r->s2 << 2) ^ r->s2) >> 25);
  r->s3 = ((r->s3 & 4294967280U) << 17) ^ (((r->s3 << 3) ^ r->s3) >> 11);
  return r->s1 ^ r->s2 ^ r->s3;
}

/* A double in [0, 1): gsl_rng_uniform on the same stream. */
static inline double hs_rng_uniform(hs_rng *r) { return hs_rng_get(r) / 4294967296.0; }

/* hs_rng_lognormal_unit on the inline stream: the same draws (gsl_ran_lognormal's polar
 * method) and the same result. */
double hs_rng_lognormal(hs_rng *r, double cv);

/* Turns GSL's aborting error handler off (gsl_set_error_handler_off). */
void hs_gsl_init(void);

#endif
