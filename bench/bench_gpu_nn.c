/* bench_gpu_nn: training throughput of the cuda backend (images/s), for side-by-side runs with
 * bench/torch_resnet18.py on the same GPU.
 *
 *   bench_gpu_nn [--model resnet18] [--batch 256] [--steps 50] [--warmup 10]
 *                [--device cuda:0] [--graph] [--json]
 *
 * Each step is forward (batch statistics) + backward + SGD (lr 0.1, momentum 0.9, weight decay
 * 5e-4) on one synthetic CIFAR-shaped batch loaded once, so the figure is compute alone, as the
 * PyTorch script measures it. --graph captures the whole step as one CUDA graph and replays it.
 * Time runs between two CUDA events around the timed steps. Also reported, by the wall clock:
 * prepare_s, what hs_net_prepare takes at the batch (every convolution's cuDNN plans: what a
 * real run does before its clock starts), and first_step_s, the first step after it (always
 * run, as the first warm-up step, even with --warmup 0: lazy module loading and whatever else a
 * first step still pays). The math (HETSIM_CUDA_MATH: strict, the default, or fast;
 * docs/gpu.md) is part of the report. Exits 77 with "no GPU" where the
 * device cannot be opened (no GPU, no driver, no cuDNN), 2 on bad usage, 1 on a failure. */
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_cuda.h"
#include "nn/nn_net.h"

static int usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s [--model NAME] [--batch B] [--steps N] [--warmup N] [--device cuda:I]"
          " [--graph] [--json]\n",
          argv0);
  return 2;
}

static double wall(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int step(hs_net *n, const hs_sgd *sgd, int graph, hs_diag *d) {
  if (graph) return hs_net_cuda_replay_step(n, d);
  int rc = hs_net_forward(n, 1, d);
  if (!rc) rc = hs_net_backward(n, d);
  if (!rc) rc = hs_net_update(n, sgd, d);
  return rc;
}

int main(int argc, char **argv) {
  const char *model = "resnet18", *device = "cuda:0";
  int batch = 256, steps = 50, warmup = 10, graph = 0, json = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--graph") == 0) graph = 1;
    else if (strcmp(a, "--json") == 0) json = 1;
    else if (v && strcmp(a, "--model") == 0) model = argv[++i];
    else if (v && strcmp(a, "--device") == 0) device = argv[++i];
    else if (v && strcmp(a, "--batch") == 0) batch = atoi(argv[++i]);
    else if (v && strcmp(a, "--steps") == 0) steps = atoi(argv[++i]);
    else if (v && strcmp(a, "--warmup") == 0) warmup = atoi(argv[++i]);
    else return usage(argv[0]);
  }
  if (batch < 1 || steps < 1 || warmup < 0) return usage(argv[0]);

  hs_diag d = {0};
  hs_net_options o = {.seed = 1, .max_batch = batch};
  hs_net *n = NULL;
  int rc = hs_net_open(&n, device, model, &o, &d);
  if (rc == HS_EUNSUPPORTED) {
    printf("no GPU: %s\n", d.msg);
    return 77;
  }
  if (rc) {
    fprintf(stderr, "bench_gpu_nn: %s\n", d.msg);
    return hs_exit_code(rc);
  }

  int c, h, w;
  hs_net_input_shape(n, &c, &h, &w);
  size_t elems = (size_t)batch * (size_t)(c * h * w);
  float *x = malloc(elems * sizeof *x);
  int32_t *y = malloc((size_t)batch * sizeof *y);
  if (!x || !y) {
    fprintf(stderr, "bench_gpu_nn: out of host memory\n");
    rc = HS_ENOMEM;
    goto out;
  }
  uint64_t s = 12345;
  for (size_t i = 0; i < elems; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
  for (int i = 0; i < batch; i++) y[i] = i % hs_net_classes(n);

  const hs_sgd sgd = {.lr = 0.1, .momentum = 0.9, .weight_decay = 5e-4};
  double seconds = 0.0, loss = 0.0, prepare_s = 0.0, first_step_s = 0.0;
  double t = wall();
  rc = hs_net_prepare(n, batch, &d);
  prepare_s = wall() - t;
  if (!rc) rc = hs_net_load(n, x, y, batch, &d);
  t = wall();
  if (!rc) rc = step(n, &sgd, 0, &d);
  if (!rc) rc = hs_net_sync(n, &d);
  first_step_s = wall() - t;
  /* Warm-up: the workspaces settle, clocks ramp up; a capture needs the plans first as well. */
  for (int i = 1; i < warmup && !rc; i++) rc = step(n, &sgd, 0, &d);
  if (!rc && graph) rc = hs_net_cuda_capture_step(n, &sgd, &d);
  if (!rc && graph) rc = step(n, &sgd, 1, &d); /* first launch uploads the graph */
  if (!rc) rc = hs_net_sync(n, &d);
  if (!rc) rc = hs_net_mark(n, 0, &d);
  for (int i = 0; i < steps && !rc; i++) rc = step(n, &sgd, graph, &d);
  if (!rc) rc = hs_net_mark(n, 1, &d);
  if (!rc) rc = hs_net_elapsed(n, 0, 1, &seconds, &d);
  if (!rc) rc = hs_net_result(n, &loss, NULL, &d);
  if (rc) {
    fprintf(stderr, "bench_gpu_nn: %s\n", d.msg);
    goto out;
  }
  double ips = (double)batch * steps / seconds;
  const char *math = hs_net_cuda_math(n); /* as the net read HETSIM_CUDA_MATH when it opened */
  if (json)
    printf("{\"model\": \"%s\", \"device\": \"%s\", \"batch\": %d, \"steps\": %d, \"math\": \"%s\", "
           "\"graph\": %s, \"step_s\": %.6g, \"images_per_s\": %.6g, \"loss\": %.6g, \"bytes\": %lld, "
           "\"prepare_s\": %.6g, \"first_step_s\": %.6g}\n",
           model, device, batch, steps, math, graph ? "true" : "false", seconds / steps, ips,
           loss, (long long)hs_net_bytes(n), prepare_s, first_step_s);
  else
    printf("%s on %s, batch %d, %d steps, math %s%s: %.3f ms/step, %.1f images/s (loss %.4f, %.2f GiB; "
           "prepare %.1f ms, first step %.1f ms)\n",
           model, device, batch, steps, math, graph ? " (CUDA graph)" : "",
           1e3 * seconds / steps, ips, loss, (double)hs_net_bytes(n) / (double)(1 << 30), 1e3 * prepare_s,
           1e3 * first_step_s);
out:
  free(x);
  free(y);
  hs_net_close(n);
  return hs_exit_code(rc);
}
