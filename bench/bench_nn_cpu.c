/* bench_nn_cpu: one training step (load, forward, backward, SGD update) of the cpu backend on
 * one thread, for mlp and cnn at batches 32, 64 and 128, against this machine's single-thread
 * cblas_sgemm rate measured in the same run.
 *
 * FLOPs of a step are the zoo's training figure, 3 x forward FLOPs per sample
 * (hs_model_stats.train_flops_per_sample), times the batch. The backend does less than that
 * where it can (it skips the gradient of the input data, a third of mlp's first layer), so the
 * GFLOP/s figure is "zoo FLOPs per second", the rate the simulator's cost model assumes.
 *
 * Each configuration: 5 warm-up steps, then 7 blocks of steps, each block at least 0.1 s;
 * the median and the best block are printed. The sgemm reference is the best of 7 blocks of
 * 0.1 s of a 512x512x512 product, measured again right before each configuration because the
 * machine's load changes within a run; the header also gives the shape of mlp's first layer.
 *
 *   ./build/bench_nn_cpu            (or: ./build/bench_nn_cpu mlp 128 for one configuration)
 *
 * `bench_nn_cpu layouts [ROUNDS]` times instead the transposition layouts of mlp's two large
 * products at batch 128 (the forward product and the weight gradient of the 784 -> 256 layer),
 * the choice nn_cpu.c makes per product. The variants run interleaved, one after the other in
 * each of ROUNDS rounds (default 400), so that they meet the same load; for each it prints the
 * best time, the median, and the median over rounds of its time divided by the layout the
 * backend used before (batch-major activations) in the same round. CPU time of the thread. */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core_error.h"
#include "nn/nn_blas.h"
#include "nn/nn_net.h"
#include "nn/nn_zoo.h"

#define BLOCKS 7

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Best single-thread GFLOP/s of C = A B with A m x k and B k x n (row major). */
static double sgemm_rate(int m, int n, int k) {
  float *a = malloc((size_t)m * k * sizeof *a), *b = malloc((size_t)k * n * sizeof *b);
  float *c = malloc((size_t)m * n * sizeof *c);
  if (!a || !b || !c) {
    free(a);
    free(b);
    free(c);
    return 0.0;
  }
  for (int64_t i = 0; i < (int64_t)m * k; i++) a[i] = (float)(i % 7) * 0.1f;
  for (int64_t i = 0; i < (int64_t)k * n; i++) b[i] = (float)(i % 5) * 0.1f;
  double best = 0.0;
  for (int blk = 0; blk < BLOCKS; blk++) {
    int reps = 0;
    double t0 = now_s(), t;
    do {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c,
                  n);
      reps++;
      t = now_s() - t0;
    } while (t < 0.1);
    double rate = 2.0 * m * n * k * reps / t / 1e9;
    if (rate > best) best = rate;
  }
  free(a);
  free(b);
  free(c);
  return best;
}

static double thread_cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct layout_case {
  const char *name;
  int ta, tb, m, n, k; /* C [m x n] = op(A) op(B), row-major, tight leading dimensions */
  int ref;             /* index of the batch-major variant it is compared with */
} layout_case;

