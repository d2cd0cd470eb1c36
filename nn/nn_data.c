/* nn_data: IDX parsing, Fashion-MNIST, synthetic data, shards. See nn_data.h.
 *
 * One header check (idx_head_check) serves the in-memory parser (the fuzz target) and the
 * file reader, so that both reject the same inputs with the same messages. */
#include "nn/nn_data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include <gsl/gsl_cdf.h>

#include "core/core_rng.h"

/* --- IDX ---------------------------------------------------------------------------------- */

typedef struct idx_head {
  uint32_t magic;
  int64_t count;
  int rows, cols;
  size_t head_bytes;  /* 8 for labels, 16 for images */
  int64_t item_bytes; /* rows * cols */
} idx_head;

static const char *idx_kind(uint32_t magic) {
  return magic == HS_IDX_IMAGES ? "IDX images" : magic == HS_IDX_LABELS ? "IDX labels" : "IDX";
}

static const char *idx_items(uint32_t magic) { return magic == HS_IDX_IMAGES ? "images" : "labels"; }
static const char *idx_payload(uint32_t magic) { return magic == HS_IDX_IMAGES ? "pixels" : "labels"; }

static uint32_t be32(const uint8_t *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* Checks the first `got` bytes of a file as a header of the expected kind. */
static int idx_head_check(const uint8_t *b, size_t got, uint32_t magic, const char *name,
                          idx_head *h, hs_diag *d) {
  memset(h, 0, sizeof *h);
  h->head_bytes = magic == HS_IDX_IMAGES ? 16 : 8;
  if (got < 4)
    return hs_diag_set(d, HS_EINVAL, "%s: truncated: expected a %zu-byte %s header, got %zu bytes",
                       name, h->head_bytes, idx_kind(magic), got);
  uint32_t m = be32(b);
  if (m != magic) {
    const char *hint = (m == HS_IDX_IMAGES || m == HS_IDX_LABELS)
                           ? " (this is an IDX file of the other kind: images and labels swapped?)"
                           : "";
    return hs_diag_set(d, HS_EINVAL, "%s: bad magic 0x%08x, expected 0x%08x (%s)%s", name, m,
                       magic, idx_kind(magic), hint);
  }
  if (got < h->head_bytes)
    return hs_diag_set(d, HS_EINVAL, "%s: truncated: expected a %zu-byte %s header, got %zu bytes",
                       name, h->head_bytes, idx_kind(magic), got);
  h->magic = m;
  h->count = be32(b + 4);
  h->rows = h->cols = 1;
  if (magic == HS_IDX_IMAGES) {
    uint32_t r = be32(b + 8), c = be32(b + 12);
    if (r < 1 || r > HS_IDX_MAX_SIDE || c < 1 || c > HS_IDX_MAX_SIDE)
      return hs_diag_set(d, HS_EINVAL, "%s: bad image size %ux%u, expected 1 to %d pixels a side",
                         name, r, c, HS_IDX_MAX_SIDE);
    h->rows = (int)r;
    h->cols = (int)c;
  }
  h->item_bytes = (int64_t)h->rows * h->cols;
  /* count < 2^32 and item_bytes <= 2^24, so the product fits in int64 before the test. */
  int64_t total = h->count * h->item_bytes;
  if (h->count > HS_IDX_MAX_ITEMS || total > HS_IDX_MAX_BYTES)
    return hs_diag_set(d, HS_EINVAL,
                       "%s: declared size too large: %lld %s of %d bytes = %lld bytes "
                       "(limits: %lld items, %lld bytes)",
                       name, (long long)h->count, idx_items(magic), (int)h->item_bytes,
                       (long long)total, (long long)HS_IDX_MAX_ITEMS, (long long)HS_IDX_MAX_BYTES);
  return 0;
}

static int64_t idx_keep(const idx_head *h, int64_t max_items) {
  return max_items > 0 && max_items < h->count ? max_items : h->count;
}

static void idx_fill(hs_idx *out, const idx_head *h, int64_t loaded, uint8_t *data) {
  out->magic = h->magic;
  out->count = h->count;
  out->rows = h->rows;
  out->cols = h->cols;
  out->loaded = loaded;
  out->data = data;
}

int hs_idx_parse_mem(hs_idx *out, const void *buf, size_t len, uint32_t magic, int64_t max_items,
                     const char *name, hs_diag *d) {
  memset(out, 0, sizeof *out);
  if (magic != HS_IDX_IMAGES && magic != HS_IDX_LABELS)
    return hs_diag_set(d, HS_EINVAL, "%s: unsupported IDX kind 0x%08x", name, magic);
  const uint8_t *b = buf;
  idx_head h;
  int rc = idx_head_check(b, len, magic, name, &h, d);
  if (rc) return rc;
  int64_t keep = idx_keep(&h, max_items);
  size_t need = (size_t)(keep * h.item_bytes), have = len - h.head_bytes;
  if (have < need)
    return hs_diag_set(d, HS_EINVAL, "%s: truncated: expected %zu bytes of %s, got %zu", name,
                       need, idx_payload(magic), have);
  if (keep == h.count && have > need)
    return hs_diag_set(d, HS_EINVAL, "%s: %zu unexpected bytes after the %lld declared %s", name,
                       have - need, (long long)h.count, idx_items(magic));
  uint8_t *data = malloc(need ? need : 1);
  if (!data) return hs_diag_set(d, HS_ENOMEM, "%s: out of memory for %zu bytes", name, need);
  if (need) memcpy(data, b + h.head_bytes, need);
  idx_fill(out, &h, keep, data);
  return 0;
}

/* Reads up to len bytes; returns the count read (short at the end of the data, including a
 * gzip stream that ends early) or a negative HS_E* code for a read or decompression error. */
static int64_t gz_read_full(gzFile f, uint8_t *buf, int64_t len, const char *path, hs_diag *d) {
  int64_t got = 0;
  while (got < len) {
    int64_t chunk = len - got < (INT64_C(1) << 30) ? len - got : (INT64_C(1) << 30);
    int r = gzread(f, buf + got, (unsigned)chunk);
    if (r < 0 || r == 0) {
      int err = Z_OK;
      const char *msg = gzerror(f, &err);
      /* Z_BUF_ERROR: the compressed stream ends early, which is truncation, reported by the
       * caller with the byte counts. */
      if (err == Z_ERRNO)
        return hs_diag_set(d, HS_EIO, "%s: read error: %s", path, strerror(errno));
      if (err != Z_OK && err != Z_BUF_ERROR)
        return hs_diag_set(d, HS_EINVAL, "%s: gzip: %s", path, msg ? msg : "corrupt data");
      break;
    }
    got += r;
  }
  return got;
}

int hs_idx_read(hs_idx *out, const char *path, uint32_t magic, int64_t max_items, hs_diag *d) {
  memset(out, 0, sizeof *out);
  if (magic != HS_IDX_IMAGES && magic != HS_IDX_LABELS)
    return hs_diag_set(d, HS_EINVAL, "%s: unsupported IDX kind 0x%08x", path, magic);
  errno = 0;
  gzFile f = gzopen(path, "rb");
  if (!f) {
    if (errno == ENOENT) return hs_diag_set(d, HS_ENOTFOUND, "%s: no such file", path);
    if (errno == 0) return hs_diag_set(d, HS_ENOMEM, "%s: out of memory opening it", path);
    return hs_diag_set(d, HS_EIO, "%s: cannot open: %s", path, strerror(errno));
  }
  gzbuffer(f, 1u << 17);
  uint8_t head[16];
  size_t head_len = magic == HS_IDX_IMAGES ? 16 : 8;
  uint8_t *data = NULL;
  int rc = 0;
  int64_t got = gz_read_full(f, head, (int64_t)head_len, path, d);
  idx_head h;
  if (got < 0) {
    rc = (int)got;
    goto done;
  }
  if ((rc = idx_head_check(head, (size_t)got, magic, path, &h, d))) goto done;

  /* The buffer grows with what is actually read: a header may promise a payload the file does
   * not have, and only HS_IDX_MAX_BYTES bounds what it promises. */
  int64_t keep = idx_keep(&h, max_items), need = keep * h.item_bytes;
  int64_t cap = need < (INT64_C(1) << 20) ? need : (INT64_C(1) << 20);
  data = malloc((size_t)(cap ? cap : 1));
  if (!data) {
    rc = hs_diag_set(d, HS_ENOMEM, "%s: out of memory for %lld bytes", path, (long long)cap);
    goto done;
  }
  int64_t have = 0;
  for (;;) {
    int64_t r = gz_read_full(f, data + have, cap - have, path, d);
    if (r < 0) {
      rc = (int)r;
      goto done;
    }
    have += r;
    if (have < cap || cap == need) break;
    int64_t ncap = cap * 2 < need ? cap * 2 : need;
    uint8_t *nd = realloc(data, (size_t)ncap);
    if (!nd) {
      rc = hs_diag_set(d, HS_ENOMEM, "%s: out of memory for %lld bytes", path, (long long)ncap);
      goto done;
    }
    data = nd;
    cap = ncap;
  }
  if (have < need) {
    rc = hs_diag_set(d, HS_EINVAL, "%s: truncated: expected %lld bytes of %s, got %lld", path,
                     (long long)need, idx_payload(magic), (long long)have);
    goto done;
  }
  if (keep == h.count) {
    uint8_t extra[4096];
    int64_t more = gz_read_full(f, extra, (int64_t)sizeof extra, path, d);
    if (more < 0) {
      rc = (int)more;
      goto done;
    }
    if (more > 0) {
      rc = hs_diag_set(d, HS_EINVAL, "%s: %s%lld unexpected bytes after the %lld declared %s",
                       path, more == (int64_t)sizeof extra ? "at least " : "", (long long)more,
                       (long long)h.count, idx_items(magic));
      goto done;
    }
  }
  idx_fill(out, &h, keep, data);
  data = NULL;
done:
  free(data);
  gzclose(f);
  return rc;
}

void hs_idx_free(hs_idx *x) {
  if (!x) return;
  free(x->data);
  memset(x, 0, sizeof *x);
}

/* --- data sets ---------------------------------------------------------------------------- */

struct hs_dataset {
  char name[256];
  int64_t n;
  int c, h, w;
  int classes;
  uint8_t *pixels; /* n * c * h * w */
  int32_t *labels; /* n */
  double mean, std;
  float lut[256]; /* (p / 255 - mean) / std for every byte value */
};

static int data_alloc(hs_dataset **out, const char *name, int64_t n, int c, int h, int w,
                      int classes, double mean, double stdev, hs_diag *d) {
  *out = NULL;
  if (!(stdev > 0.0) || !isfinite(mean) || !isfinite(stdev))
    return hs_diag_set(d, HS_EINVAL, "%s: normalisation needs a finite mean and a std > 0, got "
                       "mean %g std %g", name, mean, stdev);
  hs_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) return hs_diag_set(d, HS_ENOMEM, "%s: out of memory", name);
  snprintf(ds->name, sizeof ds->name, "%s", name);
  ds->n = n;
  ds->c = c;
  ds->h = h;
  ds->w = w;
  ds->classes = classes;
  ds->mean = mean;
  ds->std = stdev;
  for (int p = 0; p < 256; p++) ds->lut[p] = (float)((p / 255.0 - mean) / stdev);
  size_t px = (size_t)n * (size_t)c * (size_t)h * (size_t)w;
  ds->pixels = malloc(px ? px : 1);
  ds->labels = malloc((size_t)(n ? n : 1) * sizeof *ds->labels);
  if (!ds->pixels || !ds->labels) {
    hs_data_close(ds);
    return hs_diag_set(d, HS_ENOMEM, "%s: out of memory for %zu bytes of pixels", name, px);
  }
  *out = ds;
  return 0;
}

