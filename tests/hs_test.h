/* hs_test: a tiny test harness in the manner of libuv's test-list.h.
 *
 * A test file defines functions `static void test_xxx(void)` and lists them in a table passed to
 * hs_test_main. Assertions print both values, file and line, and mark the current test failed
 * without aborting the remaining tests. The run ends with the plain line "N passed, N failed". */
#ifndef HS_TEST_H
#define HS_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct hs_test_case {
  const char *name;
  void (*fn)(void);
} hs_test_case;

static int hs_test_failed_now;

#define HS_FAIL_AT(...)                                                          \
  do {                                                                          \
    fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);                          \
    fprintf(stderr, __VA_ARGS__);                                               \
    fputc('\n', stderr);                                                        \
    hs_test_failed_now = 1;                                                     \
  } while (0)

#define ASSERT(c)                                                               \
  do { if (!(c)) HS_FAIL_AT("assertion failed: %s", #c); } while (0)
#define ASSERT_EQ(a, b)                                                         \
  do {                                                                          \
    long long va_ = (long long)(a), vb_ = (long long)(b);                       \
    if (va_ != vb_) HS_FAIL_AT("%s == %s: %lld != %lld", #a, #b, va_, vb_);     \
  } while (0)
#define ASSERT_NEAR(a, b, tol)                                                  \
  do {                                                                          \
    double va_ = (double)(a), vb_ = (double)(b);                                \
    if (!(fabs(va_ - vb_) <= (tol)))                                            \
      HS_FAIL_AT("%s ~= %s: %.17g vs %.17g (tol %g)", #a, #b, va_, vb_, (double)(tol)); \
  } while (0)
/* Relative closeness, for quantities of any scale. */
#define ASSERT_REL(a, b, rel)                                                   \
  do {                                                                          \
    double va_ = (double)(a), vb_ = (double)(b);                                \
    double sc_ = fabs(vb_) > 1e-300 ? fabs(vb_) : 1.0;                          \
    if (!(fabs(va_ - vb_) / sc_ <= (rel)))                                      \
      HS_FAIL_AT("%s ~= %s: %.17g vs %.17g (rel %g)", #a, #b, va_, vb_, (double)(rel)); \
  } while (0)
#define ASSERT_STR(a, b)                                                        \
  do {                                                                          \
    const char *sa_ = (a), *sb_ = (b);                                          \
    if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0)                                  \
      HS_FAIL_AT("%s == %s: \"%s\" != \"%s\"", #a, #b, sa_ ? sa_ : "(null)",    \
                 sb_ ? sb_ : "(null)");                                         \
  } while (0)
#define ASSERT_CONTAINS(hay, needle)                                            \
  do {                                                                          \
    const char *h_ = (hay), *n_ = (needle);                                     \
    if (!h_ || !strstr(h_, n_))                                                 \
      HS_FAIL_AT("\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)", n_);     \
  } while (0)

/* Removes an SQLite database file and its -wal and -shm companions, where they exist. */
static inline void hs_test_unlink_db(const char *path) {
  char side[600];
  unlink(path);
  snprintf(side, sizeof side, "%s-wal", path), unlink(side);
  snprintf(side, sizeof side, "%s-shm", path), unlink(side);
}

/* Sets this process's launch as torchrun would for rank `rank` of `world` with its rendezvous on
 * 127.0.0.1:port (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and clears what would make
 * hetsim read another launcher's (mpirun's, torchrun's agent store). */
static inline void hs_test_set_torchrun(int rank, int world, int port) {
  char b[32];
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  snprintf(b, sizeof b, "%d", rank);
  setenv("RANK", b, 1);
  snprintf(b, sizeof b, "%d", world);
  setenv("WORLD_SIZE", b, 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  snprintf(b, sizeof b, "%d", port);
  setenv("MASTER_PORT", b, 1);
}

/* Runs the cases whose names contain one of the arguments (all of them without arguments). */
static inline int hs_test_main(const char *suite, const hs_test_case *cases, int argc, char **argv) {
  int passed = 0, failed = 0;
  for (const hs_test_case *t = cases; t->name; t++) {
    int chosen = argc < 2;
    for (int i = 1; i < argc && !chosen; i++) chosen = strstr(t->name, argv[i]) != NULL;
    if (!chosen) continue;
    hs_test_failed_now = 0;
    t->fn();
    if (hs_test_failed_now) {
      printf("FAIL %s.%s\n", suite, t->name);
      failed++;
    } else {
      printf("ok   %s.%s\n", suite, t->name);
      passed++;
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

/* A scratch path under the build's temporary folder, unique per process. */
static inline const char *hs_test_tmp(const char *name) {
  static char buf[8][512];
  static int next;
  char *b = buf[next++ % 8];
  const char *dir = getenv("TMPDIR");
  snprintf(b, 512, "%s/hetsim-test-%ld-%s", dir ? dir : "/tmp", (long)getpid(), name);
  return b;
}

#endif
