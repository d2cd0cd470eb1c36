/* Tests for nn_data: the IDX reader on committed fixtures (written by
 * tests/data/make_idx_fixtures.py, independently of hetsim) and on bad files written here,
 * Fashion-MNIST when it is installed and its synthetic stand-in, synthetic CIFAR-shaped data,
 * shards and the batch iterator. */
#include <stdint.h>
#include <sys/stat.h>

#include <zlib.h>

#include "nn/nn_data.h"
#include "tests/hs_test.h"

/* --- helpers --------------------------------------------------------------------------------*/

static const char *fixture(const char *name) {
  static char buf[4][1024];
  static int next;
  char *b = buf[next++ % 4];
  const char *src = getenv("HETSIM_SOURCE_DIR");
  snprintf(b, 1024, "%s/tests/data/%s", src ? src : ".", name);
  return b;
}

static void put_be32(uint8_t *b, uint32_t v) {
  b[0] = (uint8_t)(v >> 24);
  b[1] = (uint8_t)(v >> 16);
  b[2] = (uint8_t)(v >> 8);
  b[3] = (uint8_t)v;
}

static void write_file(const char *path, const void *buf, size_t len, int gz) {
  if (gz) {
    gzFile f = gzopen(path, "wb");
    if (!f || (len && gzwrite(f, buf, (unsigned)len) != (int)len)) HS_FAIL_AT("gzwrite %s", path);
    if (f) gzclose(f);
  } else {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len) HS_FAIL_AT("fwrite %s", path);
    if (f) fclose(f);
  }
}

/* An IDX image file of n images rows x cols (pixel = (i * 7 + j) % 256) holding only
 * `payload` bytes after the header (payload < 0: all of them). Returns the length. */
static size_t make_images(uint8_t *buf, uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols,
                          long payload) {
  put_be32(buf, magic);
  put_be32(buf + 4, n);
  put_be32(buf + 8, rows);
  put_be32(buf + 12, cols);
  size_t full = (size_t)n * rows * cols, len = payload < 0 ? full : (size_t)payload;
  for (size_t j = 0; j < len; j++) buf[16 + j] = (uint8_t)((j / (rows * cols) * 7 + j) % 256);
  return 16 + len;
}

static size_t make_labels(uint8_t *buf, uint32_t n, const uint8_t *labels, size_t have) {
  put_be32(buf, HS_IDX_LABELS);
  put_be32(buf + 4, n);
  memcpy(buf + 8, labels, have);
  return 8 + have;
}

static void unlink_quiet(const char *path) { (void)unlink(path); }

/* --- IDX on the committed fixtures ---------------------------------------------------------- */

static void check_tiny(const hs_idx *im, const hs_idx *lb) {
  ASSERT_EQ(im->magic, HS_IDX_IMAGES);
  ASSERT_EQ(im->count, 5);
  ASSERT_EQ(im->loaded, 5);
  ASSERT_EQ(im->rows, 3);
  ASSERT_EQ(im->cols, 4);
  int ok = 1;
  for (int i = 0; i < 5; i++)
    for (int r = 0; r < 3; r++)
      for (int c = 0; c < 4; c++)
        if (im->data[i * 12 + r * 4 + c] != 20 * i + 4 * r + c + 1) ok = 0;
  ASSERT(ok);
  static const uint8_t want[5] = {7, 0, 3, 9, 3};
  ASSERT_EQ(lb->magic, HS_IDX_LABELS);
  ASSERT_EQ(lb->count, 5);
  ASSERT_EQ(lb->rows * lb->cols, 1);
  ASSERT(memcmp(lb->data, want, 5) == 0);
}

static void read_tiny(int gz) {
  hs_idx im, lb;
  hs_diag d = {0};
  const char *ip = fixture(gz ? "tiny-images-idx3-ubyte.gz" : "tiny-images-idx3-ubyte");
  const char *lp = fixture(gz ? "tiny-labels-idx1-ubyte.gz" : "tiny-labels-idx1-ubyte");
  int rc = hs_idx_read(&im, ip, HS_IDX_IMAGES, 0, &d);
  if (rc) HS_FAIL_AT("%s", d.msg);
  int rc2 = hs_idx_read(&lb, lp, HS_IDX_LABELS, 0, &d);
  if (rc2) HS_FAIL_AT("%s", d.msg);
  if (!rc && !rc2) check_tiny(&im, &lb);
  hs_idx_free(&im);
  hs_idx_free(&lb);
}

static void test_idx_fixture_plain(void) { read_tiny(0); }
static void test_idx_fixture_gzip(void) { read_tiny(1); }

static void test_idx_parse_mem_and_limit(void) {
  uint8_t buf[256];
  FILE *f = fopen(fixture("tiny-images-idx3-ubyte"), "rb");
  ASSERT(f != NULL);
  if (!f) return;
  size_t len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  ASSERT_EQ(len, 16 + 60);
  hs_idx im;
  hs_diag d = {0};
  ASSERT_EQ(hs_idx_parse_mem(&im, buf, len, HS_IDX_IMAGES, 0, "mem", &d), 0);
  ASSERT_EQ(im.loaded, 5);
  ASSERT_EQ(im.data[59], 20 * 4 + 4 * 2 + 3 + 1);
  hs_idx_free(&im);
  ASSERT(im.data == NULL);
  /* The first 2 items only; the rest of the buffer is not needed, so a cut file is fine. */
  ASSERT_EQ(hs_idx_parse_mem(&im, buf, 16 + 24, HS_IDX_IMAGES, 2, "mem", &d), 0);
  ASSERT_EQ(im.count, 5);
  ASSERT_EQ(im.loaded, 2);
  ASSERT_EQ(im.data[23], 20 * 1 + 4 * 2 + 3 + 1);
  hs_idx_free(&im);
  /* The same limit through the file reader, on the gzipped fixture. */
  ASSERT_EQ(hs_idx_read(&im, fixture("tiny-images-idx3-ubyte.gz"), HS_IDX_IMAGES, 2, &d), 0);
  ASSERT_EQ(im.loaded, 2);
  hs_idx_free(&im);
  hs_idx_free(NULL);
}

/* --- IDX: bad files, each with its message ---------------------------------------------------- */