void hs_data_close(hs_dataset *ds) {
  if (!ds) return;
  free(ds->pixels);
  free(ds->labels);
  free(ds);
}

int hs_data_idx_open(hs_dataset **out, const char *images_path, const char *labels_path,
                     const hs_data_idx_options *o, hs_diag *d) {
  *out = NULL;
  if (o->classes < 1 || o->classes > 65536)
    return hs_diag_set(d, HS_EINVAL, "%s: classes must be 1 to 65536, got %d", images_path,
                       o->classes);
  hs_idx im, lb;
  int rc = hs_idx_read(&im, images_path, HS_IDX_IMAGES, o->max_samples, d);
  if (rc) return rc;
  rc = hs_idx_read(&lb, labels_path, HS_IDX_LABELS, o->max_samples, d);
  if (rc) {
    hs_idx_free(&im);
    return rc;
  }
  if (im.count != lb.count) {
    rc = hs_diag_set(d, HS_EINVAL, "%s: %lld labels for the %lld images of %s", labels_path,
                     (long long)lb.count, (long long)im.count, images_path);
    goto done;
  }
  if (im.loaded < 1) {
    rc = hs_diag_set(d, HS_EINVAL, "%s: no samples", images_path);
    goto done;
  }
  for (int64_t i = 0; i < lb.loaded; i++) {
    if (lb.data[i] >= o->classes) {
      rc = hs_diag_set(d, HS_EINVAL, "%s: label %d of item %lld is out of range, expected < %d",
                       labels_path, lb.data[i], (long long)i, o->classes);
      goto done;
    }
  }
  hs_dataset *ds;
  rc = data_alloc(&ds, o->name ? o->name : images_path, im.loaded, 1, im.rows, im.cols,
                  o->classes, o->mean, o->std, d);
  if (rc) goto done;
  /* The pixel buffer is exactly the IDX payload: hand it over instead of copying 47 MB. */
  free(ds->pixels);
  ds->pixels = im.data;
  im.data = NULL;
  for (int64_t i = 0; i < lb.loaded; i++) ds->labels[i] = lb.data[i];
  *out = ds;
done:
  hs_idx_free(&im);
  hs_idx_free(&lb);
  return rc;
}

