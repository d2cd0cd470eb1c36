/* core_rng: per-worker random streams derived from the run's seed, on top of GSL.
 *
 * Contract:
 * - Stream k of a seed is a pure function of (seed, k): its numbers do not depend on how many
 *   other streams exist or in which order they were created, so adding a worker does not
 *   perturb the others (STYLE.md, "Events and determinism").
 * - Streams are gsl_rng_taus2 generators (24 bytes of state, fast, period ~2^88). The caller owns
 *   each stream and frees it with gsl_rng_free. A stream is not thread-safe; streams are
 *   independent of each other and may be used from different threads.
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

/* Turns GSL's aborting error handler off (gsl_set_error_handler_off). */
void hs_gsl_init(void);

#endif
