/* The compressors: see pol_compress.h for the contract.
 *
 * Wire formats (what `bytes` counts):
 * - topk: k (index int32, value fp32) pairs: 8k bytes.
 * - qsgd: one fp32 norm per bucket of HS_QSGD_BUCKET values, then per value a sign bit and
 *   ceil(log2(s + 1)) bits for its level, packed: 4 ceil(n/512) + ceil(n (1 + ceil(log2(s+1))) / 8).
 *   (QSGD's Elias coding of the levels would send fewer bits for small s; the fixed-width code
 *   is what GPU implementations use.)
 * - powersgd: per matrix block with r (rows + cols) < rows cols, P and Q in fp32:
 *   4 r (rows + cols); other blocks (vectors, tiny matrices) as fp32: 4 rows cols.
 *
 * Compute-time model (bytes touched per element B_e and flops per element F_e, see
 * hs_compress_seconds):
 * - topk: 36 B/elem. Error feedback adds the residual (read g and e, write: 12 B), a radix
 *   select over the 32-bit magnitudes takes 4 passes (16 B), gathering the selected entries and
 *   writing the new residual 4 B more, decompression zero-fills and scatters (4 B).
 * - qsgd: 14 B/elem: the bucket norms (read 4 B), quantization (read 4 B, write 1 B of packed
 *   level), decoding (read 1 B, write 4 B). The random draws are taken as free.
 * - powersgd: 32 B and 6r flops per element of a compressed block: error feedback (12 B), the
 *   products M Q and M^T P (each reads M: 8 B, 2r flops per element each), the approximation
 *   P Q^T and the new residual (read M, write approximation and residual: 12 B, 2r flops).
 *   Orthogonalization touches only rows x r values and is neglected. */
#include "policies/pol_compress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "core/core_rng.h"

struct hs_compress_ctx {
  const hs_compressor *c;
  double param;
  int nb;
  hs_block *blocks;
  int64_t n;           /* floats */
  float *residual;     /* topk, powersgd */
  float *scratch;      /* topk: n floats; qsgd: norms; powersgd: P of the largest block */
  int32_t *idx;        /* topk: k; qsgd: n levels */
  float *val;          /* topk: k */
  float *q;            /* powersgd: the Q of every compressed block, concatenated */
  gsl_rng *rng;
};

static int64_t block_elems(const hs_block *b, int nb) {
  int64_t n = 0;
  for (int i = 0; i < nb; i++) n += b[i].rows * b[i].cols;
  return n;
}

/* PowerSGD compresses a block only when P and Q are smaller than the block itself. */
static int psgd_compressed(const hs_block *b, int r) {
  return b->cols > 1 && b->rows > 1 && (double)r * (double)(b->rows + b->cols) < (double)b->rows * (double)b->cols;
}

/* --- bytes and seconds ---------------------------------------------------------------------- */

static double topk_bytes(const hs_block *b, int nb, double density) {
  return 8.0 * (double)hs_topk_count(block_elems(b, nb), density);
}

static int qsgd_bits(double s) { return 1 + (int)ceil(log2(s + 1.0)); }

static double qsgd_bytes(const hs_block *b, int nb, double s) {
  double n = (double)block_elems(b, nb);
  return 4.0 * ceil(n / HS_QSGD_BUCKET) + ceil(n * qsgd_bits(s) / 8.0);
}

static double psgd_bytes(const hs_block *b, int nb, double rank) {
  int r = (int)rank;
  double bytes = 0;
  for (int i = 0; i < nb; i++)
    bytes += psgd_compressed(&b[i], r) ? 4.0 * r * (double)(b[i].rows + b[i].cols)
                                       : 4.0 * (double)(b[i].rows * b[i].cols);
  return bytes;
}

static double model_seconds(double elems, double bytes_per_elem, double flops_per_elem) {
  return elems * (bytes_per_elem / HS_COMPRESS_REF_BW + flops_per_elem / HS_COMPRESS_REF_FLOPS);
}

static double topk_seconds(const hs_block *b, int nb, double density) {
  return model_seconds((double)block_elems(b, nb), 36.0, 0.0);
}

static double qsgd_seconds(const hs_block *b, int nb, double s) {
  return model_seconds((double)block_elems(b, nb), 14.0, 0.0);
}