static void test_idx_truncated(void) {
  static uint8_t buf[16 + 4096];
  size_t len = make_images(buf, HS_IDX_IMAGES, 10000, 28, 28, 1024);
  const char *p = hs_test_tmp("trunc-images");
  const char *pz = hs_test_tmp("trunc-images.gz");
  write_file(p, buf, len, 0);
  write_file(pz, buf, len, 1);
  hs_idx im;
  hs_diag d = {0};
  ASSERT_EQ(hs_idx_read(&im, p, HS_IDX_IMAGES, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, p);
  ASSERT_CONTAINS(d.msg, ": truncated: expected 7840000 bytes of pixels, got 1024");
  ASSERT_EQ(hs_idx_read(&im, pz, HS_IDX_IMAGES, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "truncated: expected 7840000 bytes of pixels, got 1024");
  ASSERT_EQ(hs_idx_parse_mem(&im, buf, len, HS_IDX_IMAGES, 0, "m", &d), HS_EINVAL);
  ASSERT_STR(d.msg, "m: truncated: expected 7840000 bytes of pixels, got 1024");
  /* A header cut short, and an empty file. */
  ASSERT_EQ(hs_idx_parse_mem(&im, buf, 10, HS_IDX_IMAGES, 0, "m", &d), HS_EINVAL);
  ASSERT_STR(d.msg, "m: truncated: expected a 16-byte IDX images header, got 10 bytes");
  write_file(p, buf, 0, 0);
  ASSERT_EQ(hs_idx_read(&im, p, HS_IDX_LABELS, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "truncated: expected a 8-byte IDX labels header, got 0 bytes");
  /* A gzip stream cut in the middle is truncation too, not a mysterious gzip error. */
  uint8_t full[16 + 2000];
  size_t flen = make_images(full, HS_IDX_IMAGES, 20, 10, 10, -1);
  write_file(pz, full, flen, 1);
  struct stat st;
  ASSERT_EQ(stat(pz, &st), 0);
  FILE *f = fopen(pz, "rb");
  static uint8_t gz[8192];
  size_t glen = f ? fread(gz, 1, sizeof gz, f) : 0;
  if (f) fclose(f);
  ASSERT_EQ((long long)glen, (long long)st.st_size);
  write_file(p, gz, glen / 2, 0);
  ASSERT_EQ(hs_idx_read(&im, p, HS_IDX_IMAGES, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "truncated: expected 2000 bytes of pixels, got");
  unlink_quiet(p);
  unlink_quiet(pz);
}

static void test_idx_bad_magic(void) {
  uint8_t buf[64];
  size_t len = make_images(buf, 0x12345678u, 1, 2, 2, -1);
  hs_idx x;
  hs_diag d = {0};
  ASSERT_EQ(hs_idx_parse_mem(&x, buf, len, HS_IDX_IMAGES, 0, "f.idx", &d), HS_EINVAL);
  ASSERT_STR(d.msg, "f.idx: bad magic 0x12345678, expected 0x00000803 (IDX images)");
  const char *p = hs_test_tmp("magic.gz");
  write_file(p, buf, len, 1);
  ASSERT_EQ(hs_idx_read(&x, p, HS_IDX_LABELS, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "bad magic 0x12345678, expected 0x00000801 (IDX labels)");
  /* Images given where labels are expected: the message says what was probably meant. */
  ASSERT_EQ(hs_idx_read(&x, fixture("tiny-images-idx3-ubyte"), HS_IDX_LABELS, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "bad magic 0x00000803, expected 0x00000801 (IDX labels)");
  ASSERT_CONTAINS(d.msg, "swapped");
  /* A file that is not gzip and not IDX (zlib passes plain bytes through). */
  write_file(p, "hello, world\n", 13, 0);
  ASSERT_EQ(hs_idx_read(&x, p, HS_IDX_IMAGES, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "bad magic 0x68656c6c");
  ASSERT_EQ(hs_idx_parse_mem(&x, buf, len, 0x0808u, 0, "f", &d), HS_EINVAL);
  unlink_quiet(p);
}

static void test_idx_huge_declared_size(void) {
  uint8_t buf[64];
  hs_idx x;
  hs_diag d = {0};
  size_t len = make_images(buf, HS_IDX_IMAGES, 0xffffffffu, 28, 28, 8);
  ASSERT_EQ(hs_idx_parse_mem(&x, buf, len, HS_IDX_IMAGES, 0, "h", &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "h: declared size too large: 4294967295 images of 784 bytes");
  const char *p = hs_test_tmp("huge.gz");
  write_file(p, buf, len, 1);
  ASSERT_EQ(hs_idx_read(&x, p, HS_IDX_IMAGES, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "declared size too large");
  make_labels(buf, 0xfffffff0u, (const uint8_t *)"\1\2", 2);
  ASSERT_EQ(hs_idx_parse_mem(&x, buf, 10, HS_IDX_LABELS, 0, "l", &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "l: declared size too large: 4294967280 labels");
  len = make_images(buf, HS_IDX_IMAGES, 3, 0, 5000, 0);
  ASSERT_EQ(hs_idx_parse_mem(&x, buf, len, HS_IDX_IMAGES, 0, "z", &d), HS_EINVAL);
  ASSERT_STR(d.msg, "z: bad image size 0x5000, expected 1 to 4096 pixels a side");
  /* 1 GiB declared (within the limit) but 10 bytes present: a truncation error, and the
   * reader never allocated the gigabyte (the sanitizer build would notice a huge malloc). */
  len = make_images(buf, HS_IDX_IMAGES, 1u << 24, 8, 8, 10);
  write_file(p, buf, len, 1);
  ASSERT_EQ(hs_idx_read(&x, p, HS_IDX_IMAGES, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "truncated: expected 1073741824 bytes of pixels, got 10");
  unlink_quiet(p);
}

static void test_idx_trailing_and_missing(void) {
  uint8_t buf[64];
  size_t len = make_images(buf, HS_IDX_IMAGES, 2, 2, 2, 11); /* 8 needed, 3 extra */
  hs_idx x;
  hs_diag d = {0};
  ASSERT_EQ(hs_idx_parse_mem(&x, buf, len, HS_IDX_IMAGES, 0, "t", &d), HS_EINVAL);
  ASSERT_STR(d.msg, "t: 3 unexpected bytes after the 2 declared images");
  const char *p = hs_test_tmp("trailing");
  write_file(p, buf, len, 0);
  ASSERT_EQ(hs_idx_read(&x, p, HS_IDX_IMAGES, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "3 unexpected bytes after the 2 declared images");
  ASSERT_EQ(hs_idx_read(&x, p, HS_IDX_IMAGES, 1, &d), 0); /* not checked past a limit */
  ASSERT_EQ(x.loaded, 1);
  hs_idx_free(&x);
  unlink_quiet(p);
  ASSERT_EQ(hs_idx_read(&x, "/nonexistent/x-idx3-ubyte", HS_IDX_IMAGES, 0, &d), HS_ENOTFOUND);
  ASSERT_STR(d.msg, "/nonexistent/x-idx3-ubyte: no such file");
  ASSERT_EQ(hs_idx_read(&x, "/", HS_IDX_IMAGES, 0, &d), HS_EIO);
  ASSERT_CONTAINS(d.msg, "/: read error");
}

static void test_idx_corrupt_gzip(void) {
  uint8_t buf[16 + 400];
  size_t len = make_images(buf, HS_IDX_IMAGES, 4, 10, 10, -1);
  const char *p = hs_test_tmp("corrupt.gz");
  write_file(p, buf, len, 1);
  FILE *f = fopen(p, "rb");
  uint8_t gz[2048];
  size_t glen = f ? fread(gz, 1, sizeof gz, f) : 0;
  if (f) fclose(f);
  ASSERT(glen > 30);
  gz[glen - 6] ^= 0xff; /* inside the CRC-32 trailer: the data no longer checks */
  write_file(p, gz, glen, 0);
  hs_idx x;
  hs_diag d = {0};
  int rc = hs_idx_read(&x, p, HS_IDX_IMAGES, 0, &d);
  ASSERT_EQ(rc, HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "gzip:");
  if (!rc) hs_idx_free(&x);
  unlink_quiet(p);
}

/* --- data sets from IDX ---------------------------------------------------------------------- */

static const hs_data_idx_options tiny_opts = {.classes = 10, .mean = 0.5, .std = 0.25, .name = NULL};

static void test_dataset_from_fixture(void) {
  hs_dataset *ds;
  hs_diag d = {0};
  int rc = hs_data_idx_open(&ds, fixture("tiny-images-idx3-ubyte.gz"),
                            fixture("tiny-labels-idx1-ubyte"), &tiny_opts, &d);
  if (rc) {
    HS_FAIL_AT("%s", d.msg);
    return;
  }
  ASSERT_EQ(hs_data_count(ds), 5);
  int c, h, w;
  hs_data_shape(ds, &c, &h, &w);
  ASSERT_EQ(c, 1);
  ASSERT_EQ(h, 3);
  ASSERT_EQ(w, 4);
  ASSERT_EQ(hs_data_sample_size(ds), 12);
  ASSERT_EQ(hs_data_classes(ds), 10);
  ASSERT_CONTAINS(hs_data_name(ds), "tiny-images-idx3-ubyte.gz");
  int64_t idx[2] = {3, 0};
  float x[24];
  int32_t y[2];
  ASSERT_EQ(hs_data_gather(ds, idx, 2, x, y, &d), 0);
  ASSERT_EQ(y[0], 9);
  ASSERT_EQ(y[1], 7);
  /* item 3, row 1, col 2: byte 20*3 + 4 + 2 + 1 = 67 -> (67/255 - 0.5) / 0.25 */
  ASSERT_NEAR(x[6], (67.0 / 255.0 - 0.5) / 0.25, 1e-6);
  ASSERT_NEAR(x[12], (1.0 / 255.0 - 0.5) / 0.25, 1e-6);
  idx[1] = 5;
  ASSERT_EQ(hs_data_gather(ds, idx, 2, x, NULL, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "sample index 5 out of range [0, 5)");
  hs_data_close(ds);
  hs_data_close(NULL);

  hs_data_idx_options o = tiny_opts;
  o.max_samples = 2;
  o.name = "tiny";
  ASSERT_EQ(hs_data_idx_open(&ds, fixture("tiny-images-idx3-ubyte"),
                             fixture("tiny-labels-idx1-ubyte.gz"), &o, &d), 0);
  if (ds) {
    ASSERT_EQ(hs_data_count(ds), 2);
    ASSERT_STR(hs_data_name(ds), "tiny");
    ASSERT_EQ(hs_data_labels(ds)[1], 0);
    ASSERT_EQ(hs_data_pixels(ds)[12], 21);
  }
  hs_data_close(ds);
}

static void test_dataset_label_errors(void) {
  hs_dataset *ds;
  hs_diag d = {0};
  /* label 9 at item 3 with only 9 classes */
  hs_data_idx_options o = tiny_opts;
  o.classes = 9;
  ASSERT_EQ(hs_data_idx_open(&ds, fixture("tiny-images-idx3-ubyte"),
                             fixture("tiny-labels-idx1-ubyte"), &o, &d), HS_EINVAL);
  ASSERT(ds == NULL);
  ASSERT_CONTAINS(d.msg, "tiny-labels-idx1-ubyte: label 9 of item 3 is out of range, expected < 9");
  /* 4 labels for 5 images */
  uint8_t buf[32];
  size_t len = make_labels(buf, 4, (const uint8_t *)"\1\2\3\4", 4);
  const char *p = hs_test_tmp("four-labels");
  write_file(p, buf, len, 0);
  ASSERT_EQ(hs_data_idx_open(&ds, fixture("tiny-images-idx3-ubyte"), p, &tiny_opts, &d),
            HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "four-labels: 4 labels for the 5 images of");
  /* The same mismatch is caught when only a prefix is loaded. */
  o = tiny_opts;
  o.max_samples = 2;
  ASSERT_EQ(hs_data_idx_open(&ds, fixture("tiny-images-idx3-ubyte"), p, &o, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "4 labels for the 5 images");
  o = tiny_opts;
  o.std = 0.0;
  ASSERT_EQ(hs_data_idx_open(&ds, fixture("tiny-images-idx3-ubyte"),
                             fixture("tiny-labels-idx1-ubyte"), &o, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "std > 0");
  unlink_quiet(p);
}

/* --- Fashion-MNIST ----------------------------------------------------------------------------*/

/* Writes a fake Fashion-MNIST split (n images of side x side, uncompressed names) into dir. */
static void write_fake_fmnist(const char *dir, const char *prefix, uint32_t n, uint32_t side) {
  static uint8_t buf[16 + 8 * 28 * 28];
  char path[1024];
  size_t len = make_images(buf, HS_IDX_IMAGES, n, side, side, -1);
  snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
  write_file(path, buf, len, 0);
  uint8_t lab[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  len = make_labels(buf, n, lab, n);
  snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
  write_file(path, buf, len, 0);
}

static void remove_fake_fmnist(const char *dir, const char *prefix) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
  unlink_quiet(path);
  snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
  unlink_quiet(path);
}

static void test_fmnist_env_dir_and_plain_names(void) {
  const char *dir = hs_test_tmp("fmnist");
  mkdir(dir, 0700);
  write_fake_fmnist(dir, "t10k", 3, 28);
  char *old = getenv("HETSIM_FASHION_MNIST_DIR");
  char saved[1024];
  if (old) snprintf(saved, sizeof saved, "%s", old);
  setenv("HETSIM_FASHION_MNIST_DIR", dir, 1);
  hs_dataset *ds;
  hs_diag d = {0};
  int rc = hs_data_fashion_mnist(&ds, NULL, "test", &d);
  if (rc) HS_FAIL_AT("%s", d.msg);
  if (!rc) {
    ASSERT_EQ(hs_data_count(ds), 3);
    ASSERT_STR(hs_data_name(ds), "fashion-mnist:test");
    ASSERT_EQ(hs_data_labels(ds)[2], 2);
    double mean, sd;
    hs_data_norm(ds, &mean, &sd);
    ASSERT_NEAR(mean, 0.2860, 0);
    ASSERT_NEAR(sd, 0.3530, 0);
    hs_data_close(ds);
  }
  /* The env folder has no train split: not found, naming the folder and the install command. */
  ASSERT_EQ(hs_data_fashion_mnist(&ds, NULL, "train", &d), HS_ENOTFOUND);
  ASSERT_CONTAINS(d.msg, dir);
  ASSERT_CONTAINS(d.msg, "train-images-idx3-ubyte.gz (or without .gz) not found");
  ASSERT_CONTAINS(d.msg, "apt-get install dataset-fashion-mnist");
  if (old)
    setenv("HETSIM_FASHION_MNIST_DIR", saved, 1);
  else
    unsetenv("HETSIM_FASHION_MNIST_DIR");
  /* Images that are not 28x28. */
  remove_fake_fmnist(dir, "t10k");
  write_fake_fmnist(dir, "t10k", 2, 5);
  ASSERT_EQ(hs_data_fashion_mnist(&ds, dir, "t10k", &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "expected 28x28 Fashion-MNIST images, got 5x5");
  remove_fake_fmnist(dir, "t10k");
  rmdir(dir);
}

static void test_fmnist_missing_and_bad_split(void) {
  hs_dataset *ds;
  hs_diag d = {0};
  ASSERT_EQ(hs_data_fashion_mnist(&ds, "/nonexistent/fmnist", "train", &d), HS_ENOTFOUND);
  ASSERT(ds == NULL);
  ASSERT_CONTAINS(d.msg, "/nonexistent/fmnist/train-images-idx3-ubyte.gz");
  ASSERT_CONTAINS(d.msg, "apt-get install dataset-fashion-mnist");
  ASSERT_EQ(hs_data_fashion_mnist(&ds, NULL, "validation", &d), HS_EINVAL);
  ASSERT_STR(d.msg, "fashion-mnist: unknown split \"validation\", expected train or test");
  ASSERT_EQ(hs_data_fashion_mnist_first(&ds, NULL, "train", -1, &d), HS_EINVAL);
}

/* The real files, when installed: sizes, shape, balanced classes, and the normalisation
 * constants reproduce mean 0 and std 1 over the training pixels. */
static void test_fmnist_real(void) {
  const char *dir = getenv("HETSIM_FASHION_MNIST_DIR");
  if (!dir || !*dir) dir = HS_FASHION_MNIST_DIR;
  char probe[1024];
  snprintf(probe, sizeof probe, "%s/train-labels-idx1-ubyte.gz", dir);
  char probe2[1024];
  snprintf(probe2, sizeof probe2, "%s/train-labels-idx1-ubyte", dir);
  if (access(probe, R_OK) != 0 && access(probe2, R_OK) != 0) {
    printf("skip fmnist_real: Fashion-MNIST not installed in %s\n", dir);
    return;
  }
  static const struct {
    const char *split;
    int64_t n;
  } splits[] = {{"train", 60000}, {"test", 10000}};
  for (int s = 0; s < 2; s++) {
    hs_dataset *ds;
    hs_diag d = {0};
    if (hs_data_fashion_mnist(&ds, NULL, splits[s].split, &d)) {
      HS_FAIL_AT("%s", d.msg);
      continue;
    }
    ASSERT_EQ(hs_data_count(ds), splits[s].n);
    int c, h, w;
    hs_data_shape(ds, &c, &h, &w);
    ASSERT_EQ(c * 10000 + h * 100 + w, 12828);
    ASSERT_EQ(hs_data_classes(ds), 10);
    int64_t counts[10] = {0};
    const int32_t *y = hs_data_labels(ds);
    int bad = 0;
    for (int64_t i = 0; i < hs_data_count(ds); i++) {
      if (y[i] < 0 || y[i] > 9)
        bad++;
      else
        counts[y[i]]++;
    }
    ASSERT_EQ(bad, 0);
    for (int k = 0; k < 10; k++) ASSERT_EQ(counts[k], splits[s].n / 10);
    if (s == 0) {
      /* Pixel mean and std of the normalised training set, from a byte histogram. */
      int64_t hist[256] = {0};
      const uint8_t *p = hs_data_pixels(ds);
      int64_t total = hs_data_count(ds) * 784;
      for (int64_t i = 0; i < total; i++) hist[p[i]]++;
      double s1 = 0, s2 = 0;
      for (int v = 0; v < 256; v++) {
        double x = (v / 255.0 - HS_FASHION_MNIST_MEAN) / HS_FASHION_MNIST_STD;
        s1 += (double)hist[v] * x;
        s2 += (double)hist[v] * x * x;
      }
      double mean = s1 / (double)total, sd = sqrt(s2 / (double)total - mean * mean);
      ASSERT_NEAR(mean, 0.0, 0.005);
      ASSERT_NEAR(sd, 1.0, 0.005);
      /* The first N are a prefix of the whole. */
      hs_dataset *head;
      if (hs_data_fashion_mnist_first(&head, NULL, "train", 100, &d) == 0) {
        ASSERT_EQ(hs_data_count(head), 100);
        ASSERT(memcmp(hs_data_labels(head), y, 100 * sizeof *y) == 0);
        ASSERT(memcmp(hs_data_pixels(head), p, 100 * 784) == 0);
        hs_data_close(head);
      } else {
        HS_FAIL_AT("%s", d.msg);
      }
    }
    hs_data_close(ds);
  }
}

/* --- synthetic CIFAR-shaped data ------------------------------------------------------------- */

static void test_synthetic_deterministic(void) {
  hs_dataset *a, *b, *c, *p;
  hs_diag d = {0};
  ASSERT_EQ(hs_data_synthetic_cifar(&a, 64, 5, &d), 0);
  ASSERT_EQ(hs_data_synthetic_cifar(&b, 64, 5, &d), 0);
  ASSERT_EQ(hs_data_synthetic_cifar(&c, 64, 6, &d), 0);
  ASSERT_EQ(hs_data_synthetic_cifar(&p, 16, 5, &d), 0);
  if (!a || !b || !c || !p) goto out;
  int ch, h, w;
  hs_data_shape(a, &ch, &h, &w);
  ASSERT_EQ(ch * 10000 + h * 100 + w, 33232);
  ASSERT_EQ(hs_data_classes(a), 10);
  ASSERT_EQ(hs_data_count(a), 64);
  size_t bytes = 64 * 3072;
  ASSERT(memcmp(hs_data_pixels(a), hs_data_pixels(b), bytes) == 0);
  ASSERT(memcmp(hs_data_labels(a), hs_data_labels(b), 64 * sizeof(int32_t)) == 0);
  ASSERT(memcmp(hs_data_pixels(a), hs_data_pixels(c), bytes) != 0);
  /* Sample i depends on (seed, i) only: a smaller set is a prefix. */
  ASSERT(memcmp(hs_data_pixels(a), hs_data_pixels(p), 16 * 3072) == 0);
  ASSERT(memcmp(hs_data_labels(a), hs_data_labels(p), 16 * sizeof(int32_t)) == 0);
  int bad = 0;
  for (int i = 0; i < 64; i++) bad += hs_data_labels(a)[i] < 0 || hs_data_labels(a)[i] > 9;
  ASSERT_EQ(bad, 0);
out:
  hs_data_close(a);
  hs_data_close(b);
  hs_data_close(c);
  hs_data_close(p);
  ASSERT_EQ(hs_data_synthetic_cifar(&a, 0, 1, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "synthetic-cifar: samples must be 1 to");
}

/* How many of te's samples [first, first + n) the class means of tr's samples [0, ntr) classify
 * right by nearest mean (squared distance over the pixel bytes). Each class must have over
 * ntr / 13 of the training samples (about ntr / 10). */
static int nearest_mean_hits(const hs_dataset *tr, int ntr, const hs_dataset *te, int first, int n) {
  const int64_t P = hs_data_sample_size(tr);
  double *mean = calloc((size_t)(10 * P), sizeof *mean);
  int count[10] = {0};
  const uint8_t *px = hs_data_pixels(tr);
  const int32_t *y = hs_data_labels(tr);
  for (int i = 0; i < ntr; i++) {
    count[y[i]]++;
    for (int64_t j = 0; j < P; j++) mean[y[i] * P + j] += px[i * P + j];
  }
  for (int k = 0; k < 10; k++) {
    ASSERT(count[k] > ntr / 13);
    for (int64_t j = 0; j < P; j++) mean[k * P + j] /= count[k] ? count[k] : 1;
  }
  const uint8_t *qx = hs_data_pixels(te);
  int correct = 0;
  for (int i = first; i < first + n; i++) {
    int best = -1;
    double bestd = INFINITY;
    for (int k = 0; k < 10; k++) {
      double s = 0;
      for (int64_t j = 0; j < P; j++) {
        double e = qx[i * P + j] - mean[k * P + j];
        s += e * e;
      }
      if (s < bestd) bestd = s, best = k;
    }
    correct += best == hs_data_labels(te)[i];
  }
  free(mean);
  return correct;
}

/* Learnable: class means taken from 2000 samples classify 500 others by nearest mean. */
static void test_synthetic_learnable(void) {
  hs_dataset *ds;
  hs_diag d = {0};
  if (hs_data_synthetic_cifar(&ds, 2500, 11, &d)) {
    HS_FAIL_AT("%s", d.msg);
    return;
  }
  enum { P = 3072 };
  ASSERT(nearest_mean_hits(ds, 2000, ds, 2000, 500) >= 450);
  /* Normalised values are centred near 0 with spread near 1 (plausible network inputs). */
  float x[P];
  int64_t i0 = 0;
  ASSERT_EQ(hs_data_gather(ds, &i0, 1, x, NULL, &d), 0);
  double s1 = 0, s2 = 0;
  for (int j = 0; j < P; j++) s1 += x[j], s2 += (double)x[j] * x[j];
  double m = s1 / P, sd = sqrt(s2 / P - m * m);
  ASSERT(fabs(m) < 0.5);
  ASSERT(sd > 0.4 && sd < 1.2);
  hs_data_close(ds);
}

/* The Fashion-MNIST stand-in (HETSIM_FASHION_MNIST_DIR=synthetic): Fashion-MNIST's shape and
 * sizes, the same bytes whichever way it is asked for, a first-N prefix, test samples that are
 * not training samples, and classes that training samples' means tell apart on test samples. */
static void test_fmnist_synthetic(void) {
  hs_dataset *tr = NULL, *te = NULL, *all = NULL, *env = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_data_fashion_mnist_first(&tr, HS_FASHION_MNIST_SYNTHETIC, "train", 2000, &d), 0);
  ASSERT_EQ(hs_data_fashion_mnist_first(&te, "synthetic", "test", 500, &d), 0);
  ASSERT_EQ(hs_data_fashion_mnist(&all, "synthetic", "test", &d), 0);
  char *old = getenv("HETSIM_FASHION_MNIST_DIR");
  char saved[1024];
  if (old) snprintf(saved, sizeof saved, "%s", old);
  setenv("HETSIM_FASHION_MNIST_DIR", "synthetic", 1);
  ASSERT_EQ(hs_data_fashion_mnist_first(&env, NULL, "train", 2000, &d), 0);
  if (old)
    setenv("HETSIM_FASHION_MNIST_DIR", saved, 1);
  else
    unsetenv("HETSIM_FASHION_MNIST_DIR");
  if (!tr || !te || !all || !env) goto out;
  ASSERT_STR(hs_data_name(tr), "synthetic-fashion-mnist:train");
  ASSERT_STR(hs_data_name(te), "synthetic-fashion-mnist:test");
  ASSERT_EQ(hs_data_count(tr), 2000);
  ASSERT_EQ(hs_data_count(all), 10000);
  int c, h, w;
  hs_data_shape(tr, &c, &h, &w);
  ASSERT_EQ(c * 10000 + h * 100 + w, 12828);
  ASSERT_EQ(hs_data_classes(tr), 10);
  ASSERT(memcmp(hs_data_pixels(tr), hs_data_pixels(env), 2000 * 784) == 0);
  ASSERT(memcmp(hs_data_pixels(te), hs_data_pixels(all), 500 * 784) == 0);
  ASSERT(memcmp(hs_data_labels(te), hs_data_labels(all), 500 * sizeof(int32_t)) == 0);
  ASSERT(memcmp(hs_data_pixels(tr), hs_data_pixels(te), 500 * 784) != 0);
  ASSERT(nearest_mean_hits(tr, 2000, te, 0, 500) >= 450);
out:
  hs_data_close(tr);
  hs_data_close(te);
  hs_data_close(all);
  hs_data_close(env);
}

/* --- shards ---------------------------------------------------------------------------------- */

/* Every index of [0, n) in exactly one shard of the epoch. */
static int check_partition(const hs_shards *s, int64_t epoch) {
  int64_t n = hs_shards_n(s);
  unsigned char *seen = calloc((size_t)n, 1);
  int64_t *buf = malloc((size_t)n * sizeof *buf);
  int ok = seen && buf;
  int64_t total = 0;
  for (int w = 0; ok && w < hs_shards_workers(s); w++) {
    int64_t c = hs_shards_count(s, w);
    if (hs_shards_indices(s, epoch, w, buf, NULL)) ok = 0;
    for (int64_t j = 0; ok && j < c; j++) {
      if (buf[j] < 0 || buf[j] >= n || seen[buf[j]]) ok = 0;
      else seen[buf[j]] = 1;
    }
    total += c;
  }
  if (total != n) ok = 0;
  free(seen);
  free(buf);
  return ok;
}

static void test_shards_disjoint_covering_proportional(void) {
  hs_shards *s;
  hs_diag d = {0};
  const double shares[4] = {0.1, 0.2, 0.3, 0.4};
  ASSERT_EQ(hs_shards_open(&s, 1000, 4, shares, 42, &d), 0);
  if (!s) return;
  ASSERT_EQ(hs_shards_count(s, 0), 100);
  ASSERT_EQ(hs_shards_count(s, 1), 200);
  ASSERT_EQ(hs_shards_count(s, 2), 300);
  ASSERT_EQ(hs_shards_count(s, 3), 400);
  ASSERT_EQ(hs_shards_count(s, 4), 0);
  ASSERT(check_partition(s, 0));
  ASSERT(check_partition(s, 1));
  ASSERT(check_partition(s, 12345));
  hs_shards_close(s);
  /* Random shares over 60000 samples: each count is within 1 of n * share. */
  double r[7] = {0.31, 0.05, 0.17, 0.02, 0.2, 0.15, 0.1};
  ASSERT_EQ(hs_shards_open(&s, 60000, 7, r, 1, &d), 0);
  if (!s) return;
  int64_t sum = 0;
  for (int w = 0; w < 7; w++) {
    ASSERT(fabs((double)hs_shards_count(s, w) - 60000 * r[w]) < 1.0);
    sum += hs_shards_count(s, w);
  }
  ASSERT_EQ(sum, 60000);
  ASSERT(check_partition(s, 3));
  hs_shards_close(s);
  /* Small n: every n from 1 to 70 is a partition of [0, n) (the cycle walk stays inside). */
  int all = 1;
  for (int64_t n = 1; n <= 70; n++) {
    if (hs_shards_open(&s, n, 3, NULL, (uint64_t)n, &d)) {
      all = 0;
      continue;
    }
    all &= check_partition(s, 0) && check_partition(s, 1);
    hs_shards_close(s);
  }
  ASSERT(all);
}

static void test_shards_largest_remainder(void) {
  hs_shards *s;
  hs_diag d = {0};
  ASSERT_EQ(hs_shards_open(&s, 10, 3, NULL, 1, &d), 0); /* 3.33 each: the tie goes to worker 0 */
  ASSERT_EQ(hs_shards_count(s, 0), 4);
  ASSERT_EQ(hs_shards_count(s, 1), 3);
  ASSERT_EQ(hs_shards_count(s, 2), 3);
  /* 7 x (0.5, 0.3, 0.2) = 3.5, 2.1, 1.4: floors 3, 2, 1, the spare sample to the .5 */
  const double a[3] = {0.5, 0.3, 0.2};
  hs_shards *s7;
  ASSERT_EQ(hs_shards_open(&s7, 7, 3, a, 1, &d), 0);
  if (s7) {
    ASSERT_EQ(hs_shards_count(s7, 0), 4);
    ASSERT_EQ(hs_shards_count(s7, 1), 2);
    ASSERT_EQ(hs_shards_count(s7, 2), 1);
  }
  hs_shards_close(s7);
  /* 10 x (0.14, 0.43, 0.43) = 1.4, 4.3, 4.3: floors 1, 4, 4; the spare to the 0.4 */
  const double b[3] = {0.14, 0.43, 0.43};
  ASSERT_EQ(hs_shards_set_shares(s, b, &d), 0);
  ASSERT_EQ(hs_shards_count(s, 0), 2);
  ASSERT_EQ(hs_shards_count(s, 1), 4);
  ASSERT_EQ(hs_shards_count(s, 2), 4);
  /* Weights need not sum to 1 (batch sizes work); a zero share gets nothing. */
  const double c[3] = {64, 0, 16};
  ASSERT_EQ(hs_shards_set_shares(s, c, &d), 0);
  ASSERT_EQ(hs_shards_count(s, 0), 8);
  ASSERT_EQ(hs_shards_count(s, 1), 0);
  ASSERT_EQ(hs_shards_count(s, 2), 2);
  ASSERT(check_partition(s, 0));
  const double neg[3] = {1, -0.5, 1}, zero[3] = {0, 0, 0}, nan3[3] = {1, NAN, 1};
  ASSERT_EQ(hs_shards_set_shares(s, neg, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "share of worker 1 must be finite and >= 0, got -0.5");
  ASSERT_EQ(hs_shards_set_shares(s, zero, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "positive finite sum");
  ASSERT_EQ(hs_shards_set_shares(s, nan3, &d), HS_EINVAL);
  ASSERT_EQ(hs_shards_count(s, 0), 8); /* a rejected change leaves the shards as they were */
  int64_t buf[10];
  ASSERT_EQ(hs_shards_indices(s, 0, 3, buf, &d), HS_EINVAL);
  ASSERT_EQ(hs_shards_indices(s, -1, 0, buf, &d), HS_EINVAL);
  hs_shards_close(s);
  hs_shards_close(NULL);
  ASSERT_EQ(hs_shards_open(&s, 0, 3, NULL, 1, &d), HS_EINVAL);
  ASSERT_EQ(hs_shards_open(&s, 10, 0, NULL, 1, &d), HS_EINVAL);
  ASSERT(s == NULL);
}

static void test_shards_deterministic_per_epoch(void) {
  hs_shards *s, *t, *u;
  hs_diag d = {0};
  const double sh[2] = {0.25, 0.75};
  ASSERT_EQ(hs_shards_open(&s, 1000, 2, sh, 9, &d), 0);
  ASSERT_EQ(hs_shards_open(&t, 1000, 2, sh, 9, &d), 0);
  ASSERT_EQ(hs_shards_open(&u, 1000, 2, sh, 10, &d), 0);
  if (!s || !t || !u) goto out;
  int64_t a[750], b[750];
  int same = 1;
  for (int64_t e = 0; e < 3; e++)
    for (int w = 0; w < 2; w++) {
      hs_shards_indices(s, e, w, a, &d);
      hs_shards_indices(t, e, w, b, &d);
      same &= memcmp(a, b, (size_t)hs_shards_count(s, w) * sizeof *a) == 0;
    }
  ASSERT(same);
  /* Another epoch, or another seed, is another shuffle: few positions agree (about 1 in n
   * by chance), and worker 0's set of samples changes too. */
  hs_shards_indices(s, 0, 1, a, &d);
  hs_shards_indices(s, 1, 1, b, &d);
  int eq = 0;
  for (int j = 0; j < 750; j++) eq += a[j] == b[j];
  ASSERT(eq < 10);
  hs_shards_indices(u, 0, 1, b, &d);
  eq = 0;
  for (int j = 0; j < 750; j++) eq += a[j] == b[j];
  ASSERT(eq < 10);
  hs_shards_indices(s, 0, 0, a, &d);
  hs_shards_indices(s, 1, 0, b, &d);
  unsigned char in0[1000] = {0};
  for (int j = 0; j < 250; j++) in0[a[j]] = 1;
  int kept = 0;
  for (int j = 0; j < 250; j++) kept += in0[b[j]];
  ASSERT(kept < 110); /* about 250 * 0.25 = 62 by chance */
  /* The shuffle does not leave samples near their place: the first half of the indices is
   * not mostly the first half of the data. */
  int low = 0;
  for (int j = 0; j < 250; j++) low += a[j] < 500;
  ASSERT(low > 90 && low < 160);
out:
  hs_shards_close(s);
  hs_shards_close(t);
  hs_shards_close(u);
}

/* --- batch iterator ------------------------------------------------------------------------ */

static int same_sample(const float *x, const hs_dataset *ds, int64_t i) {
  float ref[3072];
  if (hs_data_gather(ds, &i, 1, ref, NULL, NULL)) return 0;
  return memcmp(x, ref, (size_t)hs_data_sample_size(ds) * sizeof *x) == 0;
}

static void test_iter_wraps_epochs(void) {
  hs_dataset *ds;
  hs_shards *s;
  hs_diag d = {0};
  ASSERT_EQ(hs_data_synthetic_cifar(&ds, 50, 3, &d), 0);
  const double sh[3] = {0.2, 0.5, 0.3};
  ASSERT_EQ(hs_shards_open(&s, 50, 3, sh, 77, &d), 0);
  if (!ds || !s) goto out;
  ASSERT_EQ(hs_shards_count(s, 1), 25);
  hs_data_iter it;
  ASSERT_EQ(hs_data_iter_init(&it, ds, s, 1, 0, &d), 0);
  int64_t e0[25], e1[25], e2[25];
  hs_shards_indices(s, 0, 1, e0, &d);
  hs_shards_indices(s, 1, 1, e1, &d);
  hs_shards_indices(s, 2, 1, e2, &d);
  /* batches of 7: 0-6, 7-13, 14-20, then 21-24 of epoch 0 and 0-2 of epoch 1 */
  static float x[60 * 3072];
  int32_t y[60];
  int wraps = -1, ok = 1;
  for (int b = 0; b < 3; b++) {
    ASSERT_EQ(hs_data_iter_next(&it, 7, x, y, &wraps, &d), 0);
    ASSERT_EQ(wraps, 0);
    for (int j = 0; j < 7; j++)
      ok &= same_sample(x + j * 3072, ds, e0[b * 7 + j]) && y[j] == hs_data_labels(ds)[e0[b * 7 + j]];
  }
  ASSERT(ok);
  ASSERT_EQ(hs_data_iter_next(&it, 7, x, y, &wraps, &d), 0);
  ASSERT_EQ(wraps, 1);
  ASSERT_EQ(it.epoch, 1);
  for (int j = 0; j < 4; j++) ok &= same_sample(x + j * 3072, ds, e0[21 + j]);
  for (int j = 0; j < 3; j++) ok &= same_sample(x + (4 + j) * 3072, ds, e1[j]);
  ASSERT(ok);
  /* A batch larger than the shard wraps twice: 22 left of epoch 1, all 25 of epoch 2, 13 of 3 */
  ASSERT_EQ(hs_data_iter_next(&it, 60, x, y, &wraps, &d), 0);
  ASSERT_EQ(wraps, 2);
  ASSERT_EQ(it.epoch, 3);
  ok = same_sample(x + 21 * 3072, ds, e1[24]) && same_sample(x + 22 * 3072, ds, e2[0]) &&
       same_sample(x + 46 * 3072, ds, e2[24]);
  ASSERT(ok);
  ASSERT_EQ(hs_data_iter_next(&it, 0, x, y, NULL, &d), 0);
  ASSERT_EQ(hs_data_iter_next(&it, 3, x, NULL, NULL, &d), 0); /* labels are optional */
  int64_t e3[25];
  hs_shards_indices(s, 3, 1, e3, &d);
  ASSERT_EQ(it.pos, 16);
  ASSERT(same_sample(x, ds, e3[13]) && same_sample(x + 2 * 3072, ds, e3[15]));
  /* Mismatched sizes and bad workers are refused. */
  hs_shards *other;
  ASSERT_EQ(hs_shards_open(&other, 49, 3, NULL, 1, &d), 0);
  ASSERT_EQ(hs_data_iter_init(&it, ds, other, 0, 0, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "shards cover 49 samples, the data set has 50");
  hs_shards_close(other);
  ASSERT_EQ(hs_data_iter_init(&it, ds, s, 3, 0, &d), HS_EINVAL);
out:
  hs_shards_close(s);
  hs_data_close(ds);
}

static void test_iter_reshare_mid_run(void) {
  hs_dataset *ds;
  hs_shards *s;
  hs_diag d = {0};
  ASSERT_EQ(hs_data_synthetic_cifar(&ds, 40, 4, &d), 0);
  ASSERT_EQ(hs_shards_open(&s, 40, 2, NULL, 5, &d), 0);
  if (!ds || !s) goto out;
  hs_data_iter a, b;
  ASSERT_EQ(hs_data_iter_init(&a, ds, s, 0, 0, &d), 0);
  ASSERT_EQ(hs_data_iter_init(&b, ds, s, 1, 0, &d), 0);
  static float x[10 * 3072];
  int32_t y[10];
  int wraps;
  ASSERT_EQ(hs_data_iter_next(&a, 10, x, y, &wraps, &d), 0); /* half of its 20 */
  ASSERT_EQ(hs_data_iter_next(&b, 5, x, y, &wraps, &d), 0);  /* a quarter of its 20 */
  /* Worker 0 turns out 3x faster: shares 0.75 / 0.25 -> 30 / 10 samples. */
  const double sh[2] = {0.75, 0.25};
  ASSERT_EQ(hs_shards_set_shares(s, sh, &d), 0);
  ASSERT(check_partition(s, 0));
  int64_t i0[30], i1[10];
  hs_shards_indices(s, 0, 0, i0, &d);
  hs_shards_indices(s, 0, 1, i1, &d);
  /* Relative progress kept: worker 0 at 10/20 -> 15 of 30; worker 1 at 5/20 -> 2 of 10. */
  ASSERT_EQ(hs_data_iter_next(&a, 2, x, y, &wraps, &d), 0);
  ASSERT(same_sample(x, ds, i0[15]) && same_sample(x + 3072, ds, i0[16]));
  ASSERT_EQ(hs_data_iter_next(&b, 9, x, y, &wraps, &d), 0);
  ASSERT_EQ(wraps, 1);
  ASSERT(same_sample(x, ds, i1[2]) && same_sample(x + 7 * 3072, ds, i1[9]));
  /* A worker whose share drops to 0 cannot draw a batch. */
  const double none[2] = {1, 0};
  ASSERT_EQ(hs_shards_set_shares(s, none, &d), 0);
  ASSERT_EQ(hs_data_iter_next(&b, 1, x, y, &wraps, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "worker 1 has an empty shard");
  ASSERT_EQ(hs_data_iter_next(&a, 1, x, y, &wraps, &d), 0);
out:
  hs_shards_close(s);
  hs_data_close(ds);
}

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
      {"idx_fixture_plain", test_idx_fixture_plain},
      {"idx_fixture_gzip", test_idx_fixture_gzip},
      {"idx_parse_mem_and_limit", test_idx_parse_mem_and_limit},
      {"idx_truncated", test_idx_truncated},
      {"idx_bad_magic", test_idx_bad_magic},
      {"idx_huge_declared_size", test_idx_huge_declared_size},
      {"idx_trailing_and_missing", test_idx_trailing_and_missing},
      {"idx_corrupt_gzip", test_idx_corrupt_gzip},
      {"dataset_from_fixture", test_dataset_from_fixture},
      {"dataset_label_errors", test_dataset_label_errors},
      {"fmnist_env_dir_and_plain_names", test_fmnist_env_dir_and_plain_names},
      {"fmnist_missing_and_bad_split", test_fmnist_missing_and_bad_split},
      {"fmnist_real", test_fmnist_real},
      {"synthetic_deterministic", test_synthetic_deterministic},
      {"synthetic_learnable", test_synthetic_learnable},
      {"fmnist_synthetic", test_fmnist_synthetic},
      {"shards_disjoint_covering_proportional", test_shards_disjoint_covering_proportional},
      {"shards_largest_remainder", test_shards_largest_remainder},
      {"shards_deterministic_per_epoch", test_shards_deterministic_per_epoch},
      {"iter_wraps_epochs", test_iter_wraps_epochs},
      {"iter_reshare_mid_run", test_iter_reshare_mid_run},
      {NULL, NULL}};
  return hs_test_main("data", cases, argc, argv);
}
