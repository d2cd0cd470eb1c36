/* nn_data: training data for the nn module: IDX files (Fashion-MNIST), synthetic data
 * (CIFAR-shaped, and a stand-in of Fashion-MNIST's shape), and deterministic per-worker shards
 * with a batch iterator.
 *
 *   hs_dataset *ds;
 *   hs_data_fashion_mnist(&ds, NULL, "train", d);            60000 x 1x28x28, 10 classes
 *   hs_shards *sh;
 *   hs_shards_open(&sh, hs_data_count(ds), workers, shares, seed, d);
 *   hs_data_iter it;
 *   hs_data_iter_init(&it, ds, sh, worker, 0, d);
 *   hs_data_iter_next(&it, batch, x, y, &wraps, d);          x: batch x C x H x W fp32
 *   hs_net_load(net, x, y, batch, d);
 *   ...
 *   hs_shards_close(sh); hs_data_close(ds);
 *
 * Storage: a dataset keeps its pixels as bytes (0..255, as the files and CIFAR store them) and
 * converts to fp32 only when a batch is copied out: x = (p / 255 - mean) / std. That keeps the
 * Fashion-MNIST training set at 47 MB instead of 188 MB as floats.
 *
 * Fashion-MNIST: pixels scaled to [0,1], then normalised with mean 0.2860 and std 0.3530 (the
 * training set's pixel mean and standard deviation, as torchvision examples use), for both
 * splits. See docs/data.md.
 *
 * Shards: for epoch e, a pseudo-random permutation pi_e of [0, n) (a keyed Feistel network,
 * pure function of (seed, e)) is cut into consecutive slices, one per worker, of sizes
 * proportional to the shares (largest-remainder rounding). Worker w's shard in epoch e is
 * {pi_e(j) : start_w <= j < start_w + count_w}. Any worker computes its own shard in O(its
 * size) without touching shared state, and the slices of one epoch are disjoint and cover all
 * samples whatever the shares.
 *
 * Contract:
 * - Every call returns 0 or a negative HS_E* code with the diag filled; nothing exits, nothing
 *   is global. Whoever opens closes: hs_data_close, hs_shards_close (NULL is fine).
 * - A dataset is immutable after open: any number of threads may read it and copy batches.
 * - A shards object is read by iterators; hs_shards_set_shares changes it, and must not run
 *   while another thread is inside hs_data_iter_next on it (change shares at a barrier).
 * - An iterator belongs to one worker and is used by one thread at a time; it holds no memory
 *   of its own (a plain struct, nothing to free) but refers to its dataset and shards, which
 *   must outlive it.
 * Units: samples, bytes. */
#ifndef HS_NN_DATA_H
#define HS_NN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_error.h"

/* --- IDX files ---------------------------------------------------------------------------- */

/* The two IDX kinds hetsim reads (unsigned bytes): 3-d images and 1-d labels. */
#define HS_IDX_IMAGES 0x00000803u
#define HS_IDX_LABELS 0x00000801u

/* Guards against a header that declares more than any data set hetsim uses, checked before
 * anything is allocated: at most 2^28 items, 4096 x 4096 pixels, 2 GiB of payload. */
#define HS_IDX_MAX_ITEMS (INT64_C(1) << 28)
#define HS_IDX_MAX_SIDE 4096
#define HS_IDX_MAX_BYTES (INT64_C(1) << 31)

typedef struct hs_idx {
  uint32_t magic;  /* HS_IDX_IMAGES or HS_IDX_LABELS */
  int64_t count;   /* items the header declares */
  int rows, cols;  /* pixels per image; 1 x 1 for labels */
  int64_t loaded;  /* items in data: count, or fewer when a limit was asked for */
  uint8_t *data;   /* loaded * rows * cols bytes, owned; free with hs_idx_free */
} hs_idx;