static double psgd_seconds(const hs_block *b, int nb, double rank) {
  int r = (int)rank;
  double t = 0;
  for (int i = 0; i < nb; i++)
    if (psgd_compressed(&b[i], r)) t += model_seconds((double)(b[i].rows * b[i].cols), 32.0, 6.0 * r);
  return t;
}

double hs_compress_seconds(const hs_compressor *c, const hs_block *b, int nb, double param) {
  return c->seconds(b, nb, param);
}

double hs_compress_bytes(const hs_compressor *c, const hs_block *b, int nb, double param) {
  return c->bytes(b, nb, param);
}

hs_block hs_compress_flat_block(double n) {
  if (!(n >= 1)) return (hs_block){1, 1};
  int64_t rows = (int64_t)ceil(sqrt(n));
  int64_t cols = (int64_t)ceil(n / (double)rows);
  return (hs_block){rows, cols};
}

double hs_compress_wire_ratio(const hs_compressor *c, double param) {
  const double n = 1e7;
  hs_block b = hs_compress_flat_block(n);
  return c->bytes(&b, 1, param) / (4.0 * (double)(b.rows * b.cols));
}

/* --- top-k ---------------------------------------------------------------------------------- */

int64_t hs_topk_count(int64_t n, double density) {
  if (n <= 0) return 0;
  double k = ceil(density * (double)n);
  if (!(k >= 1)) return 1;
  return k >= (double)n ? n : (int64_t)k;
}

static void swapf(float *a, float *b) {
  float t = *a;
  *a = *b;
  *b = t;
}

/* The k-th largest value of a[0..n) (k >= 1), by quickselect with a median-of-three pivot;
 * a is permuted. */
static float kth_largest(float *a, int64_t n, int64_t k) {
  int64_t lo = 0, hi = n - 1, want = k - 1; /* position in descending order */
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (a[mid] > a[lo]) swapf(&a[mid], &a[lo]);
    if (a[hi] > a[lo]) swapf(&a[hi], &a[lo]);
    if (a[mid] > a[hi]) swapf(&a[mid], &a[hi]);
    float pivot = a[hi]; /* median of the three */
    /* Three-way partition, descending: [lo, lt) > pivot, [lt, gt] == pivot, (gt, hi] < pivot. */
    int64_t lt = lo, i = lo, gt = hi;
    while (i <= gt) {
      if (a[i] > pivot) swapf(&a[lt++], &a[i++]);
      else if (a[i] < pivot) swapf(&a[i], &a[gt--]);
      else i++;
    }
    if (want < lt) hi = lt - 1;
    else if (want > gt) lo = gt + 1;
    else return pivot;
  }
  return a[lo];
}

void hs_topk_select(const float *x, int64_t n, int64_t k, float *scratch, int32_t *idx, float *val) {
  if (k <= 0 || n <= 0) return;
  if (k > n) k = n;
  for (int64_t i = 0; i < n; i++) scratch[i] = fabsf(x[i]);
  float thr = kth_largest(scratch, n, k);
  int64_t above = 0;
  for (int64_t i = 0; i < n; i++) above += fabsf(x[i]) > thr;
  int64_t ties = k - above, m = 0;
  for (int64_t i = 0; i < n && m < k; i++) {
    float a = fabsf(x[i]);
    if (a > thr || (a == thr && ties-- > 0)) {
      idx[m] = (int32_t)i;
      val[m++] = x[i];
    }
  }
}

void hs_topk_scatter(float *out, int64_t n, const int32_t *idx, const float *val, int64_t k) {
  memset(out, 0, (size_t)n * sizeof *out);
  for (int64_t i = 0; i < k; i++) out[idx[i]] = val[i];
}

static int topk_roundtrip(hs_compress_ctx *x, float *g, hs_diag *d) {
  int64_t n = x->n, k = hs_topk_count(n, x->param);
  for (int64_t i = 0; i < n; i++) g[i] += x->residual[i];
  hs_topk_select(g, n, k, x->scratch, x->idx, x->val);
  /* What is not sent stays in the residual for the next step (error feedback). */
  memcpy(x->residual, g, (size_t)n * sizeof *g);
  for (int64_t i = 0; i < k; i++) x->residual[x->idx[i]] = 0.0f;
  hs_topk_scatter(g, n, x->idx, x->val, k);
  return 0;
}

