/* The cuda compute backend (nn/nn_cuda.c) against the cpu backend: the same model, seed and
 * batch must give the same loss, the same gradients and the same parameters after a few SGD
 * steps, to fp32 round-off. Needs a GPU: exits 77 (skipped) where "cuda:0" cannot be opened.
 *
 * Under strict math (the default: full fp32, deterministic engines) nothing else asks the
 * libraries for fp32: NVIDIA_TF32_OVERRIDE=0 would turn TF32 off in cuDNN and cuBLAS whatever
 * the nets ask, and hide a strict net that lets TF32 in. Under HETSIM_CUDA_MATH=fast
 * (gpu-check.sh's agreement step) the test sets it, so that the fast engines other than TF32
 * (non-deterministic, FFT, Winograd) are compared. What remains differs only in summation order,
 * hence the relative tolerances below. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_backend.h"
#include "nn/nn_cuda.h"
#include "nn/nn_graph.h"
#include "nn/nn_net.h"
#include "tests/hs_test.h"

/* Relative L2 distance that summation order alone stays well under in fp32. */
#define GRAD_RTOL 2e-3
#define PARAM_RTOL 1e-4
#define LOSS_RTOL 1e-4

/* Deterministic test data: a 64-bit LCG (Knuth's MMIX constants). */
static double next_u(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*s >> 11) / 9007199254740992.0;
}

typedef struct batch_data {
  int n;
  float *x;
  int32_t *y;
} batch_data;

static int make_batch(const hs_net *net, int n, uint64_t seed, batch_data *b) {
  int c, h, w;
  hs_net_input_shape(net, &c, &h, &w);
  int64_t elems = (int64_t)n * c * h * w;
  b->n = n;
  b->x = malloc((size_t)elems * sizeof *b->x);
  b->y = malloc((size_t)n * sizeof *b->y);
  if (!b->x || !b->y) return -1;
  for (int64_t i = 0; i < elems; i++) b->x[i] = (float)(2.0 * next_u(&seed) - 1.0);
  for (int i = 0; i < n; i++) b->y[i] = (int32_t)(next_u(&seed) * hs_net_classes(net));
  return 0;
}

static void free_batch(batch_data *b) {
  free(b->x);
  free(b->y);
}