/* dir/base.gz if readable, else dir/base if readable; 0 when found. */
static int find_idx(char *path, size_t size, const char *dir, const char *base) {
  snprintf(path, size, "%s/%s.gz", dir, base);
  if (access(path, R_OK) == 0) return 0;
  snprintf(path, size, "%s/%s", dir, base);
  return access(path, R_OK) == 0 ? 0 : -1;
}

static int synth_fashion_mnist(hs_dataset **out, int train, int64_t max_samples, hs_diag *d);

int hs_data_fashion_mnist_first(hs_dataset **out, const char *dir, const char *split,
                                int64_t max_samples, hs_diag *d) {
  *out = NULL;
  const char *prefix;
  if (split && strcmp(split, "train") == 0)
    prefix = "train";
  else if (split && (strcmp(split, "test") == 0 || strcmp(split, "t10k") == 0))
    prefix = "t10k";
  else
    return hs_diag_set(d, HS_EINVAL, "fashion-mnist: unknown split \"%s\", expected train or test",
                       split ? split : "(null)");
  if (max_samples < 0)
    return hs_diag_set(d, HS_EINVAL, "fashion-mnist: max_samples must be >= 0, got %lld",
                       (long long)max_samples);
  if (!dir) dir = getenv("HETSIM_FASHION_MNIST_DIR");
  if (!dir || !*dir) dir = HS_FASHION_MNIST_DIR;
  if (strcmp(dir, HS_FASHION_MNIST_SYNTHETIC) == 0)
    return synth_fashion_mnist(out, strcmp(prefix, "train") == 0, max_samples, d);
  char img[4096], lbl[4096], base[64];
  snprintf(base, sizeof base, "%s-images-idx3-ubyte", prefix);
  int miss = find_idx(img, sizeof img, dir, base);
  if (!miss) {
    snprintf(base, sizeof base, "%s-labels-idx1-ubyte", prefix);
    miss = find_idx(lbl, sizeof lbl, dir, base);
  }
  if (miss)
    return hs_diag_set(d, HS_ENOTFOUND,
                       "fashion-mnist: %s/%s.gz (or without .gz) not found; install the data set "
                       "with `apt-get install dataset-fashion-mnist`, or set "
                       "HETSIM_FASHION_MNIST_DIR to a folder holding it",
                       dir, base);
  char name[64];
  snprintf(name, sizeof name, "fashion-mnist:%s", strcmp(prefix, "train") == 0 ? "train" : "test");
  hs_data_idx_options o = {.classes = 10,
                           .max_samples = max_samples,
                           .mean = HS_FASHION_MNIST_MEAN,
                           .std = HS_FASHION_MNIST_STD,
                           .name = name};
  hs_dataset *ds;
  int rc = hs_data_idx_open(&ds, img, lbl, &o, d);
  if (rc) return rc;
  if (ds->h != 28 || ds->w != 28) {
    rc = hs_diag_set(d, HS_EINVAL, "%s: expected 28x28 Fashion-MNIST images, got %dx%d", img,
                     ds->h, ds->w);
    hs_data_close(ds);
    return rc;
  }
  *out = ds;
  return 0;
}

