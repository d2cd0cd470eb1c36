/* cal_compress: the compressors' round trips timed where the real runtimes run them.
 *
 * The real runtimes (real/real_worker.h, hs_real_worker_compress) send an update through its
 * compressor on the host: the vector viewed as one near-square matrix (hs_compress_flat_block),
 * compressed and decompressed in place with error feedback (pol_compress.h). The simulator
 * charges that round trip by the compressor's cost model on a reference device (a GTX
 * 1080 Ti-class GPU, pol_compress.h), some 100 times faster than a CPU core's quickselect over
 * mlp's gradient here: `hetsim validate` takes these timings instead.
 *
 * Timed: top-k at HS_CAL_COMPRESS_DENSITY (ashl's default density; the only compressor a policy
 * sends through) on each distinct vector length of `elems` (the models' gradients, in floats):
 * `warmup` untimed round trips, then timed ones until the rule of cal_time.h stops them, each as
 * the runtimes make it (the update copied into the padded matrix and back included) on fresh
 * values (their writing untimed), *stop checked before each. Each length is stored as a
 * compress_sample of device dev (schema.md) unless one is there already (then skipped, count 0),
 * with redo the device's samples deleted first. One thread; nothing is pinned.
 * Units: s, floats. */
#ifndef HS_CAL_COMPRESS_H
#define HS_CAL_COMPRESS_H

#include <stdint.h>

#include "calib/cal_comm.h"
#include "calib/cal_time.h"
#include "core/core_error.h"
#include "core/core_progress.h"
#include "core/core_store.h"

#define HS_CAL_COMPRESS_DENSITY 0.1
enum { HS_CAL_COMPRESS_MAX = 16 };

typedef struct hs_cal_compress_result {
  char compressor[16];
  double setting;
  int64_t elems;
  hs_cal_stats stats; /* count 0 when the sample was stored already (then not timed) */
  double model_s;     /* the cost model's time on its reference device (hs_compress_seconds) */
} hs_cal_compress_result;

/* out[0..*n_out) (at most HS_CAL_COMPRESS_MAX lengths), in the order first given; progress (may
 * be NULL) is set to ++*done after each length. */
int hs_cal_compress(hs_store *s, int64_t dev, const int64_t *elems, int n, int redo, const hs_cal_comm_opts *o,
                    hs_progress *progress, double *done, hs_cal_compress_result *out, int *n_out, hs_diag *d);

/* The distinct lengths of elems (at most HS_CAL_COMPRESS_MAX), for a progress total. */
int hs_cal_compress_points(const int64_t *elems, int n);

#endif
