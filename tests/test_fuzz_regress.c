/* test_fuzz_regress: replays every fuzzing input kept in the tree through the fuzz harnesses'
 * own code, without libFuzzer, so that the normal suite (and its ASan/UBSan and valgrind runs)
 * catches a regression of any crash the fuzzers found.
 *
 * For each target (cluster_yaml, events_csv, idx, query, json, import, sim, curves) it feeds every file of
 * tests/fuzz/regress/TARGET/ (the crash inputs, each added when its bug was fixed) and of
 * tests/fuzz/corpus/TARGET/ (the minimized corpus) to the harness's LLVMFuzzerTestOneInput,
 * included here under another name. A harness that finds a broken invariant traps, which fails
 * this test; each test also checks that its folders were not empty. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/hs_test.h"

#define LLVMFuzzerTestOneInput fuzz_cluster_yaml_one
#include "tests/fuzz/fuzz_cluster_yaml.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_events_csv_one
#include "tests/fuzz/fuzz_events_csv.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_idx_one
#include "tests/fuzz/fuzz_idx.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_json_one
#define write_value fuzz_json_write_value
#define same fuzz_json_same
#include "tests/fuzz/fuzz_json.c"
#undef same
#undef write_value
#undef LLVMFuzzerTestOneInput
/* The query harness drives `hetsim query` itself; its source comes along. */
#include "cli/cmd_query.c"
#define LLVMFuzzerTestOneInput fuzz_query_one
#include "tests/fuzz/fuzz_query.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_import_one
#include "tests/fuzz/fuzz_import.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_sim_one
#include "tests/fuzz/fuzz_sim.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_curves_one
#include "tests/fuzz/fuzz_curves.c"
#undef LLVMFuzzerTestOneInput

typedef int one_fn(const uint8_t *data, size_t size);

/* Feeds each regular file of SOURCE/dir to fn; returns how many, or -1 if the folder is
 * missing. */
static int replay_dir(const char *dir, one_fn *fn) {
  const char *src = getenv("HETSIM_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", src ? src : ".", dir);
  DIR *dp = opendir(path);
  if (!dp) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dp)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char file[1536];
    snprintf(file, sizeof file, "%s/%s", path, e->d_name);
    FILE *f = fopen(file, "rb");
    if (!f) continue;
    uint8_t *buf = malloc(1 << 20);
    size_t len = buf ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    if (!buf) continue;
    /* Printed first, so that a trap names the input that caused it. */
    fprintf(stderr, "replay %s\n", file);
    fn(buf, len);
    free(buf);
    n++;
  }
  closedir(dp);
  return n;
}

static void replay(const char *target, one_fn *fn) {
  char dir[128];
  snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", target);
  int nc = replay_dir(dir, fn);
  snprintf(dir, sizeof dir, "tests/fuzz/regress/%s", target);
  int nr = replay_dir(dir, fn);
  ASSERT(nc > 0); /* the committed corpus is there */
  ASSERT(nr != 0); /* a regress folder, when present, holds inputs */
}

static void test_cluster_yaml(void) { replay("cluster_yaml", fuzz_cluster_yaml_one); }
static void test_events_csv(void) { replay("events_csv", fuzz_events_csv_one); }
static void test_idx(void) { replay("idx", fuzz_idx_one); }
static void test_json(void) { replay("json", fuzz_json_one); }
static void test_sim(void) { replay("sim", fuzz_sim_one); }
static void test_curves(void) { replay("curves", fuzz_curves_one); }

static void test_import(void) {
  replay("import", fuzz_import_one);
  hs_store_close(fi_store); /* the harness keeps one store per process */
  fi_store = NULL;
}

static void test_query(void) {
  /* The harness sends stdout to /dev/null; put it back afterwards for the test report. */
  fflush(stdout);
  int saved = dup(STDOUT_FILENO);
  replay("query", fuzz_query_one);
  fflush(stdout);
  if (saved >= 0) {
    dup2(saved, STDOUT_FILENO);
    close(saved);
  }
}

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
      {"cluster_yaml", test_cluster_yaml},
      {"events_csv", test_events_csv},
      {"idx", test_idx},
      {"json", test_json},
      {"query", test_query},
      {"import", test_import},
      {"sim", test_sim},
      {"curves", test_curves},
      {NULL, NULL},
  };
  return hs_test_main("fuzz_regress", cases, argc, argv);
}