int hs_data_fashion_mnist(hs_dataset **out, const char *dir, const char *split, hs_diag *d) {
  return hs_data_fashion_mnist_first(out, dir, split, 0, d);
}

/* --- synthetic CIFAR-shaped data ---------------------------------------------------------- */

/* splitmix64 (Steele, Lea, Flood 2014): one 64-bit output per call from a 64-bit state. Fast
 * enough to draw a number per pixel; the state of sample i is seeded through hs_rng_mix. */
static uint64_t sm64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

static double sm64_unit(uint64_t *x) { return (double)(sm64(x) >> 11) * 0x1.0p-53; }

/* Stream tags, so that templates, samples and shards of one seed never share a stream. */
#define TAG_SYNTH_TEMPLATE 0x73796e7468746d70ULL /* "synthtmp" */
#define TAG_SYNTH_SAMPLE 0x73796e746873616dULL   /* "synthsam" */
#define TAG_SHARDS 0x7368617264736565ULL         /* "shardsee" */

#define SYN_CLASSES 10
#define SYN_TEMPLATE_AMP 48.0 /* pixel levels */
#define SYN_NOISE_STD 40.0    /* pixel levels */

/* The recipe of docs/data.md for n samples of chans x hw x hw, samples first .. first+n-1 of
 * seed's stream (sample i depends only on (seed, i)), named name. */
