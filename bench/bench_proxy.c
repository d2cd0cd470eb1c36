/* bench_proxy: time one simulated worker step of the proxy convergence model (sim_proxy.c):
 * the worker's next batch of its Fashion-MNIST shard, its model loaded into the net (when the
 * net does not hold it already), forward, backward into the worker's gradient buffer, then an
 * all-reduce of gradients over the workers (begin + end: the weighted sum and one SGD update).
 * One core (OpenBLAS threads = 1).
 *
 *   bench_proxy [MODEL] [BATCH] [STEPS] [WORKERS]      defaults: mlp 128 200 4
 *
 * Prints ms per worker step (the target is <= 2 ms for mlp at batch 128), and the same for the
 * step alone (no all-reduce). Needs Fashion-MNIST; exits 77 without it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core_rng.h"
#include "nn/nn_blas.h"
#include "nn/nn_zoo.h"
#include "sim/sim_conv.h"

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }
/* CPU time of this process: on a shared machine, what one core really spent. */
static double cpu_s(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

int main(int argc, char **argv) {
  hs_blas_choose_core(argv);
  hs_gsl_init();
  const char *model = argc > 1 ? argv[1] : "mlp";
  int batch = argc > 2 ? atoi(argv[2]) : 128;
  int steps = argc > 3 ? atoi(argv[3]) : 200;
  int workers = argc > 4 ? atoi(argv[4]) : 4;
  if (batch < 1 || steps < 1 || workers < 1) {
    fprintf(stderr, "usage: bench_proxy [MODEL] [BATCH] [STEPS] [WORKERS]\n");
    return 2;
  }
  const hs_model_info *mi = hs_zoo_find(model);
  hs_diag d = {0};
  const hs_conv_model *m;
  hs_params p;
  if (!mi || hs_conv_parse("proxy:eval_samples=1000", model, NULL, &m, &p, &d)) {
    fprintf(stderr, "bench_proxy: %s\n", mi ? d.msg : "unknown model");
    return 2;
  }
  hs_conv_config c = {.model = model, .dataset_size = mi->dataset_train_size, .classes = mi->classes,
                      .global_batch = (int64_t)batch * workers, .n_workers = workers, .seed = 1,
                      .params = &p};
  void *st = calloc(1, m->state_size);
  int rc = st ? m->init(st, &c, &d) : HS_ENOMEM;
  if (rc) {
    fprintf(stderr, "bench_proxy: %s\n", d.msg);
    if (st) m->fini(st);
    free(st);
    return rc == HS_ENOTFOUND ? 77 : 1;
  }
  int *ws = malloc((size_t)workers * sizeof *ws);
  for (int w = 0; w < workers && !rc; w++) {
    ws[w] = w;
    rc = m->add_worker(st, w, &d);
  }
  double loss = 0, first = 0;
  /* Warm-up: the first steps grow the net's buffers. */
  for (int w = 0; w < workers && !rc; w++) rc = m->step(st, w, batch, &loss, &d);
  first = loss;
  double t0 = now_s(), c0 = cpu_s();
  for (int i = 0; i < steps && !rc; i++) rc = m->step(st, i % workers, batch, &loss, &d);
  double t_step = (now_s() - t0) / steps, c_step = (cpu_s() - c0) / steps;
  hs_conv_op op = {.kind = HS_OP_ALLREDUCE, .what = HS_COMM_GRAD, .worker = -1, .ws = ws, .n = workers};
  int rounds = steps / workers > 0 ? steps / workers : 1;
  t0 = now_s();
  c0 = cpu_s();
  for (int r = 0; r < rounds && !rc; r++) {
    for (int w = 0; w < workers && !rc; w++) rc = m->step(st, w, batch, &loss, &d);
    if (!rc) rc = m->begin(st, 0, &op, &d);
    if (!rc) rc = m->end(st, 0, 0, &d);
  }
  double t_round = (now_s() - t0) / ((double)rounds * workers);
  double c_round = (cpu_s() - c0) / ((double)rounds * workers);
  if (rc) fprintf(stderr, "bench_proxy: %s\n", d.msg);
  else
    printf("proxy %s batch %d, %d workers, one core (ms per worker step, wall / cpu):\n"
           "  step alone                  %.3f / %.3f\n"
           "  step + gradient all-reduce  %.3f / %.3f\n"
           "  loss %.3f -> %.3f over %d rounds\n",
           model, batch, workers, t_step * 1e3, c_step * 1e3, t_round * 1e3, c_round * 1e3, first,
           loss, rounds);
  m->fini(st);
  free(st);
  free(ws);
  return rc ? 1 : 0;
}