/* Parses an IDX file held in memory. magic says which kind is expected; max_items > 0 keeps
 * only the first max_items items (the rest of the buffer is then not checked); 0 keeps all.
 * name prefixes messages ("path: truncated: ..."). Errors (HS_EINVAL): bad magic, a header
 * declaring more than the HS_IDX_MAX_* guards, a short buffer, bytes after the payload;
 * HS_ENOMEM. On error *out holds nothing to free. */
int hs_idx_parse_mem(hs_idx *out, const void *buf, size_t len, uint32_t magic, int64_t max_items,
                     const char *name, hs_diag *d);

/* Reads an IDX file, gzipped or plain (zlib reads both), with the same checks. Memory grows
 * with the bytes actually read, so a truncated file declaring a huge payload never makes a huge
 * allocation. A missing file is HS_ENOTFOUND, a read error HS_EIO, corrupt gzip data (a bad
 * CRC, an invalid stream) HS_EINVAL; a gzip stream that ends early is reported as truncation. */
int hs_idx_read(hs_idx *out, const char *path, uint32_t magic, int64_t max_items, hs_diag *d);

void hs_idx_free(hs_idx *x); /* frees x->data and zeroes x; NULL is fine */

/* --- data sets ---------------------------------------------------------------------------- */

typedef struct hs_dataset hs_dataset;

/* How IDX images and labels become a data set. */
typedef struct hs_data_idx_options {
  int classes;         /* every label must be < classes */
  int64_t max_samples; /* 0 = all; otherwise the first max_samples */
  double mean, std;    /* x = (p / 255 - mean) / std; std > 0 */
  const char *name;    /* for messages and hs_data_name; NULL = the images path */
} hs_data_idx_options;

/* Opens a data set from an IDX image file and an IDX label file (each gzipped or plain). The
 * two must declare the same number of items and every label must be < o->classes (HS_EINVAL,
 * naming the file and the item). */
int hs_data_idx_open(hs_dataset **out, const char *images_path, const char *labels_path,
                     const hs_data_idx_options *o, hs_diag *d);

/* Fashion-MNIST, split "train" (60000) or "test" (10000), 1x28x28, 10 classes, normalised as
 * said above. dir NULL means $HETSIM_FASHION_MNIST_DIR, or else HS_FASHION_MNIST_DIR (where
 * Debian's dataset-fashion-mnist installs it). In dir, "train-images-idx3-ubyte.gz" and the
 * uncompressed "train-images-idx3-ubyte" are both accepted (the .gz first); likewise t10k-*.
 * Missing files give HS_ENOTFOUND with the command that installs them.
 * dir (or the variable) HS_FASHION_MNIST_SYNTHETIC reads no files: it gives a synthetic stand-in
 * of the same shape and sizes, named "synthetic-fashion-mnist:train" or ":test" (the recipe of
 * hs_data_synthetic_cifar in one 28x28 channel from a fixed seed, normalised as that one; test
 * samples are distinct from training samples), so that a machine without the files (a test run)
 * still trains mlp and cnn. A folder named "synthetic" is then written "./synthetic". */
#define HS_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
#define HS_FASHION_MNIST_SYNTHETIC "synthetic"
#define HS_FASHION_MNIST_MEAN 0.2860
#define HS_FASHION_MNIST_STD 0.3530
int hs_data_fashion_mnist(hs_dataset **out, const char *dir, const char *split, hs_diag *d);
/* The same, keeping only the first max_samples samples (0 = all), for tests and quick runs. */
int hs_data_fashion_mnist_first(hs_dataset **out, const char *dir, const char *split,
                                int64_t max_samples, hs_diag *d);

/* Synthetic CIFAR-shaped data: n samples of 3x32x32, 10 classes, a pure function of (seed, n)
 * (and sample i depends only on (seed, i), so a smaller n gives a prefix of a larger one).
 * Each class has a template (a colour and an oriented stripe pattern drawn from the seed);
 * a sample is its class template plus independent noise per pixel, stored as bytes like
 * CIFAR. Learnable by design; see docs/data.md for the exact recipe. */
