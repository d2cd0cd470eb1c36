/* fuzz_curves: libFuzzer entry point for the reader of recorded convergence curves
 * (sim/sim_conv_curves.c), which `hetsim fit-convergence --curves FILE.csv` parses.
 *
 * The input's first byte picks what the user gave beside the file: bit 0 a --dataset-size of
 * 60,000, bit 1 a model of the zoo (a training set of 60,000); the rest is the CSV. The contract
 * of sim/sim_conv_curves.h must hold:
 * - a failure is HS_EINVAL (or HS_ENOMEM) with a message naming the file, and returns no rows;
 * - a success returns at least one row, on lines after one another, each with finite samples
 *   and loss >= 0, an accuracy in [0, 1] or none, samples per update >= 1, staleness >= 0 and
 *   a whole number of local steps >= 1 (1 for every policy but localsgd), and a data set size
 *   > 0 that is the one given when one was.
 * Any broken invariant traps. tests/fuzz/run.sh builds it; tests/test_fuzz_regress.c runs every
 * file of tests/fuzz/corpus/curves/ (and tests/fuzz/regress/curves/) through this function. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_conv_curves.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!size) return 0;
  double given = data[0] & 1 ? 60000 : 0;
  int64_t zoo = data[0] & 2 ? 60000 : 0;
  char *text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  hs_conv_curves c;
  hs_diag d = {0};
  int rc = hs_conv_curves_parse("fuzz.csv", text, size - 1, given, zoo, &c, &d);
  if (rc) {
    if ((rc != HS_EINVAL && rc != HS_ENOMEM) || rc != d.code || c.rows || c.n) __builtin_trap();
    if (rc == HS_EINVAL && strncmp(d.msg, "fuzz.csv", 8) != 0) __builtin_trap();
  } else {
    if (c.n < 1 || !(c.dataset_size > 0) || !isfinite(c.dataset_size)) __builtin_trap();
    if (given > 0 && c.dataset_size != given) __builtin_trap();
    for (int i = 0; i < c.n; i++) {
      const hs_conv_curve_row *r = &c.rows[i];
      if (!(r->samples >= 0) || !isfinite(r->samples) || !(r->loss >= 0) || !isfinite(r->loss)) __builtin_trap();
      if (!isnan(r->acc) && !(r->acc >= 0 && r->acc <= 1)) __builtin_trap();
      if (!(r->u >= 1) || !isfinite(r->u) || !(r->stale >= 0) || !(r->tau >= 1) || r->tau != floor(r->tau)) __builtin_trap();
      if (i > 0 && r->line <= c.rows[i - 1].line) __builtin_trap();
    }
  }
  hs_conv_curves_free(&c);
  free(text);
  return 0;
}
