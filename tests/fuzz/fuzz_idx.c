/* fuzz_idx: libFuzzer entry point for the IDX parser (nn/nn_data.c).
 *
 * Feeds each input to hs_idx_parse_mem as an image file and as a label file, whole and with an
 * item limit taken from the input's first byte, so that the header checks, the size guards and
 * the payload length checks all see arbitrary bytes. The file reader shares the header check.
 * Not built by CMake yet; by hand, for example:
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -I. -D_DEFAULT_SOURCE \
 *     tests/fuzz/fuzz_idx.c nn/nn_data.c core/core_rng.c core/core_error.c \
 *     -lgsl -lgslcblas -lz -lm -o fuzz_idx
 *   ./fuzz_idx -max_total_time=60 tests/data */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nn/nn_data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const uint32_t kinds[2] = {HS_IDX_IMAGES, HS_IDX_LABELS};
  int64_t limit = size ? (int64_t)(data[0] % 8) : 0;
  for (int k = 0; k < 2; k++) {
    for (int limited = 0; limited < 2; limited++) {
      hs_idx x;
      hs_diag d = {0};
      int rc = hs_idx_parse_mem(&x, data, size, kinds[k], limited ? limit : 0, "fuzz", &d);
      if (rc == 0) {
        /* Touch every byte the parser claims to hold, so a length bug is an ASan report. */
        size_t n = (size_t)x.loaded * (size_t)x.rows * (size_t)x.cols;
        unsigned sum = 0;
        for (size_t i = 0; i < n; i++) sum += x.data[i];
        (void)sum;
        hs_idx_free(&x);
      } else if (d.msg[0] == '\0' || rc != d.code) {
        __builtin_trap(); /* every failure must leave a message */
      }
    }
  }
  return 0;
}