static int bench_layouts(int rounds) {
  static const layout_case cs[] = {
      {"forward  Y = X W^T     NT 128x256x784 (batch-major, before)", 0, 1, 128, 256, 784, 0},
      {"forward  Y^T = W X^T   NT 256x128x784 (feature-major, used)", 0, 1, 256, 128, 784, 0},
      {"forward  Y = X W^T     TT 128x256x784 (X stored transposed)", 1, 1, 128, 256, 784, 0},
      {"forward  Y^T = W X^T   NN 256x128x784 (X stored transposed)", 0, 0, 256, 128, 784, 0},
      {"gradient dW = dY^T X   TN 256x784x128 (batch-major, before)", 1, 0, 256, 784, 128, 4},
      {"gradient dW = dY^T X   NN 256x784x128 (dY^T stored, used)  ", 0, 0, 256, 784, 128, 4},
      {"gradient dW = dY^T X   TT 256x784x128 (X stored transposed)", 1, 1, 256, 784, 128, 4},
      {"gradient dW = dY^T X   NT 256x784x128 (both transposed)    ", 0, 1, 256, 784, 128, 4},
  };
  enum { NC = (int)(sizeof cs / sizeof cs[0]) };
  size_t big = (size_t)784 * 256;
  float *a = malloc(big * sizeof *a), *b = malloc(big * sizeof *b), *c = malloc(big * sizeof *c);
  double *t = malloc((size_t)rounds * NC * sizeof *t), *col = malloc((size_t)rounds * sizeof *col);
  if (!a || !b || !c || !t || !col) {
    free(a);
    free(b);
    free(c);
    free(t);
    free(col);
    fprintf(stderr, "bench_nn_cpu: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < big; i++) {
    a[i] = (float)(i % 7) * 0.1f - 0.3f;
    b[i] = (float)(i % 5) * 0.1f - 0.2f;
  }
  for (int r = 0; r < rounds; r++)
    for (int v = 0; v < NC; v++) {
      const layout_case *x = &cs[v];
      double t0 = thread_cpu_s();
      for (int rep = 0; rep < 2; rep++)
        cblas_sgemm(CblasRowMajor, x->ta ? CblasTrans : CblasNoTrans,
                    x->tb ? CblasTrans : CblasNoTrans, x->m, x->n, x->k, 1.0f, a,
                    x->ta ? x->m : x->k, b, x->tb ? x->k : x->n, 0.0f, c, x->n);
      t[r * NC + v] = (thread_cpu_s() - t0) / 2;
    }
  printf("# %d interleaved rounds, CPU time per product; ratio = median over rounds of the time "
         "over the batch-major variant's in the same round\n", rounds);
  printf("%-62s %9s %9s %9s %7s\n", "product", "best_ms", "GFLOP/s", "median_ms", "ratio");
  for (int v = 0; v < NC; v++) {
    const layout_case *x = &cs[v];
    double best = 1e30;
    for (int r = 0; r < rounds; r++) {
      col[r] = t[r * NC + v];
      if (col[r] < best) best = col[r];
    }
    qsort(col, (size_t)rounds, sizeof *col, cmp_double);
    double med = col[rounds / 2];
    for (int r = 0; r < rounds; r++) col[r] = t[r * NC + v] / t[r * NC + x->ref];
    qsort(col, (size_t)rounds, sizeof *col, cmp_double);
    printf("%-62s %9.3f %9.1f %9.3f %7.3f\n", x->name, best * 1e3,
           2.0 * x->m * x->n * x->k / best / 1e9, med * 1e3, col[rounds / 2]);
  }
  free(a);
  free(b);
  free(c);
  free(t);
  free(col);
  return 0;
}

/* Times one (model, batch); prints a table row with the ratio to the sgemm rate measured just
 * before it (the machine is shared: its load changes within a run). Returns 0 or an HS_E*
 * code. */
static int bench_model(const char *model, int batch, double *ms_out) {
  double ref_gflops = sgemm_rate(512, 512, 512);
  hs_diag d = {0};
  hs_model_stats st;
  int rc = hs_zoo_stats(model, &st, &d);
  hs_net *n = NULL;
  hs_net_options o = {.seed = 1, .max_batch = batch, .threads = 1};
  if (!rc) rc = hs_net_open(&n, "cpu", model, &o, &d);
  if (rc) {
    fprintf(stderr, "bench_nn_cpu: %s\n", d.msg);
    return rc;
  }
  int c, h, w;
  hs_net_input_shape(n, &c, &h, &w);
  int64_t in = (int64_t)batch * c * h * w;
  float *x = malloc((size_t)in * sizeof *x);
  int32_t *y = malloc((size_t)batch * sizeof *y);
  if (!x || !y) {
    free(x);
    free(y);
    hs_net_close(n);
    fprintf(stderr, "bench_nn_cpu: out of memory\n");
    return HS_ENOMEM;
  }
  for (int64_t i = 0; i < in; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
  for (int i = 0; i < batch; i++) y[i] = i % hs_net_classes(n);
  hs_sgd sgd = {.lr = 0.01, .momentum = 0.9, .weight_decay = 5e-4};
  double blocks[BLOCKS];
  for (int blk = -1; blk < BLOCKS && !rc; blk++) {
    int steps = 0;
    double t = 0.0;
    rc = hs_net_mark(n, 0, &d);
    while (!rc && (blk < 0 ? steps < 5 : t < 0.1)) {
      rc = hs_net_load(n, x, y, batch, &d);
      if (!rc) rc = hs_net_forward(n, 1, &d);
      if (!rc) rc = hs_net_backward(n, &d);
      if (!rc) rc = hs_net_update(n, &sgd, &d);
      if (!rc) rc = hs_net_mark(n, 1, &d);
      if (!rc) rc = hs_net_elapsed(n, 0, 1, &t, &d);
      steps++;
    }
    if (blk >= 0) blocks[blk] = t / steps;
  }
  if (rc) {
    fprintf(stderr, "bench_nn_cpu: %s\n", d.msg);
  } else {
    qsort(blocks, BLOCKS, sizeof blocks[0], cmp_double);
    double med = blocks[BLOCKS / 2], best = blocks[0];
    double flops = st.train_flops_per_sample * batch;
    double gf = flops / med / 1e9;
    printf("%-5s %5d %10.3f %10.3f %10.2f %10.2f %8.2f %9.1f\n", model, batch, med * 1e3,
           best * 1e3, gf, ref_gflops, gf / ref_gflops, batch / med);
    if (ms_out) *ms_out = med * 1e3;
  }
  free(x);
  free(y);
  hs_net_close(n);
  return rc;
}

int main(int argc, char **argv) {
  hs_blas_choose_core(argv);
  openblas_set_num_threads(1);
  if (argc >= 2 && strcmp(argv[1], "layouts") == 0) {
    int rounds = argc > 2 ? atoi(argv[2]) : 400;
    return bench_layouts(rounds > 0 ? rounds : 400);
  }
  double ref = sgemm_rate(512, 512, 512);
  double ref_mlp = sgemm_rate(128, 256, 784);
  printf("# single-thread cblas_sgemm: %.2f GFLOP/s at 512x512x512, %.2f GFLOP/s at "
         "128x256x784 (mlp's first layer, batch 128)\n", ref, ref_mlp);
  printf("# step = load + forward + backward + SGD update, 1 thread; FLOPs = zoo training "
         "FLOPs (3 x forward) x batch; ratio = step GFLOP/s / sgemm 512^3 GFLOP/s measured "
         "just before the row\n");
  printf("%-5s %5s %10s %10s %10s %10s %8s %9s\n", "model", "batch", "ms_median", "ms_best",
         "GFLOP/s", "sgemm", "ratio", "samples/s");
  if (ref <= 0.0) return 1;
  if (argc == 3) return bench_model(argv[1], atoi(argv[2]), NULL) ? 1 : 0;
  static const char *models[] = {"mlp", "cnn"};
  static const int batches[] = {32, 64, 128};
  double mlp128 = 0.0;
  for (int m = 0; m < 2; m++)
    for (int b = 0; b < 3; b++) {
      double ms = 0.0;
      if (bench_model(models[m], batches[b], &ms)) return 1;
      if (m == 0 && batches[b] == 128) mlp128 = ms;
    }
  printf("# mlp batch 128: %.3f ms per step (the proxy simulator needs <= 2 ms): %s\n", mlp128,
         mlp128 <= 2.0 ? "met" : "NOT met");
  return 0;
}
