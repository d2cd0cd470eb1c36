/* cal_compress: see cal_compress.h. */
#include "calib/cal_compress.h"

#include <stdlib.h>
#include <string.h>

#include "calib/cal_store.h"
#include "policies/pol_compress.h"

/* Whether elems[i] is a length to time: positive, and not given before. */
static int fresh(const int64_t *elems, int i) {
  if (elems[i] < 1) return 0;
  for (int j = 0; j < i; j++)
    if (elems[j] == elems[i]) return 0;
  return 1;
}

int hs_cal_compress_points(const int64_t *elems, int n) {
  int k = 0;
  for (int i = 0; i < n && k < HS_CAL_COMPRESS_MAX; i++) k += fresh(elems, i);
  return k;
}

/* One round trip as hs_real_worker_compress makes it (hs_compress_roundtrip_flat: the update
 * copied into the padded matrix, compressed and decompressed there, copied back); on fresh values
 * each time (written before the clock: a gradient differs from step to step, and error
 * feedback carries the residual of the last). */
typedef struct trip {
  hs_compress_ctx *cx;
  float *g, *padded;
  int64_t n, m; /* floats of the update, of the flat block */
  uint64_t rng;
} trip;

static int trip_sample(void *ctx, int rep, double *t, hs_diag *d) {
  (void)rep;
  trip *x = ctx;
  for (int64_t i = 0; i < x->n; i++) {
    x->rng = x->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    x->g[i] = (float)((double)(x->rng >> 40) / (double)(1ULL << 24) - 0.5);
  }
  double t0 = hs_cal_now();
  int rc = hs_compress_roundtrip_flat(x->cx, x->g, x->n, x->padded, d);
  *t = hs_cal_now() - t0;
  return rc;
}

static int time_one(int64_t elems, const hs_cal_comm_opts *o, hs_cal_stats *st, hs_diag *d) {
  hs_block b = hs_compress_flat_block((double)elems);
  trip x = {.n = elems, .m = b.rows * b.cols, .rng = 0x9e3779b97f4a7c15ULL ^ (uint64_t)elems};
  x.g = malloc((size_t)x.n * sizeof *x.g);
  x.padded = malloc((size_t)x.m * sizeof *x.padded);
  int rc = !x.g || !x.padded ? hs_diag_set(d, HS_ENOMEM, "out of memory for a vector of %lld floats", (long long)x.m)
                             : hs_compress_open(&x.cx, &hs_compressor_topk, HS_CAL_COMPRESS_DENSITY, &b, 1, 1, 0, d);
  if (!rc) rc = hs_cal_time_series(trip_sample, &x, o, st, d);
  if (x.cx) hs_compress_close(x.cx);
  free(x.g);
  free(x.padded);
  return rc;
}

int hs_cal_compress(hs_store *s, int64_t dev, const int64_t *elems, int n, int redo, const hs_cal_comm_opts *o,
                    hs_progress *progress, double *done, hs_cal_compress_result *out, int *n_out, hs_diag *d) {
  *n_out = 0;
  int rc = redo ? hs_cal_forget_compress(s, dev, d) : 0;
  const char *name = hs_compressor_topk.name;
  for (int i = 0; !rc && i < n && *n_out < HS_CAL_COMPRESS_MAX; i++) {
    if (!fresh(elems, i)) continue;
    hs_cal_compress_result *r = &out[(*n_out)++];
    memset(r, 0, sizeof *r);
    snprintf(r->compressor, sizeof r->compressor, "%s", name);
    r->setting = HS_CAL_COMPRESS_DENSITY;
    r->elems = elems[i];
    hs_block b = hs_compress_flat_block((double)elems[i]);
    r->model_s = hs_compress_seconds(&hs_compressor_topk, &b, 1, r->setting);
    int stored = 0;
    if ((rc = hs_cal_compress_stored(s, dev, name, r->setting, r->elems, &stored, d))) break;
    if (!stored) {
      if ((rc = time_one(r->elems, o, &r->stats, d))) {
        hs_diag_prefix(d, "%s round trip of %lld floats", name, (long long)r->elems);
        break;
      }
      if ((rc = hs_cal_store_compress_sample(s, dev, name, r->setting, r->elems, &r->stats, d))) break;
    }
    if (progress) hs_progress_update(progress, ++*done);
  }
  return rc;
}