static int synth_generate(hs_dataset **out, const char *name, int64_t first, int64_t n, int chans,
                          int hw, uint64_t seed, hs_diag *d) {
  *out = NULL;
  const int64_t per = (int64_t)chans * hw * hw;
  if (n < 1 || n > HS_IDX_MAX_BYTES / per)
    return hs_diag_set(d, HS_EINVAL, "%s: samples must be 1 to %lld, got %lld", name,
                       (long long)(HS_IDX_MAX_BYTES / per), (long long)n);
  /* Class templates in [-1, 1]: half a colour per channel, half an oriented sine grating with
   * its own frequency, angle and phase (shifted per channel), all drawn from the seed. */
  float *tmpl = malloc((size_t)(SYN_CLASSES * per) * sizeof *tmpl);
  if (!tmpl) return hs_diag_set(d, HS_ENOMEM, "%s: out of memory", name);
  const double two_pi = 6.283185307179586;
  for (int k = 0; k < SYN_CLASSES; k++) {
    uint64_t st = hs_rng_mix(hs_rng_mix(seed, TAG_SYNTH_TEMPLATE), (uint64_t)k);
    double colour[3];
    for (int c = 0; c < chans; c++) colour[c] = 2.0 * sm64_unit(&st) - 1.0;
    double freq = 1.0 + 3.0 * sm64_unit(&st); /* cycles per image */
    double angle = 0.5 * two_pi * sm64_unit(&st), phase = two_pi * sm64_unit(&st);
    double fx = freq * cos(angle) / hw, fy = freq * sin(angle) / hw;
    for (int c = 0; c < chans; c++)
      for (int y = 0; y < hw; y++)
        for (int x = 0; x < hw; x++)
          tmpl[(k * chans + c) * hw * hw + y * hw + x] =
              (float)(0.5 * colour[c] +
                      0.5 * sin(two_pi * (fx * x + fy * y) + phase + two_pi * c / chans));
  }
  hs_dataset *ds;
  int rc = data_alloc(&ds, name, n, chans, hw, hw, SYN_CLASSES, HS_SYNTH_CIFAR_MEAN,
                      HS_SYNTH_CIFAR_STD, d);
  if (rc) {
    free(tmpl);
    return rc;
  }
  /* Noise: a 12-bit uniform index into a table of 4096 standard normal quantiles (inverse CDF
   * at the bin centres), five pixels per 64-bit draw. Generation is the set-up cost of a
   * synthetic timing run, so the pixel loop does no libm calls; the templates become pixel
   * levels (128 + 48 t) once, and the rounding is a truncation of v + 0.5 >= 0. */
  float noise[4096];
  for (int q = 0; q < 4096; q++)
    noise[q] = (float)(SYN_NOISE_STD * gsl_cdf_ugaussian_Pinv((q + 0.5) / 4096.0));
  for (int64_t j = 0; j < SYN_CLASSES * per; j++)
    tmpl[j] = (float)(128.0 + SYN_TEMPLATE_AMP * tmpl[j]);
  uint64_t sample_base = hs_rng_mix(seed, TAG_SYNTH_SAMPLE);
  for (int64_t i = 0; i < n; i++) {
    uint64_t st = hs_rng_mix(sample_base, (uint64_t)(first + i));
    int k = (int)((sm64(&st) >> 32) % SYN_CLASSES);
    ds->labels[i] = k;
    const float *t = tmpl + (size_t)k * (size_t)per;
    uint8_t *p = ds->pixels + (size_t)i * (size_t)per;
    for (int64_t j = 0; j < per;) {
      uint64_t r = sm64(&st);
      for (int q = 0; q < 5 && j < per; q++, j++, r >>= 12) {
        float v = t[j] + noise[r & 4095];
        v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
        p[j] = (uint8_t)(v + 0.5f);
      }
    }
  }
  free(tmpl);
  *out = ds;
  return 0;
}

