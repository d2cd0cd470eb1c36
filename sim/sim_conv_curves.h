/* sim_conv_curves: the reader of loss and accuracy curves recorded elsewhere, which `hetsim
 * fit-convergence --curves FILE.csv` fits the analytic convergence model to (docs/convergence.md,
 * "Fitting to curves recorded elsewhere": the columns, the policies, the data set's size).
 *
 * Each row becomes one point: its samples (an epoch column is turned into samples with the data
 * set's size), loss and accuracy, and how the workers combined their updates: the samples one
 * update applies u, its staleness and the local steps between model averages tau (ssgd, ddp,
 * lbb: u = batch x workers, synchronous; asp: u = batch, staleness workers - 1; localsgd: u =
 * batch x workers, tau = period), and the seed column's label.
 *
 * Contract: bad input is HS_EINVAL with the message "NAME:LINE: ..." naming the column (or
 * "NAME: ..." for the file as a whole); out of memory is HS_ENOMEM; nothing is printed. On
 * success the caller frees the rows with hs_conv_curves_free (also safe after a failure). */
#ifndef HS_SIM_CONV_CURVES_H
#define HS_SIM_CONV_CURVES_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_error.h"

typedef struct hs_conv_curve_row {
  double samples;           /* training samples so far (from the epoch column when only it is given) */
  double epoch;             /* the epoch column; NaN when the row leaves it empty */
  double loss, acc;         /* acc NaN when not recorded */
  double u, stale, tau;     /* samples per update, staleness, local steps between model averages */
  uint64_t seed;            /* the seed column's text hashed (0: empty or no such column) */
  int line;                 /* in the file, from 1 */
} hs_conv_curve_row;

typedef struct hs_conv_curves {
  hs_conv_curve_row *rows;
  int n;
  double dataset_size;      /* samples per epoch the rows count in */
  char ignored[256];        /* the header's columns of other names, ", "-separated ("" none) */
} hs_conv_curves;

/* Parses the CSV text[0..len) of the file `name` (text[len] must be '\0'; the text is modified
 * in place). dataset_size: the samples per epoch given by the user (0: not given: then
 * samples/epoch of the rows that give both, else zoo_size, the zoo model's training set, 0 when
 * the model is not in the zoo). */
int hs_conv_curves_parse(const char *name, char *text, size_t len, double dataset_size, int64_t zoo_size,
                         hs_conv_curves *out, hs_diag *d);
void hs_conv_curves_free(hs_conv_curves *c);

#endif
