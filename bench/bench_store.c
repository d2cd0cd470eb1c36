/* bench_store: how fast the store takes step rows. Inserts 1,000,000 step rows (1,024 workers,
 * interleaved in time order as the simulator emits them: workers 0..N-1 of step 0, then step 1,
 * ...) into a fresh temporary database and prints rows/s and µs/row. That is what `hetsim sim`
 * stores for 1,024 workers and 1,000 iterations, and the goal is ~1.5 µs/row or less. It also
 * prints the process's CPU time (all threads: the store's writer and checkpoint threads run
 * during the insert), which says more than the wall time on a loaded machine.
 * Usage: bench_store [ROWS] [WORKERS]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/core_store.h"

static double tv_s(struct timeval tv) { return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec; }

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  long rows = argc > 1 ? atol(argv[1]) : 1000000;
  int workers = argc > 2 ? atoi(argv[2]) : 1024;
  if (rows <= 0 || workers <= 0) {
    fprintf(stderr, "usage: bench_store [ROWS] [WORKERS]\n");
    return 2;
  }
  const char *dir = getenv("TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/hetsim-bench-store-%ld.db", dir ? dir : "/tmp", (long)getpid());
  hs_diag d = {0};
  hs_store *s = NULL;
  if (hs_store_open(&s, path, 0, &d)) {
    fprintf(stderr, "bench_store: %s\n", d.msg);
    return 1;
  }
  hs_run_info info = {.kind = "sim", .policy = "ssgd", .params = "", .model = "resnet18",
                      .global_batch = 64, .seed = 1};
  int64_t run = 0;
  int rc = hs_store_run_begin(s, &info, &run, &d);
  double t0 = now_s();
  if (!rc) rc = hs_store_steps_begin(s, run, &d);
  for (long i = 0; i < rows && !rc; i++) {
    hs_step_row r = {.worker = (int32_t)(i % workers), .step = i / workers, .batch = 4,
                     .start_s = 0.01 * (double)i, .compute_end_s = 0.01 * (double)i + 0.004,
                     .comm_end_s = 0.01 * (double)i + 0.006, .wait_s = 0.001,
                     .model_version = i / workers, .staleness = 0,
                     .loss = (i % 10) ? NAN : 2.3};
    rc = hs_store_step_add(s, &r, &d);
  }
  if (!rc) rc = hs_store_steps_end(s, &d);
  double t1 = now_s();
  if (!rc) rc = hs_store_run_finish(s, run, "complete", NULL, NULL, &d);
  hs_store_close(s);
  double t2 = now_s();
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  if (rc) fprintf(stderr, "bench_store: %s\n", d.msg);
  else
    printf("bench_store: %ld step rows, %d workers: %.3f s insert (%.0f rows/s, %.3f us/row), "
           "%.3f s incl. finish+close; process CPU %.2f s user, %.2f s sys\n",
           rows, workers, t1 - t0, (double)rows / (t1 - t0), 1e6 * (t1 - t0) / (double)rows,
           t2 - t0, tv_s(ru.ru_utime), tv_s(ru.ru_stime));
  char aux[600];
  unlink(path);
  snprintf(aux, sizeof aux, "%s-wal", path);
  unlink(aux);
  snprintf(aux, sizeof aux, "%s-shm", path);
  unlink(aux);
  return rc ? 1 : 0;
}