int hs_data_synthetic_cifar(hs_dataset **out, int64_t n, uint64_t seed, hs_diag *d) {
  return synth_generate(out, "synthetic-cifar", 0, n, 3, 32, seed, d);
}

/* The stand-in for Fashion-MNIST (HS_FASHION_MNIST_SYNTHETIC): the same recipe in one channel
 * of 28 x 28 from a fixed seed; the training split is samples 0 .. 59999 of its stream, the
 * test split samples 60000 .. 69999, so the two never share a sample. */
#define SYN_FMNIST_SEED 0x666d6e6973747379ULL /* "fmnistsy" */
#define SYN_FMNIST_TRAIN 60000
#define SYN_FMNIST_TEST 10000

static int synth_fashion_mnist(hs_dataset **out, int train, int64_t max_samples, hs_diag *d) {
  int64_t n = train ? SYN_FMNIST_TRAIN : SYN_FMNIST_TEST;
  if (max_samples > 0 && max_samples < n) n = max_samples;
  return synth_generate(out, train ? "synthetic-fashion-mnist:train" : "synthetic-fashion-mnist:test",
                        train ? 0 : SYN_FMNIST_TRAIN, n, 1, 28, SYN_FMNIST_SEED, d);
}

/* --- accessors and batch copies ----------------------------------------------------------- */

const char *hs_data_name(const hs_dataset *ds) { return ds->name; }
int64_t hs_data_count(const hs_dataset *ds) { return ds->n; }
void hs_data_shape(const hs_dataset *ds, int *c, int *h, int *w) {
  if (c) *c = ds->c;
  if (h) *h = ds->h;
  if (w) *w = ds->w;
}
int64_t hs_data_sample_size(const hs_dataset *ds) { return (int64_t)ds->c * ds->h * ds->w; }
int hs_data_classes(const hs_dataset *ds) { return ds->classes; }
const int32_t *hs_data_labels(const hs_dataset *ds) { return ds->labels; }
const uint8_t *hs_data_pixels(const hs_dataset *ds) { return ds->pixels; }
void hs_data_norm(const hs_dataset *ds, double *mean, double *stdev) {
  if (mean) *mean = ds->mean;
  if (stdev) *stdev = ds->std;
}

static void copy_sample(const hs_dataset *ds, int64_t i, float *x) {
  int64_t per = hs_data_sample_size(ds);
  const uint8_t *p = ds->pixels + (size_t)i * (size_t)per;
  for (int64_t j = 0; j < per; j++) x[j] = ds->lut[p[j]];
}

int hs_data_gather(const hs_dataset *ds, const int64_t *idx, int count, float *x, int32_t *y,
                   hs_diag *d) {
  if (count < 0) return hs_diag_set(d, HS_EINVAL, "%s: negative sample count %d", ds->name, count);
  int64_t per = hs_data_sample_size(ds);
  for (int b = 0; b < count; b++) {
    if (idx[b] < 0 || idx[b] >= ds->n)
      return hs_diag_set(d, HS_EINVAL, "%s: sample index %lld out of range [0, %lld)", ds->name,
                         (long long)idx[b], (long long)ds->n);
    copy_sample(ds, idx[b], x + (size_t)b * (size_t)per);
    if (y) y[b] = ds->labels[idx[b]];
  }
  return 0;
}

/* --- shards ------------------------------------------------------------------------------- */

#define FEISTEL_ROUNDS 6

struct hs_shards {
  int64_t n;
  int workers;
  uint64_t key;     /* mixes the seed; each epoch derives its round keys from it */
  int half_bits;    /* the Feistel network permutes [0, 4^half_bits) */
  uint64_t half_mask;
  uint64_t version; /* bumped by every hs_shards_set_shares */
  int64_t *start;   /* workers + 1 offsets into the permutation */
};

