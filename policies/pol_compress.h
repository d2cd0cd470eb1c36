/* pol_compress: gradient compressors. Each is a const table (hs_compressor) listed once in a
 * registry, as policies are: its bytes on the wire, a model of its compute time that the
 * simulator charges, and the real operation on float arrays that the proxy and real runtimes
 * apply. Compressors: top-k with error feedback, QSGD, PowerSGD.
 *
 * Contract:
 * - A compressor has one setting, `param`, whose meaning the table names (`param_name`):
 *   topk: density k/n in (0, 1]; qsgd: quantization levels s >= 1; powersgd: rank r >= 1.
 *   It is what a policy puts in hs_comm_opts.ratio next to the compressor.
 * - A gradient is a list of blocks, one per layer, each viewed as a rows x cols matrix (cols = 1
 *   for a vector). Top-k and QSGD treat the concatenation as one flat vector; PowerSGD
 *   compresses each matrix block and sends vectors as they are. Where only a count n of floats is
 *   known (the simulator), hs_compress_flat_block views them as one near-square matrix.
 * - Bytes and seconds are models: bytes follow the wire formats below exactly; seconds follow
 *   the per-element cost model of hs_compress_seconds (documented there and in
 *   docs/policies.md), for a reference device. The simulator scales them by the worker's
 *   compute slowdown.
 * - The real operation keeps its state (error-feedback residual, PowerSGD's warm-started Q,
 *   QSGD's random stream) in an hs_compress_ctx, one per worker; contexts are not thread-safe
 *   and are created and freed by the caller (hs_compress_open / hs_compress_close).
 * - Everything is deterministic for a given seed and stream.
 * Units: bytes, seconds; float arrays are fp32. */
#ifndef HS_POL_COMPRESS_H
#define HS_POL_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "core/core_error.h"

#define HS_COMPRESSOR_VERSION 1

/* A layer's gradient viewed as a matrix; cols = 1 for a vector. */
typedef struct hs_block {
  int64_t rows, cols;
} hs_block;

typedef struct hs_compress_ctx hs_compress_ctx;

typedef struct hs_compressor {
  int version; /* HS_COMPRESSOR_VERSION */
  const char *name;
  const char *description;
  const char *source;
  const char *param_name;            /* "density", "levels", "rank" */
  double param_min, param_max;       /* inclusive range of the setting */
  int param_integer;                 /* 1 when the setting must be an integer */
  /* Bytes on the wire for the blocks at this setting. */
  double (*bytes)(const hs_block *b, int nb, double param);
  /* Compress + decompress time on the reference device (see hs_compress_seconds). */
  double (*seconds)(const hs_block *b, int nb, double param);
  /* The real operation, in place: g <- decompress(compress(g [+ residual])), updating the
   * context's state. */
  int (*roundtrip)(hs_compress_ctx *x, float *g, hs_diag *d);
} hs_compressor;

extern const hs_compressor hs_compressor_topk;
extern const hs_compressor hs_compressor_qsgd;
extern const hs_compressor hs_compressor_powersgd;

/* NULL-terminated list, and lookup by name (NULL when unknown; hs_compressor_names lists the
 * valid ones for messages). */
const hs_compressor *const *hs_compressor_list(void);
const hs_compressor *hs_compressor_find(const char *name);
void hs_compressor_names(char *buf, size_t len);
/* HS_EINVAL with a message when param is outside the compressor's range. */
int hs_compressor_check(const hs_compressor *c, double param, hs_diag *d);

/* The reference device of the compute-time model: an assumed GTX 1080 Ti-class GPU (the base
 * device of traces/ashl-3worker.yaml), its datasheet memory bandwidth and peak fp32 rate. */
#define HS_COMPRESS_REF_BW 484e9     /* bytes/s */
#define HS_COMPRESS_REF_FLOPS 11.3e12 /* flop/s */

/* The cost model: n * (bytes_per_elem / HS_COMPRESS_REF_BW + flops_per_elem / HS_COMPRESS_REF_FLOPS),
 * i.e. each pass over the gradient is memory-bound at the reference bandwidth and the matrix
 * products of PowerSGD run at the reference peak. Per-element costs: see pol_compress.c. */