/* --- QSGD ----------------------------------------------------------------------------------- */

void hs_qsgd_encode(const float *x, int64_t n, int s, gsl_rng *r, float *norms, int32_t *level) {
  for (int64_t b0 = 0, bi = 0; b0 < n; b0 += HS_QSGD_BUCKET, bi++) {
    int64_t b1 = b0 + HS_QSGD_BUCKET < n ? b0 + HS_QSGD_BUCKET : n;
    double ss = 0;
    for (int64_t i = b0; i < b1; i++) ss += (double)x[i] * (double)x[i];
    double norm = sqrt(ss);
    norms[bi] = (float)norm;
    for (int64_t i = b0; i < b1; i++) {
      if (norm == 0) {
        level[i] = 0;
        continue;
      }
      double u = fabs((double)x[i]) / norm * s;
      double l = floor(u);
      if (l > s) l = s; /* rounding of the norm can push u a hair above s */
      int32_t q = (int32_t)l + (gsl_rng_uniform(r) < u - l ? 1 : 0);
      level[i] = x[i] < 0 ? -q : q;
    }
  }
}

void hs_qsgd_decode(const float *norms, const int32_t *level, int64_t n, int s, float *out) {
  for (int64_t i = 0; i < n; i++)
    out[i] = (float)((double)norms[i / HS_QSGD_BUCKET] * level[i] / s);
}

static int qsgd_roundtrip(hs_compress_ctx *x, float *g, hs_diag *d) {
  int s = (int)x->param;
  hs_qsgd_encode(g, x->n, s, x->rng, x->scratch, x->idx);
  hs_qsgd_decode(x->scratch, x->idx, x->n, s, g);
  return 0;
}

/* --- PowerSGD ------------------------------------------------------------------------------- */

/* Gram-Schmidt on the r columns of p (rows x r, row-major), in place. A column that vanishes
 * (rank-deficient input) is left zero, so that it adds nothing to the approximation. */
static void gram_schmidt(float *p, int64_t rows, int r) {
  for (int j = 0; j < r; j++) {
    for (int i = 0; i < j; i++) {
      double dot = 0;
      for (int64_t k = 0; k < rows; k++) dot += (double)p[k * r + i] * p[k * r + j];
      for (int64_t k = 0; k < rows; k++) p[k * r + j] -= (float)(dot * p[k * r + i]);
    }
    double nn = 0;
    for (int64_t k = 0; k < rows; k++) nn += (double)p[k * r + j] * p[k * r + j];
    double norm = sqrt(nn);
    for (int64_t k = 0; k < rows; k++) p[k * r + j] = norm > 1e-30 ? (float)(p[k * r + j] / norm) : 0.0f;
  }
}

void hs_powersgd_step(float *m, int64_t rows, int64_t cols, int r, float *p, float *q) {
  /* p = m q */
  for (int64_t i = 0; i < rows; i++)
    for (int j = 0; j < r; j++) {
      double acc = 0;
      for (int64_t k = 0; k < cols; k++) acc += (double)m[i * cols + k] * q[k * r + j];
      p[i * r + j] = (float)acc;
    }
  gram_schmidt(p, rows, r);
  /* q = m^T p */
  for (int64_t k = 0; k < cols; k++)
    for (int j = 0; j < r; j++) q[k * r + j] = 0.0f;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t k = 0; k < cols; k++) {
      float mik = m[i * cols + k];
      for (int j = 0; j < r; j++) q[k * r + j] += mik * p[i * r + j];
    }
  /* m = p q^T */
  for (int64_t i = 0; i < rows; i++)
    for (int64_t k = 0; k < cols; k++) {
      double acc = 0;
      for (int j = 0; j < r; j++) acc += (double)p[i * r + j] * q[k * r + j];
      m[i * cols + k] = (float)acc;
    }
}

static int psgd_roundtrip(hs_compress_ctx *x, float *g, hs_diag *d) {
  int r = (int)x->param;
  float *q = x->q;
  int64_t off = 0;
  for (int b = 0; b < x->nb; b++) {
    const hs_block *bl = &x->blocks[b];
    int64_t sz = bl->rows * bl->cols;
    if (psgd_compressed(bl, r)) {
      float *m = g + off, *e = x->residual + off;
      for (int64_t i = 0; i < sz; i++) m[i] += e[i];
      memcpy(e, m, (size_t)sz * sizeof *m);
      hs_powersgd_step(m, bl->rows, bl->cols, r, x->scratch, q);
      for (int64_t i = 0; i < sz; i++) e[i] -= m[i];
      q += bl->cols * r;
    }
    off += sz;
  }
  return 0;
}

