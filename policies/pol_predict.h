/* pol_predict: one-step-ahead predictors of a worker's speed series, each a table (as
 * policies are): `last` (the last value), `ema` (exponential smoothing), `holt` (Holt's
 * linear trend) and `gru` (a small GRU trained online by truncated back-propagation through
 * time and plain SGD on the series it sees).
 *
 * Contract:
 * - The caller allocates state_size zeroed bytes per series and calls init once, observe for
 *   every new value, predict for the next one, fini once (which frees what init allocated).
 * - predict returns NaN before the first observation; afterwards a finite number.
 * - Deterministic: the same parameters, seed and series give the same predictions bit for bit;
 *   no globals, no I/O.
 * Units: whatever the series carries (the policies feed seconds per sample). */
#ifndef HS_POL_PREDICT_H
#define HS_POL_PREDICT_H

#include <stddef.h>
#include <stdint.h>

typedef struct hs_pred_params {
  double alpha;  /* ema, holt: level smoothing in (0, 1] */
  double beta;   /* holt: trend smoothing in [0, 1] */
  int hidden;    /* gru: hidden units */
  int bptt;      /* gru: truncation length (steps unrolled per update) */
  double lr;     /* gru: SGD learning rate */
  uint64_t seed; /* gru: weight initialisation */
} hs_pred_params;

typedef struct hs_predictor {
  const char *name;
  const char *description;
  size_t state_size;
  int (*init)(void *state, const hs_pred_params *p);  /* 0 or HS_ENOMEM / HS_EINVAL */
  void (*observe)(void *state, double y);
  double (*predict)(void *state);  /* uses the state's scratch space, changes nothing else */
  void (*fini)(void *state);
} hs_predictor;

extern const hs_predictor hs_predictor_last;
extern const hs_predictor hs_predictor_ema;
extern const hs_predictor hs_predictor_holt;
extern const hs_predictor hs_predictor_gru;

/* NULL-terminated, in the order of the policies' `predictor` enum: last|ema|holt|gru. */
const hs_predictor *const *hs_predictor_list(void);
#define HS_PREDICTOR_CHOICES "last|ema|holt|gru"

#endif