double hs_compress_seconds(const hs_compressor *c, const hs_block *b, int nb, double param);
double hs_compress_bytes(const hs_compressor *c, const hs_block *b, int nb, double param);
/* n floats viewed as one rows x cols matrix with rows = ceil(sqrt(n)), cols = ceil(n / rows)
 * (rows * cols >= n; the few padding entries are counted, a negligible overstatement). */
hs_block hs_compress_flat_block(double n);
/* Bytes on the wire relative to fp32 for a large flat gradient (10^7 floats): topk 2 * density,
 * qsgd about (1 + ceil(log2(s + 1))) / 32, powersgd about 2r / sqrt(n). For policies, which do
 * not know the gradient's size. */
double hs_compress_wire_ratio(const hs_compressor *c, double param);

/* --- the real operations ------------------------------------------------------------------ */

/* A context for one worker: copies the block list, allocates the state (residual of
 * sum(rows*cols) floats for topk and powersgd, Q matrices for powersgd) and a random stream
 * (seed, stream) for QSGD's rounding and PowerSGD's initial Q. */
int hs_compress_open(hs_compress_ctx **out, const hs_compressor *c, double param,
                     const hs_block *blocks, int nb, uint64_t seed, uint64_t stream, hs_diag *d);
void hs_compress_close(hs_compress_ctx *x);
/* g has sum(rows*cols) floats. */
int hs_compress_roundtrip(hs_compress_ctx *x, float *g, hs_diag *d);
/* A vector g of n floats through x in place, as one flat block (x opened on
 * hs_compress_flat_block(n)): copied into padded (rows * cols floats, the padding zeroed),
 * round-tripped there, copied back. How the real runtimes, the proxy and the calibration send
 * an update through a compressor. */
int hs_compress_roundtrip_flat(hs_compress_ctx *x, float *g, int64_t n, float *padded, hs_diag *d);

/* A sender's compressor context across its sends of a vector of n floats as one flat block
 * (the real runtimes' workers, the proxy's): opened at the first compressed send, and again,
 * its error feedback starting over, when the compressor or its setting changes. Zeroed = none
 * open. */
typedef struct hs_compress_slot {
  hs_compress_ctx *cx;
  const hs_compressor *c;
  double param;
} hs_compress_slot;
/* g (n floats) through c at param in place with the slot's context (opened on
 * hs_compress_flat_block(n) with the random stream (seed, stream)): hs_compress_roundtrip_flat,
 * padded holding the block's rows * cols floats. */
int hs_compress_slot_send(hs_compress_slot *s, const hs_compressor *c, double param, float *g, int64_t n,
                          float *padded, uint64_t seed, uint64_t stream, hs_diag *d);
void hs_compress_slot_close(hs_compress_slot *s);
/* The error-feedback residual (NULL for qsgd, which is unbiased and keeps none). */
const float *hs_compress_residual(const hs_compress_ctx *x);
int64_t hs_compress_size(const hs_compress_ctx *x); /* floats */

/* Top-k: k = max(1, ceil(density * n)), capped at n. */
int64_t hs_topk_count(int64_t n, double density);
/* The k entries of largest magnitude, indices ascending; ties at the threshold go to the
 * lowest indices. scratch holds n floats. O(n) expected. */
void hs_topk_select(const float *x, int64_t n, int64_t k, float *scratch, int32_t *idx, float *val);
/* out := 0, then out[idx[i]] = val[i]. */
void hs_topk_scatter(float *out, int64_t n, const int32_t *idx, const float *val, int64_t k);

/* QSGD with s levels over buckets of HS_QSGD_BUCKET values: for each bucket, norm = ||x||_2 and
 * level_i = sign(x_i) * (l + 1 with probability |x_i|/norm*s - l, else l), l = floor(|x_i|/norm*s).
 * norms has ceil(n / HS_QSGD_BUCKET) entries. Decoding is x_i = norm * level_i / s, so
 * E[decode] = x. */
#define HS_QSGD_BUCKET 512
void hs_qsgd_encode(const float *x, int64_t n, int s, gsl_rng *r, float *norms, int32_t *level);
void hs_qsgd_decode(const float *norms, const int32_t *level, int64_t n, int s, float *out);

/* One PowerSGD step on a rows x cols matrix m (row-major) at rank r, Q (cols x r, row-major)
 * warm-started: p = m q; p <- Gram-Schmidt(p); q = m^T p; m <- p q^T. p has rows x r floats. */
void hs_powersgd_step(float *m, int64_t rows, int64_t cols, int r, float *p, float *q);

#endif