/* --- contexts ------------------------------------------------------------------------------- */

int hs_compressor_check(const hs_compressor *c, double param, hs_diag *d) {
  if (!(param >= c->param_min && param <= c->param_max) || (c->param_integer && param != floor(param)))
    return hs_diag_set(d, HS_EINVAL, "compressor %s: %s must be %s in [%g, %g], got %g", c->name,
                       c->param_name, c->param_integer ? "an integer" : "a number", c->param_min,
                       c->param_max, param);
  return 0;
}

int hs_compress_open(hs_compress_ctx **out, const hs_compressor *c, double param,
                     const hs_block *blocks, int nb, uint64_t seed, uint64_t stream, hs_diag *d) {
  *out = NULL;
  int rc = hs_compressor_check(c, param, d);
  if (rc) return rc;
  if (nb < 1) return hs_diag_set(d, HS_EINVAL, "compressor %s: no block to compress", c->name);
  for (int i = 0; i < nb; i++)
    if (blocks[i].rows < 1 || blocks[i].cols < 1 || blocks[i].rows > INT32_MAX / blocks[i].cols)
      return hs_diag_set(d, HS_EINVAL, "compressor %s: block %d is %lld x %lld", c->name, i,
                         (long long)blocks[i].rows, (long long)blocks[i].cols);
  hs_compress_ctx *x = calloc(1, sizeof *x);
  if (!x) return hs_diag_set(d, HS_ENOMEM, "out of memory");
  x->c = c;
  x->param = param;
  x->nb = nb;
  x->n = block_elems(blocks, nb);
  x->blocks = malloc((size_t)nb * sizeof *blocks);
  x->rng = hs_rng_stream(seed, stream);
  int ok = x->blocks && x->rng && x->n <= INT32_MAX;
  if (ok) memcpy(x->blocks, blocks, (size_t)nb * sizeof *blocks);
  size_t n = (size_t)x->n;
  if (ok && c == &hs_compressor_topk) {
    size_t k = (size_t)hs_topk_count(x->n, param);
    x->residual = calloc(n, sizeof *x->residual);
    x->scratch = malloc(n * sizeof *x->scratch);
    x->idx = malloc(k * sizeof *x->idx);
    x->val = malloc(k * sizeof *x->val);
    ok = x->residual && x->scratch && x->idx && x->val;
  } else if (ok && c == &hs_compressor_qsgd) {
    x->scratch = malloc(((n + HS_QSGD_BUCKET - 1) / HS_QSGD_BUCKET) * sizeof *x->scratch);
    x->idx = malloc(n * sizeof *x->idx);
    ok = x->scratch && x->idx;
  } else if (ok && c == &hs_compressor_powersgd) {
    int r = (int)param;
    int64_t qn = 0, pmax = 1;
    for (int i = 0; i < nb; i++)
      if (psgd_compressed(&blocks[i], r)) {
        qn += blocks[i].cols * r;
        if (blocks[i].rows * r > pmax) pmax = blocks[i].rows * r;
      }
    x->residual = calloc(n, sizeof *x->residual);
    x->scratch = malloc((size_t)pmax * sizeof *x->scratch);
    x->q = malloc((size_t)(qn > 0 ? qn : 1) * sizeof *x->q);
    ok = x->residual && x->scratch && x->q;
    /* Q starts as standard normal draws (PowerSGD's initialization), then is warm-started
     * from the previous step. */
    for (int64_t i = 0; ok && i < qn; i++) x->q[i] = (float)gsl_ran_gaussian(x->rng, 1.0);
  }
  if (!ok) {
    hs_compress_close(x);
    return hs_diag_set(d, HS_ENOMEM, "out of memory for compressor %s on %lld floats", c->name,
                       (long long)n);
  }
  *out = x;
  return 0;
}

void hs_compress_close(hs_compress_ctx *x) {
  if (!x) return;
  free(x->blocks);
  free(x->residual);
  free(x->scratch);
  free(x->idx);
  free(x->val);
  free(x->q);
  if (x->rng) gsl_rng_free(x->rng);
  free(x);
}