#define HS_SYNTH_CIFAR_MEAN 0.5
#define HS_SYNTH_CIFAR_STD 0.25
int hs_data_synthetic_cifar(hs_dataset **out, int64_t n, uint64_t seed, hs_diag *d);

void hs_data_close(hs_dataset *ds); /* NULL is fine */

const char *hs_data_name(const hs_dataset *ds);
int64_t hs_data_count(const hs_dataset *ds);                       /* samples */
void hs_data_shape(const hs_dataset *ds, int *c, int *h, int *w);  /* one sample */
int64_t hs_data_sample_size(const hs_dataset *ds);                 /* c * h * w */
int hs_data_classes(const hs_dataset *ds);
const int32_t *hs_data_labels(const hs_dataset *ds);               /* count labels */
const uint8_t *hs_data_pixels(const hs_dataset *ds);               /* count * sample_size */
void hs_data_norm(const hs_dataset *ds, double *mean, double *std);

/* Copies samples idx[0..count) into x (count x C x H x W fp32, normalised) and y (count int32;
 * y may be NULL). An index outside [0, hs_data_count) is HS_EINVAL. */
int hs_data_gather(const hs_dataset *ds, const int64_t *idx, int count, float *x, int32_t *y,
                   hs_diag *d);

/* --- shards -------------------------------------------------------------------------------- */

typedef struct hs_shards hs_shards;

/* n samples over `workers` workers. shares: one non-negative weight per worker (normalised by
 * their sum, so fractions summing to 1 and batch sizes both work), or NULL for equal shares.
 * A negative, non-finite or all-zero set of shares is HS_EINVAL. */
int hs_shards_open(hs_shards **out, int64_t n, int workers, const double *shares, uint64_t seed,
                   hs_diag *d);
void hs_shards_close(hs_shards *s); /* NULL is fine */

/* New shares, effective at once (the adaptive data allocation policies call this mid-run). */
int hs_shards_set_shares(hs_shards *s, const double *shares, hs_diag *d);

int64_t hs_shards_n(const hs_shards *s);
int hs_shards_workers(const hs_shards *s);
int64_t hs_shards_count(const hs_shards *s, int worker); /* samples in the worker's shard */
/* Writes worker's shard for `epoch` (hs_shards_count indices, in the order the worker visits
 * them) into out. The same (seed, epoch, shares) always gives the same lists. */
int hs_shards_indices(const hs_shards *s, int64_t epoch, int worker, int64_t *out, hs_diag *d);
/* The epoch permutation itself: pi_epoch(j) for j in [0, n). */
int64_t hs_shards_permute(const hs_shards *s, int64_t epoch, int64_t j);

/* A worker's position in its shard. Fields are private to nn_data.c. */
typedef struct hs_data_iter {
  const hs_dataset *ds;
  const hs_shards *sh;
  int worker;
  int64_t epoch;    /* the epoch whose shard is being read */
  int64_t pos;      /* next position in the shard */
  uint64_t version; /* of the shares pos refers to */
  int64_t count;    /* shard size pos refers to */
} hs_data_iter;

/* Starts worker at the beginning of its shard in `epoch`. The shards must be over exactly
 * hs_data_count(ds) samples (HS_EINVAL otherwise). */
int hs_data_iter_init(hs_data_iter *it, const hs_dataset *ds, const hs_shards *sh, int worker,
                      int64_t epoch, hs_diag *d);
/* Copies the next `batch` samples of the worker's shard into x and y (as hs_data_gather).
 * Reaching the end of the shard wraps to the start of the worker's shard for the next epoch
 * (a new permutation); *wraps (may be NULL) gets how many times this batch wrapped, 0 for
 * most batches. When shares changed since the last call, the worker keeps its relative
 * progress: pos becomes floor(pos * new_count / old_count). A worker whose shard is empty gets
 * HS_EINVAL. */
int hs_data_iter_next(hs_data_iter *it, int batch, float *x, int32_t *y, int *wraps, hs_diag *d);

#endif