typedef struct rem_entry {
  double rem;
  int worker;
} rem_entry;

/* Larger remainder first, then lower worker index, so that ties are deterministic. */
static int rem_cmp(const void *a, const void *b) {
  const rem_entry *x = a, *y = b;
  if (x->rem != y->rem) return x->rem > y->rem ? -1 : 1;
  return (x->worker > y->worker) - (x->worker < y->worker);
}

/* Fills s->start from shares by largest-remainder (Hamilton) rounding of n * share / sum. */
static int shards_split(hs_shards *s, const double *shares, hs_diag *d) {
  int W = s->workers;
  double sum = 0.0;
  if (shares) {
    for (int w = 0; w < W; w++) {
      if (!(shares[w] >= 0.0) || !isfinite(shares[w]))
        return hs_diag_set(d, HS_EINVAL, "shards: share of worker %d must be finite and >= 0, "
                           "got %g", w, shares[w]);
      sum += shares[w];
    }
    if (!(sum > 0.0) || !isfinite(sum))
      return hs_diag_set(d, HS_EINVAL, "shards: shares must have a positive finite sum, got %g",
                         sum);
  }
  int64_t *cnt = malloc((size_t)W * sizeof *cnt);
  rem_entry *rem = malloc((size_t)W * sizeof *rem);
  if (!cnt || !rem) {
    free(cnt);
    free(rem);
    return hs_diag_set(d, HS_ENOMEM, "shards: out of memory for %d workers", W);
  }
  int64_t assigned = 0;
  for (int w = 0; w < W; w++) {
    double q = shares ? (double)s->n * (shares[w] / sum) : (double)s->n / W;
    double fl = floor(q);
    cnt[w] = (int64_t)fl;
    rem[w].rem = q - fl;
    rem[w].worker = w;
    assigned += cnt[w];
  }
  qsort(rem, (size_t)W, sizeof *rem, rem_cmp);
  /* Rounding in q can leave the floors one or two off n in either direction; the remainders
   * decide who gains (largest first) or loses (smallest first, among non-empty shards). */
  for (int i = 0; assigned < s->n; i = (i + 1) % W) {
    if (!shares || shares[rem[i].worker] > 0.0) {
      cnt[rem[i].worker]++;
      assigned++;
    }
  }
  for (int i = W - 1; assigned > s->n; i = (i + W - 1) % W) {
    if (cnt[rem[i].worker] > 0) {
      cnt[rem[i].worker]--;
      assigned--;
    }
  }
  s->start[0] = 0;
  for (int w = 0; w < W; w++) s->start[w + 1] = s->start[w] + cnt[w];
  free(cnt);
  free(rem);
  s->version++;
  return 0;
}

int hs_shards_open(hs_shards **out, int64_t n, int workers, const double *shares, uint64_t seed,
                   hs_diag *d) {
  *out = NULL;
  if (n < 1 || n > (INT64_C(1) << 40))
    return hs_diag_set(d, HS_EINVAL, "shards: samples must be 1 to 2^40, got %lld", (long long)n);
  if (workers < 1)
    return hs_diag_set(d, HS_EINVAL, "shards: workers must be >= 1, got %d", workers);
  hs_shards *s = calloc(1, sizeof *s);
  if (!s) return hs_diag_set(d, HS_ENOMEM, "shards: out of memory");
  s->start = malloc((size_t)(workers + 1) * sizeof *s->start);
  if (!s->start) {
    free(s);
    return hs_diag_set(d, HS_ENOMEM, "shards: out of memory for %d workers", workers);
  }
  s->n = n;
  s->workers = workers;
  s->key = hs_rng_mix(seed, TAG_SHARDS);
  s->half_bits = 1;
  while ((INT64_C(1) << (2 * s->half_bits)) < n) s->half_bits++;
  s->half_mask = (UINT64_C(1) << s->half_bits) - 1;
  int rc = shards_split(s, shares, d);
  if (rc) {
    hs_shards_close(s);
    return rc;
  }
  *out = s;
  return 0;
}

void hs_shards_close(hs_shards *s) {
  if (!s) return;
  free(s->start);
  free(s);
}

int hs_shards_set_shares(hs_shards *s, const double *shares, hs_diag *d) {
  return shards_split(s, shares, d);
}

