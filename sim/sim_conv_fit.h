/* sim_conv_fit: analytic convergence parameters fitted to a model's own loss and accuracy
 * curves (`hetsim fit-convergence --curves FILE.csv`), kept in the database's convergence_fit
 * table (schema version 3, docs/schema.md), and the line that says where a run's convergence
 * parameters came from.
 *
 * A stored fit is one row: the model's name (any model, in the zoo or not), its parameters as a
 * JSON object (the analytic keys of sim_conv.h, plus dataset_size: the samples per epoch in
 * which the fit counted progress, classes, fitted: the keys fitted, accuracy_rmse), the source
 * (the curves' file name and the FNV-1a 64 hash of its bytes), the points fitted and the loss
 * RMSE. The newest row of a model is the one simulations use.
 *
 * Contract: the functions read or write through the caller's open store; they allocate nothing
 * the caller keeps, and return 0 or a negative HS_E* code with the diag filled. */
#ifndef HS_SIM_CONV_FIT_H
#define HS_SIM_CONV_FIT_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_error.h"
#include "core/core_store.h"
#include "sim/sim_conv.h"

typedef struct hs_conv_fit {
  int64_t id;                 /* convergence_fit.id */
  char model[128];
  char source[512];           /* e.g. "curves.csv fnv1a64:0123456789abcdef" */
  int64_t points;             /* curve points fitted */
  double rmse;                /* loss RMSE of the fit; NaN when not stored */
  double dataset_size;        /* samples per epoch the fit counted progress in; 0 = unknown */
  double beta0_scale;         /* the factor hs_conv_fit_newest applied to beta0 (1 = none) */
  char params[1024];          /* "phi=...,b0=...,..." for hs_conv_parse_fitted */
  char fitted[256];           /* the keys the fit fitted, as stored: a JSON array ("" when none) */
  char created_at[40];
} hs_conv_fit;

/* The newest fit stored for `model`. With dataset_size > 0 (the samples per epoch of the run
 * that will use it) and a fit that recorded its own, beta0 is scaled by dataset_size / the
 * fit's, so that the loss after a given number of effective samples is the fitted one (the
 * analytic model counts progress in epochs). HS_ENOTFOUND when the model has no fit, also in a
 * file older than schema version 3 (no table yet); HS_EDB on an SQL error. */
int hs_conv_fit_newest(hs_store *s, const char *model, int64_t dataset_size, hs_conv_fit *out, hs_diag *d);

/* One fit to store. */
typedef struct hs_conv_fit_row {
  const char *model;
  const hs_conv_coef *coef;   /* every analytic coefficient, fitted or fixed */
  double dataset_size;        /* samples per epoch of the curves (> 0) */
  int classes;                /* of the model; 0 = unknown (chance accuracy 0) */
  const char *const *fitted;  /* names of the fitted coefficients, NULL-terminated */
  double accuracy_rmse;       /* NaN when no accuracy was fitted */
  const char *source;
  int64_t points;             /* > 0 */
  double rmse;                /* loss RMSE */
} hs_conv_fit_row;

/* Stores a fit in one transaction, unless the newest fit of the model has the same source and
 * the same parameters: then nothing is written, *existed = 1 and *id is that fit's id (fitting
 * the same file with the same options twice stores it once). HS_EINVAL for a row with a
 * coefficient that is not finite or no points. */
int hs_conv_fit_store(hs_store *s, const hs_conv_fit_row *row, int64_t *id, int *existed, hs_diag *d);

/* Where a run's convergence parameters come from, one line (always terminated), for the run's
 * options and its summary: the proxy's training, a stored fit (its id and source), a
 * --convergence-params file, the analytic model's built-in fit for mlp and cnn, or the table's
 * illustrative defaults; then the keys the spec sets, if any. `fit` and `file` may be NULL. */
void hs_conv_source_text(const hs_conv_model *m, const char *model, const hs_conv_fit *fit, const char *file,
                         const char *spec, char *buf, size_t len);

#endif