/* ||a - b|| / ||b|| over [lo, hi). */
static double rel_l2(const float *a, const float *b, int64_t lo, int64_t hi) {
  double num = 0.0, den = 0.0;
  for (int64_t i = lo; i < hi; i++) {
    double e = (double)a[i] - (double)b[i];
    num += e * e;
    den += (double)b[i] * (double)b[i];
  }
  return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* Compares two flat vectors layer by layer, naming the first layer that disagrees. */
static void compare_layers(const hs_net *n, const float *gpu, const float *cpu, double rtol,
                           const char *tag, const char *what) {
  int count = hs_graph_count(n->graph);
  for (int i = 0; i < count; i++) {
    if (n->param_off[i] < 0) continue;
    int64_t lo = n->param_off[i], hi = lo + hs_layer_params(hs_graph_layer(n->graph, i));
    double r = rel_l2(gpu, cpu, lo, hi);
    if (!(r <= rtol)) {
      HS_FAIL_AT("%s: %s of layer %d (%s) differ: relative L2 %.3g > %.3g", tag, what, i,
                 hs_layer_kind_name(hs_graph_layer(n->graph, i)->kind), r, rtol);
      return;
    }
  }
}

/* One training forward + backward on both nets; loss, top-1 and gradients must agree. */
static void step_and_compare(hs_net *gpu, hs_net *cpu, const batch_data *b, const char *tag) {
  hs_diag d = {0};
  double lg = NAN, lc = NAN;
  int cg = -1, cc = -1;
  int64_t np = hs_net_param_count(cpu);
  float *gg = malloc((size_t)np * sizeof *gg), *gc = malloc((size_t)np * sizeof *gc);
  ASSERT(gg && gc);
  if (!gg || !gc) goto out;
  hs_net *nets[2] = {gpu, cpu};
  for (int k = 0; k < 2; k++) {
    int rc = hs_net_load(nets[k], b->x, b->y, b->n, &d);
    if (!rc) rc = hs_net_forward(nets[k], 1, &d);
    if (!rc) rc = hs_net_backward(nets[k], &d);
    if (!rc) rc = hs_net_result(nets[k], k ? &lc : &lg, k ? &cc : &cg, &d);
    if (!rc) rc = hs_net_get_grads(nets[k], k ? gc : gg, &d);
    if (rc) {
      HS_FAIL_AT("%s: %s step: %s", tag, hs_net_device(nets[k]), d.msg);
      goto out;
    }
  }
  ASSERT_REL(lg, lc, LOSS_RTOL);
  /* A top-1 decision can flip only on logits equal to round-off; allow one such sample. */
  ASSERT(abs(cg - cc) <= 1);
  compare_layers(cpu, gg, gc, GRAD_RTOL, tag, "gradients");
out:
  free(gg);
  free(gc);
}

/* Opens model (or graph g when model is NULL) on both devices with one seed; 0 when both open. */
static int open_pair(const char *model, hs_graph *(*build)(void), const char *gpu_dev, int cap,
                     hs_net **gpu, hs_net **cpu) {
  hs_net_options o = {.seed = 7, .max_batch = cap, .threads = 1};
  hs_diag d = {0};
  int rc = model ? hs_net_open(cpu, "cpu", model, &o, &d)
                 : hs_net_open_graph(cpu, "cpu", build(), &o, &d);
  if (rc) {
    HS_FAIL_AT("cpu open: %s", d.msg);
    return rc;
  }
  rc = model ? hs_net_open(gpu, gpu_dev, model, &o, &d)
             : hs_net_open_graph(gpu, gpu_dev, build(), &o, &d);
  if (rc) {
    hs_net_close(*cpu);
    *cpu = NULL;
    if (rc != HS_EUNSUPPORTED) HS_FAIL_AT("%s open: %s", gpu_dev, d.msg);
    else printf("  (%s unavailable: %s)\n", gpu_dev, d.msg);
  }
  return rc;
}

/* Forward/backward agreement, then `steps` SGD steps at learning rate lr on both and the
 * parameters, the loss of a last training pass and an evaluation pass (running batchnorm
 * statistics) must agree. The nets hold batches of up to cap samples; they train on `batch`. */
static void agree_at(const char *model, hs_graph *(*build)(void), const char *gpu_dev, int cap,
                     int batch, int steps, double lr) {
  const char *tag = model ? model : "graph";
  hs_net *gpu = NULL, *cpu = NULL;
  if (open_pair(model, build, gpu_dev, cap, &gpu, &cpu)) return;
  batch_data b = {0};
  hs_diag d = {0};
  int64_t np = hs_net_param_count(cpu);
  float *pg = malloc((size_t)np * sizeof *pg), *pc = malloc((size_t)np * sizeof *pc);
  ASSERT_EQ(hs_net_param_count(gpu), np);
  if (!pg || !pc || make_batch(cpu, batch, 11, &b)) {
    HS_FAIL_AT("out of memory");
    goto out;
  }
  /* Same initial parameters: drawn on the host by the front end for both backends. */
  ASSERT_EQ(hs_net_get_params(gpu, pg, &d), 0);
  ASSERT_EQ(hs_net_get_params(cpu, pc, &d), 0);
  ASSERT(rel_l2(pg, pc, 0, np) == 0.0);

  step_and_compare(gpu, cpu, &b, tag);

  const hs_sgd sgd = {.lr = lr, .momentum = 0.9, .weight_decay = 5e-4};
  hs_net *nets[2] = {gpu, cpu};
  for (int s = 0; s < steps; s++) {
    for (int k = 0; k < 2; k++) {
      int rc = hs_net_forward(nets[k], 1, &d);
      if (!rc) rc = hs_net_backward(nets[k], &d);
      if (!rc) rc = hs_net_update(nets[k], &sgd, &d);
      if (rc) {
        HS_FAIL_AT("%s: %s sgd step %d: %s", tag, hs_net_device(nets[k]), s, d.msg);
        goto out;
      }
    }
  }
  ASSERT_EQ(hs_net_get_params(gpu, pg, &d), 0);
  ASSERT_EQ(hs_net_get_params(cpu, pc, &d), 0);
  compare_layers(cpu, pg, pc, PARAM_RTOL, tag, "parameters after SGD");

  double lg = NAN, lc = NAN;
  for (int k = 0; k < 2; k++) {
    int rc = hs_net_forward(nets[k], 0, &d);
    if (!rc) rc = hs_net_result(nets[k], k ? &lc : &lg, NULL, &d);
    if (rc) HS_FAIL_AT("%s: %s evaluation: %s", tag, hs_net_device(nets[k]), d.msg);
  }
  ASSERT_REL(lg, lc, 1e-3);
out:
  free(pg);
  free(pc);
  free_batch(&b);
  hs_net_close(gpu);
  hs_net_close(cpu);
}

static void agree(const char *model, hs_graph *(*build)(void), const char *gpu_dev, int batch,
                  int steps, double lr) {
  agree_at(model, build, gpu_dev, batch, batch, steps, lr);
}

static void test_mlp_agrees(void) { agree("mlp", NULL, "cuda:0", 32, 3, 0.05); }
/* An epoch's last batch is smaller than the others: 10 samples in nets made for 16. */
static void test_partial_batch_agrees(void) { agree_at("cnn", NULL, "cuda:0", 16, 10, 2, 0.05); }
static void test_cnn_agrees(void) { agree("cnn", NULL, "cuda:0", 16, 3, 0.05); }
/* At 0.05, resnet18 learns its 4 samples by heart in two steps (loss 2.43, 0.29, 0.005) and the
 * batchnorms of so small a batch turn round-off into differences of 1e-4 in the parameters: two
 * cpu nets whose inputs differ by 1e-6 differ by 1.7e-3 after one step. At 0.01 the emulated
 * cuda net (test_deviceless_gpu_nn) stays within 2e-7 of the cpu net after two steps. */
static void test_resnet18_agrees(void) { agree("resnet18", NULL, "cuda:0", 4, 2, 0.01); }

/* Every layer kind the zoo models leave out of the tests above: conv bias, ReLU6, a depthwise
 * conv, a residual add whose input has two readers, padded average and max pooling with
 * overlapping windows, global average pooling. */
static hs_graph *build_mixed(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  if (hs_graph_open(&g, "mixed", 3, 12, 12, &d)) return NULL;
  int c1 = hs_graph_conv2d(g, 0, 8, 3, 1, 1, 1, 1);
  int r = hs_graph_relu6(g, c1);
  int dw = hs_graph_conv2d(g, r, 8, 3, 1, 1, 8, 0);
  int bn = hs_graph_batchnorm2d(g, dw);
  int a = hs_graph_add(g, bn, r);
  int ap = hs_graph_avgpool2d(g, a, 3, 2, 1);
  int mp = hs_graph_maxpool2d(g, ap, 3, 2, 1);
  int c2 = hs_graph_conv2d(g, mp, 16, 1, 1, 0, 1, 1);
  int gp = hs_graph_global_avgpool(g, c2);
  int f = hs_graph_flatten(g, gp);
  hs_graph_linear(g, f, 10, 1);
  return g;
}

static void test_mixed_layers_agree(void) { agree(NULL, build_mixed, "cuda:0", 8, 3, 0.05); }

static void test_green_partition_agrees(void) { agree("cnn", NULL, "cuda:0/sm=16", 16, 2, 0.05); }

/* A captured step replays what an eager step computes. */
static void test_captured_step(void) {
  hs_net_options o = {.seed = 3, .max_batch = 16};
  hs_diag d = {0};
  hs_net *eager = NULL, *graph = NULL;
  batch_data b = {0};
  float *pe = NULL, *pr = NULL;
  if (hs_net_open(&eager, "cuda:0", "cnn", &o, &d) || hs_net_open(&graph, "cuda:0", "cnn", &o, &d)) {
    HS_FAIL_AT("open: %s", d.msg);
    goto out;
  }
  int64_t np = hs_net_param_count(eager);
  pe = malloc((size_t)np * sizeof *pe);
  pr = malloc((size_t)np * sizeof *pr);
  if (!pe || !pr || make_batch(eager, 16, 5, &b)) {
    HS_FAIL_AT("out of memory");
    goto out;
  }
  const hs_sgd sgd = {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-4};
  ASSERT_EQ(hs_net_load(eager, b.x, b.y, b.n, &d), 0);
  ASSERT_EQ(hs_net_load(graph, b.x, b.y, b.n, &d), 0);
  /* Replay before capture is refused. */
  ASSERT_EQ(hs_net_cuda_replay_step(graph, &d), HS_EINVAL);
  int rc = hs_net_cuda_capture_step(graph, &sgd, &d);
  if (rc) HS_FAIL_AT("capture: %s", d.msg);
  double le = NAN, lr = NAN;
  for (int s = 0; s < 3 && !rc; s++) {
    rc = hs_net_forward(eager, 1, &d);
    if (!rc) rc = hs_net_backward(eager, &d);
    if (!rc) rc = hs_net_update(eager, &sgd, &d);
    if (!rc) rc = hs_net_cuda_replay_step(graph, &d);
    if (rc) HS_FAIL_AT("step %d: %s", s, d.msg);
  }
  /* Both report the loss of their last step's forward pass. */
  ASSERT_EQ(hs_net_result(eager, &le, NULL, &d), 0);
  ASSERT_EQ(hs_net_result(graph, &lr, NULL, &d), 0);
  ASSERT_REL(lr, le, 1e-5);
  ASSERT_EQ(hs_net_get_params(eager, pe, &d), 0);
  ASSERT_EQ(hs_net_get_params(graph, pr, &d), 0);
  ASSERT(rel_l2(pr, pe, 0, np) <= 1e-5);
  /* A load of another batch size invalidates the capture. */
  ASSERT_EQ(hs_net_load(graph, b.x, b.y, 8, &d), 0);
  ASSERT_EQ(hs_net_cuda_replay_step(graph, &d), HS_EINVAL);
out:
  free(pe);
  free(pr);
  free_batch(&b);
  hs_net_close(eager);
  hs_net_close(graph);
}

/* Strict math gives the same bits run after run (docs/gpu.md): two training passes over one
 * batch, with no update between them, give bit-identical losses and gradients. A
 * non-deterministic engine (atomic adds in a varying order) would move some by an ulp. Fast math
 * allows such engines, so there the case only says so. */
static void test_strict_is_deterministic(void) {
  const char *math = getenv("HETSIM_CUDA_MATH");
  if (math && math[0] && strcmp(math, "strict")) {
    printf("  (HETSIM_CUDA_MATH=%s: fast math is not deterministic)\n", math);
    return;
  }
  hs_net_options o = {.seed = 4, .max_batch = 16};
  hs_diag d = {0};
  hs_net *n = NULL;
  batch_data b = {0};
  float *g[2] = {NULL, NULL};
  double loss[2] = {NAN, NAN};
  if (hs_net_open(&n, "cuda:0", "cnn", &o, &d)) {
    HS_FAIL_AT("open: %s", d.msg);
    return;
  }
  int64_t np = hs_net_param_count(n);
  g[0] = malloc((size_t)np * sizeof *g[0]);
  g[1] = malloc((size_t)np * sizeof *g[1]);
  if (!g[0] || !g[1] || make_batch(n, 16, 6, &b)) {
    HS_FAIL_AT("out of memory");
    goto out;
  }
  int rc = hs_net_load(n, b.x, b.y, b.n, &d);
  for (int k = 0; k < 2 && !rc; k++) {
    rc = hs_net_forward(n, 1, &d);
    if (!rc) rc = hs_net_backward(n, &d);
    if (!rc) rc = hs_net_result(n, &loss[k], NULL, &d);
    if (!rc) rc = hs_net_get_grads(n, g[k], &d);
  }
  if (rc) {
    HS_FAIL_AT("step: %s", d.msg);
    goto out;
  }
  ASSERT(memcmp(&loss[0], &loss[1], sizeof loss[0]) == 0);
  int64_t differ = 0;
  for (int64_t i = 0; i < np; i++) differ += memcmp(&g[0][i], &g[1][i], sizeof g[0][i]) != 0;
  if (differ) HS_FAIL_AT("%lld of %lld gradients differ between two passes", (long long)differ, (long long)np);
out:
  free(g[0]);
  free(g[1]);
  free_batch(&b);
  hs_net_close(n);
}

/* A batch that cannot fit is HS_ENOMEM, and the net still trains at the batch it held. */
static void test_out_of_memory_leaves_net_usable(void) {
  hs_net_options o = {.seed = 1, .max_batch = 4};
  hs_diag d = {0};
  hs_net *n = NULL;
  batch_data small = {0};
  if (hs_net_open(&n, "cuda:0", "resnet18", &o, &d)) {
    HS_FAIL_AT("open: %s", d.msg);
    return;
  }
  if (make_batch(n, 4, 9, &small)) {
    HS_FAIL_AT("out of memory");
    goto out;
  }
  /* 2^22 samples of resnet18 need about 2^22 x 16 MB of activations and their gradients (64
   * TB): no GPU holds that. The inputs would be read only once the buffers exist, so the small
   * batch's array serves; the labels are all checked first, so they must all be there. */
  const int huge = 1 << 22;
  int32_t *labels = calloc((size_t)huge, sizeof *labels);
  if (labels) ASSERT_EQ(hs_net_load(n, small.x, labels, huge, &d), HS_ENOMEM);
  free(labels);
  double loss = NAN;
  int rc = hs_net_load(n, small.x, small.y, 4, &d);
  if (!rc) rc = hs_net_forward(n, 1, &d);
  if (!rc) rc = hs_net_backward(n, &d);
  if (!rc) rc = hs_net_result(n, &loss, NULL, &d);
  if (rc) HS_FAIL_AT("after ENOMEM: %s", d.msg);
  ASSERT(isfinite(loss) && loss > 0.0);
out:
  free_batch(&small);
  hs_net_close(n);
}

/* Marks give non-negative, finite times between recorded events, and unrecorded slots fail. */
static void test_marks(void) {
  hs_net_options o = {.seed = 1, .max_batch = 8};
  hs_diag d = {0};
  hs_net *n = NULL;
  batch_data b = {0};
  if (hs_net_open(&n, "cuda:0", "mlp", &o, &d) || make_batch(n, 8, 2, &b)) {
    HS_FAIL_AT("open: %s", d.msg);
    goto out;
  }
  double s = -1.0;
  ASSERT_EQ(hs_net_elapsed(n, 0, 1, &s, &d), HS_EINVAL);
  ASSERT_EQ(hs_net_load(n, b.x, b.y, b.n, &d), 0);
  ASSERT_EQ(hs_net_mark(n, 0, &d), 0);
  ASSERT_EQ(hs_net_forward(n, 1, &d), 0);
  ASSERT_EQ(hs_net_mark(n, 1, &d), 0);
  ASSERT_EQ(hs_net_elapsed(n, 0, 1, &s, &d), 0);
  ASSERT(s >= 0.0 && isfinite(s));
  ASSERT(hs_net_bytes(n) > 3 * 4 * hs_net_param_count(n));
  ASSERT_STR(hs_net_backend(n), "cuda");
out:
  free_batch(&b);
  hs_net_close(n);
}

/* Prepare grows the buffers and builds the plans of a batch without a step: loading that batch
 * then allocates nothing, and a training step at it runs (resnet18: convolutions in every
 * direction, so every plan kind was built ahead). */
static void test_prepare(void) {
  hs_net_options o = {.seed = 2};
  hs_diag d = {0};
  hs_net *n = NULL;
  batch_data b = {0};
  if (hs_net_open(&n, "cuda:0", "resnet18", &o, &d) || make_batch(n, 8, 4, &b)) {
    HS_FAIL_AT("open: %s", d.msg);
    goto out;
  }
  int64_t before = hs_net_bytes(n);
  ASSERT_EQ(hs_net_prepare(n, 8, &d), 0);
  int64_t prepared = hs_net_bytes(n);
  ASSERT(prepared > before);
  ASSERT_EQ(hs_net_load(n, b.x, b.y, b.n, &d), 0);
  ASSERT_EQ(hs_net_forward(n, 1, &d), 0);
  ASSERT_EQ(hs_net_backward(n, &d), 0);
  double loss = NAN;
  ASSERT_EQ(hs_net_result(n, &loss, NULL, &d), 0);
  ASSERT(isfinite(loss));
  ASSERT_EQ(hs_net_bytes(n), prepared); /* nothing allocated by the step: not a plan's workspace */
out:
  free_batch(&b);
  hs_net_close(n);
}

static const hs_test_case cases[] = {
    {"mlp_agrees", test_mlp_agrees},
    {"cnn_agrees", test_cnn_agrees},
    {"partial_batch_agrees", test_partial_batch_agrees},
    {"resnet18_agrees", test_resnet18_agrees},
    {"mixed_layers_agree", test_mixed_layers_agree},
    {"green_partition_agrees", test_green_partition_agrees},
    {"captured_step", test_captured_step},
    {"strict_is_deterministic", test_strict_is_deterministic},
    {"out_of_memory_leaves_net_usable", test_out_of_memory_leaves_net_usable},
    {"marks", test_marks},
    {"prepare", test_prepare},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  /* Before the first CUDA call: cuDNN and cuBLAS read it when they start. */
  const char *math = getenv("HETSIM_CUDA_MATH");
  if (math && !strcmp(math, "fast")) setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
  else unsetenv("NVIDIA_TF32_OVERRIDE");
  hs_net_options o = {.seed = 1};
  hs_diag d = {0};
  hs_net *probe = NULL;
  int rc = hs_net_open(&probe, "cuda:0", "mlp", &o, &d);
  if (rc == HS_EUNSUPPORTED) {
    printf("skipped: %s\n", d.msg);
    return 77;
  }
  if (rc) {
    fprintf(stderr, "cuda:0: %s\n", d.msg);
    return 1;
  }
  hs_net_close(probe);
  return hs_test_main("gpu_nn", cases, argc, argv);
}