int64_t hs_shards_n(const hs_shards *s) { return s->n; }
int hs_shards_workers(const hs_shards *s) { return s->workers; }
int64_t hs_shards_count(const hs_shards *s, int worker) {
  if (worker < 0 || worker >= s->workers) return 0;
  return s->start[worker + 1] - s->start[worker];
}

/* A balanced Feistel network on 2 * half_bits bits is a bijection of [0, 4^half_bits) for any
 * round function; cycle walking (re-applying it until the value falls below n) restricts it to
 * a bijection of [0, n). 4^half_bits < 4n, so a walk takes fewer than 4 steps on average. */
int64_t hs_shards_permute(const hs_shards *s, int64_t epoch, int64_t j) {
  uint64_t ekey = hs_rng_mix(s->key, (uint64_t)epoch);
  uint64_t x = (uint64_t)j;
  int hb = s->half_bits;
  uint64_t m = s->half_mask;
  do {
    uint64_t l = x >> hb, r = x & m;
    for (int k = 0; k < FEISTEL_ROUNDS; k++) {
      uint64_t st = ekey + (uint64_t)k * 0xD1B54A32D192ED03ULL + r;
      uint64_t f = sm64(&st) & m;
      uint64_t t = r;
      r = l ^ f;
      l = t;
    }
    x = l << hb | r;
  } while (x >= (uint64_t)s->n);
  return (int64_t)x;
}

int hs_shards_indices(const hs_shards *s, int64_t epoch, int worker, int64_t *out, hs_diag *d) {
  if (worker < 0 || worker >= s->workers)
    return hs_diag_set(d, HS_EINVAL, "shards: worker %d out of range [0, %d)", worker, s->workers);
  if (epoch < 0) return hs_diag_set(d, HS_EINVAL, "shards: epoch must be >= 0, got %lld",
                                    (long long)epoch);
  for (int64_t j = s->start[worker]; j < s->start[worker + 1]; j++)
    *out++ = hs_shards_permute(s, epoch, j);
  return 0;
}

/* --- per-worker batch iterator ------------------------------------------------------------ */

int hs_data_iter_init(hs_data_iter *it, const hs_dataset *ds, const hs_shards *sh, int worker,
                      int64_t epoch, hs_diag *d) {
  memset(it, 0, sizeof *it);
  if (sh->n != ds->n)
    return hs_diag_set(d, HS_EINVAL, "%s: shards cover %lld samples, the data set has %lld",
                       ds->name, (long long)sh->n, (long long)ds->n);
  if (worker < 0 || worker >= sh->workers)
    return hs_diag_set(d, HS_EINVAL, "shards: worker %d out of range [0, %d)", worker,
                       sh->workers);
  if (epoch < 0) return hs_diag_set(d, HS_EINVAL, "shards: epoch must be >= 0, got %lld",
                                    (long long)epoch);
  it->ds = ds;
  it->sh = sh;
  it->worker = worker;
  it->epoch = epoch;
  it->pos = 0;
  it->version = sh->version;
  it->count = hs_shards_count(sh, worker);
  return 0;
}

int hs_data_iter_next(hs_data_iter *it, int batch, float *x, int32_t *y, int *wraps, hs_diag *d) {
  const hs_shards *sh = it->sh;
  if (wraps) *wraps = 0;
  if (batch < 0) return hs_diag_set(d, HS_EINVAL, "data iterator: negative batch %d", batch);
  if (it->version != sh->version) {
    int64_t now = hs_shards_count(sh, it->worker);
    /* Keep the worker's relative progress through its epoch. pos < count <= 2^40, so the
     * double product is exact enough for the floor. */
    it->pos = it->count > 0 ? (int64_t)floor((double)it->pos * (double)now / (double)it->count) : 0;
    if (it->pos > now) it->pos = now;
    it->count = now;
    it->version = sh->version;
  }
  if (it->count == 0 && batch > 0)
    return hs_diag_set(d, HS_EINVAL, "data iterator: worker %d has an empty shard (share 0)",
                       it->worker);
  int64_t per = hs_data_sample_size(it->ds), first = sh->start[it->worker];
  for (int b = 0; b < batch; b++) {
    if (it->pos >= it->count) {
      it->pos = 0;
      it->epoch++;
      if (wraps) (*wraps)++;
    }
    int64_t i = hs_shards_permute(sh, it->epoch, first + it->pos);
    it->pos++;
    copy_sample(it->ds, i, x + (size_t)b * (size_t)per);
    if (y) y[b] = it->ds->labels[i];
  }
  return 0;
}