int hs_compress_roundtrip(hs_compress_ctx *x, float *g, hs_diag *d) { return x->c->roundtrip(x, g, d); }

int hs_compress_roundtrip_flat(hs_compress_ctx *x, float *g, int64_t n, float *padded, hs_diag *d) {
  memcpy(padded, g, (size_t)n * sizeof *g);
  memset(padded + n, 0, (size_t)(x->n - n) * sizeof *padded);
  int rc = hs_compress_roundtrip(x, padded, d);
  if (!rc) memcpy(g, padded, (size_t)n * sizeof *g);
  return rc;
}
int hs_compress_slot_send(hs_compress_slot *s, const hs_compressor *c, double param, float *g, int64_t n,
                          float *padded, uint64_t seed, uint64_t stream, hs_diag *d) {
  if (s->cx && (s->c != c || s->param != param)) hs_compress_slot_close(s);
  if (!s->cx) {
    hs_block b = hs_compress_flat_block((double)n);
    int rc = hs_compress_open(&s->cx, c, param, &b, 1, seed, stream, d);
    if (rc) return rc;
    s->c = c;
    s->param = param;
  }
  return hs_compress_roundtrip_flat(s->cx, g, n, padded, d);
}

void hs_compress_slot_close(hs_compress_slot *s) {
  hs_compress_close(s->cx);
  *s = (hs_compress_slot){0};
}

const float *hs_compress_residual(const hs_compress_ctx *x) { return x->residual; }
int64_t hs_compress_size(const hs_compress_ctx *x) { return x->n; }

/* --- the tables and the registry ------------------------------------------------------------ */

const hs_compressor hs_compressor_topk = {
    .version = HS_COMPRESSOR_VERSION,
    .name = "topk",
    .description = "top-k sparsification with error feedback: send the k = density*n largest entries as (index, value)",
    .source = "Stich, Cordonnier, Jaggi: Sparsified SGD with memory (NeurIPS 2018)",
    .param_name = "density",
    .param_min = 1e-6,
    .param_max = 1.0,
    .param_integer = 0,
    .bytes = topk_bytes,
    .seconds = topk_seconds,
    .roundtrip = topk_roundtrip,
};

const hs_compressor hs_compressor_qsgd = {
    .version = HS_COMPRESSOR_VERSION,
    .name = "qsgd",
    .description = "QSGD: stochastic rounding to s levels of each bucket's norm, unbiased",
    .source = "Alistarh, Grubic, Li, Tomioka, Vojnovic: QSGD (NeurIPS 2017)",
    .param_name = "levels",
    .param_min = 1,
    .param_max = 32767,
    .param_integer = 1,
    .bytes = qsgd_bytes,
    .seconds = qsgd_seconds,
    .roundtrip = qsgd_roundtrip,
};

const hs_compressor hs_compressor_powersgd = {
    .version = HS_COMPRESSOR_VERSION,
    .name = "powersgd",
    .description = "PowerSGD: rank-r approximation of each layer's gradient matrix by one warm-started power iteration, error feedback",
    .source = "Vogels, Karimireddy, Jaggi: PowerSGD (NeurIPS 2019); code epfml/powersgd",
    .param_name = "rank",
    .param_min = 1,
    .param_max = 1024,
    .param_integer = 1,
    .bytes = psgd_bytes,
    .seconds = psgd_seconds,
    .roundtrip = psgd_roundtrip,
};

static const hs_compressor *const compressors[] = {
    &hs_compressor_topk, &hs_compressor_qsgd, &hs_compressor_powersgd, NULL,
};

const hs_compressor *const *hs_compressor_list(void) { return compressors; }

const hs_compressor *hs_compressor_find(const char *name) {
  for (int i = 0; compressors[i]; i++)
    if (!strcmp(compressors[i]->name, name)) return compressors[i];
  return NULL;
}

void hs_compressor_names(char *buf, size_t len) {
  size_t used = 0;
  if (len) buf[0] = '\0';
  for (int i = 0; compressors[i]; i++) {
    int k = snprintf(buf + used, len - used, "%s%s", i ? ", " : "", compressors[i]->name);
    if (k < 0 || (size_t)k >= len - used) break;
    used += (size_t)k;
  }
}
