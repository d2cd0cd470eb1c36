/* Gradient checks of the cpu backend (nn/nn_cpu.c): the analytic gradients of backward against
 * double-sided finite differences of the training loss, for every layer kind of nn_graph.h.
 *
 * fp32 forward passes make the difference quotient noisy (about 1e-4 at the step used), so each
 * check compares with a tolerance relative to the gradient plus a small absolute floor, and
 * checks both single coordinates (the largest gradient of each layer and a few random ones) and
 * the derivative along a random direction through all of a layer's parameters, which sums many
 * coordinates and so tests them with a much better signal-to-noise ratio. */
#include <stdint.h>

#include "nn/nn_backend.h"
#include "nn/nn_net.h"
#include "tests/hs_test.h"

/* Deterministic test data: a 64-bit LCG (Knuth's MMIX constants). */
static double next_u(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*s >> 11) / 9007199254740992.0;
}

static void fill(float *x, int64_t n, double lo, double hi, uint64_t *s) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * next_u(s));
}

/* Training-mode loss at the current parameters. */
static double loss_now(hs_net *n) {
  hs_diag d = {0};
  double loss = NAN;
  if (hs_net_forward(n, 1, &d) || hs_net_result(n, &loss, NULL, &d))
    HS_FAIL_AT("forward: %s", d.msg);
  return loss;
}

typedef struct check_stats {
  int checks;   /* comparisons made */
  double worst; /* largest |fd - g| / (atol + rtol |g|) of the best step; <= 1 passes */
} check_stats;

#define FD_RTOL 3e-2
#define FD_ATOL 2e-4

/* Derivative of the loss along dir (cnt floats, applied at offset off of the parameters w) by
 * a central difference with step eps. */
static double fd_along(hs_net *n, const float *w, float *wp, int64_t np, int64_t off,
                       const double *dir, int64_t cnt, double eps) {
  hs_diag d = {0};
  double l[2];
  for (int k = 0; k < 2; k++) {
    memcpy(wp, w, (size_t)np * sizeof *wp);
    for (int64_t i = 0; i < cnt; i++)
      if (dir[i] != 0.0) wp[off + i] = (float)(w[off + i] + (k ? -eps : eps) * dir[i]);
    hs_net_set_params(n, wp, &d);
    l[k] = loss_now(n);
  }
  return (l[0] - l[1]) / (2 * eps);
}

/* Compares the analytic derivative an along dir with finite differences at three steps and
 * keeps the best: a ReLU or max-pool kink within one step of the point spoils that step only,
 * while a wrong gradient disagrees at every step. */
static void compare(hs_net *n, const float *w, float *wp, int64_t np, int layer,
                    const double *dir, int64_t cnt, double an, const char *tag,
                    const char *what, check_stats *st) {
  static const double steps[3] = {1e-2, 1e-3, 1e-4};
  double best = INFINITY, best_fd = NAN;
  for (int k = 0; k < 3 && best > 0.1; k++) {
    double fd = fd_along(n, w, wp, np, n->param_off[layer], dir, cnt, steps[k]);
    double ratio = fabs(fd - an) / (FD_ATOL + FD_RTOL * fabs(an));
    if (ratio < best) {
      best = ratio;
      best_fd = fd;
    }
  }
  st->checks++;
  if (best > st->worst) st->worst = best;
  if (!(best <= 1.0))
    HS_FAIL_AT("%s: layer %d (%s) %s: finite difference %.6g, backward %.6g", tag, layer,
               hs_layer_kind_name(hs_graph_layer(n->graph, layer)->kind), what, best_fd, an);
}

/* Loads the batch, runs forward and backward, and compares every parameter layer's gradient
 * with finite differences: its largest coordinate, three random ones, and a random unit
 * direction through all its parameters. Leaves the parameters as they were. */
static void grad_check(hs_net *n, const float *x, const int32_t *y, int batch, const char *tag,
                       check_stats *st) {
  hs_diag d = {0};
  int64_t np = hs_net_param_count(n);
  float *w = malloc((size_t)np * sizeof *w);
  float *g = malloc((size_t)np * sizeof *g);
  float *wp = malloc((size_t)np * sizeof *wp);
  double *dir = malloc((size_t)np * sizeof *dir);
  ASSERT(w && g && wp && dir);
  if (!w || !g || !wp || !dir) goto out;
  ASSERT_EQ(hs_net_load(n, x, y, batch, &d), 0);
  ASSERT_EQ(hs_net_forward(n, 1, &d), 0);
  ASSERT_EQ(hs_net_backward(n, &d), 0);
  ASSERT_EQ(hs_net_get_grads(n, g, &d), 0);
  ASSERT_EQ(hs_net_get_params(n, w, &d), 0);
  uint64_t s = 12345;
  for (int i = 0; i < hs_graph_count(n->graph); i++) {
    if (n->param_off[i] < 0) continue;
    int64_t off = n->param_off[i];
    int64_t cnt = hs_layer_params(hs_graph_layer(n->graph, i));
    int64_t picks[4] = {0};
    for (int64_t k = 1; k < cnt; k++)
      if (fabsf(g[off + k]) > fabsf(g[off + picks[0]])) picks[0] = k;
    for (int k = 1; k < 4; k++) picks[k] = (int64_t)(next_u(&s) * (double)cnt) % cnt;
    for (int k = 0; k < 4; k++) {
      char what[64];
      snprintf(what, sizeof what, "param %lld", (long long)picks[k]);
      memset(dir, 0, (size_t)cnt * sizeof *dir);
      dir[picks[k]] = 1.0;
      compare(n, w, wp, np, i, dir, cnt, g[off + picks[k]], tag, what, st);
    }
    double norm = 0.0, gv = 0.0;
    for (int64_t k = 0; k < cnt; k++) {
      dir[k] = next_u(&s) - 0.5;
      norm += dir[k] * dir[k];
    }
    norm = sqrt(norm);
    for (int64_t k = 0; k < cnt; k++) {
      dir[k] /= norm;
      gv += dir[k] * g[off + k];
    }
    compare(n, w, wp, np, i, dir, cnt, gv, tag, "random direction", st);
  }
  ASSERT_EQ(hs_net_set_params(n, w, &d), 0);
out:
  free(w);
  free(g);
  free(wp);
  free(dir);
}

/* One SGD step along the gradient lowers the loss of the same batch. */
static void check_descent(hs_net *n, const float *x, const int32_t *y, int batch,
                          const char *tag) {
  hs_diag d = {0};
  ASSERT_EQ(hs_net_load(n, x, y, batch, &d), 0);
  double before = loss_now(n);
  ASSERT_EQ(hs_net_backward(n, &d), 0);
  hs_sgd sgd = {.lr = 0.05, .momentum = 0.9, .weight_decay = 0.0};
  ASSERT_EQ(hs_net_update(n, &sgd, &d), 0);
  double after = loss_now(n);
  if (!(after < before)) HS_FAIL_AT("%s: loss %.6g before the step, %.6g after", tag, before, after);
}

/* Every layer kind in one small graph: conv with bias and padding, batchnorm, relu, conv with
 * stride 2 and no bias, relu6 (made to saturate by scaling that conv), grouped conv, depthwise
 * conv (with a channel multiplier of 2 and back), a 1x1 conv, residual add, max pool with
 * padding, average pool with padding, global average pool, add of a layer with itself, flatten
 * (as a view and with its own gradient buffer), linear with and without bias. */
static hs_graph *kitchen_sink(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  if (hs_graph_open(&g, "sink", 3, 8, 8, &d)) return NULL;
  int x = hs_graph_conv2d(g, 0, 4, 3, 1, 1, 1, 1);   /* 4x8x8 */
  x = hs_graph_batchnorm2d(g, x);
  x = hs_graph_relu(g, x);
  x = hs_graph_conv2d(g, x, 8, 3, 2, 1, 1, 0);       /* 8x4x4, stride 2, no bias */
  int r = hs_graph_relu6(g, x);
  x = hs_graph_conv2d(g, r, 8, 3, 1, 1, 2, 1);       /* grouped */
  x = hs_graph_conv2d(g, x, 16, 3, 1, 1, 8, 1);      /* depthwise, multiplier 2 */
  x = hs_graph_conv2d(g, x, 8, 1, 1, 0, 1, 0);       /* 1x1 */
  x = hs_graph_add(g, x, r);                         /* residual */
  x = hs_graph_maxpool2d(g, x, 3, 2, 1);             /* 8x2x2 */
  x = hs_graph_avgpool2d(g, x, 2, 1, 1);             /* 8x3x3, padding counted */
  int p = hs_graph_global_avgpool(g, x);             /* 8x1x1 */
  int twice = hs_graph_add(g, p, p);
  int f1 = hs_graph_flatten(g, p);                   /* p has two readers: own gradient */
  int f2 = hs_graph_flatten(g, twice);               /* a view */
  x = hs_graph_add(g, f1, f2);
  x = hs_graph_linear(g, x, 6, 1);
  x = hs_graph_relu(g, x);
  hs_graph_linear(g, x, 5, 0);
  if (hs_graph_status(g)) {
    HS_FAIL_AT("graph: %s", hs_graph_diag(g)->msg);
    hs_graph_close(g);
    return NULL;
  }
  return g;
}

static void test_kitchen_sink(void) {
  hs_graph *g = kitchen_sink();
  if (!g) return;
  hs_net *n = NULL;
  hs_diag d = {0};
  hs_net_options o = {.seed = 7};
  ASSERT_EQ(hs_net_open_graph(&n, "cpu", g, &o, &d), 0);
  if (!n) return;
  /* Scale the stride-2 conv (layer 4) so that some relu6 inputs pass 6. */
  int64_t np = hs_net_param_count(n);
  float *w = malloc((size_t)np * sizeof *w);
  hs_net_get_params(n, w, &d);
  for (int64_t k = 0; k < hs_layer_params(hs_graph_layer(n->graph, 4)); k++)
    w[n->param_off[4] + k] *= 12.0f;
  hs_net_set_params(n, w, &d);
  free(w);
  enum { B = 3 };
  float x[B * 3 * 8 * 8];
  int32_t y[B] = {0, 3, 4};
  uint64_t s = 99;
  fill(x, B * 3 * 8 * 8, -2.0, 2.0, &s);
  check_stats st = {0};
  grad_check(n, x, y, B, "sink batch 3", &st);
  /* batch 1: the per-sample conv path (no chunking, the 1x1 conv reads its input directly) */
  grad_check(n, x, y, 1, "sink batch 1", &st);
  printf("  sink: %d checks, worst %.3f of the tolerance\n", st.checks, st.worst);
  check_descent(n, x, y, B, "sink");
  hs_net_close(n);
}

/* One map read by many layers, so that every kind of backward also runs in the mode where it
 * adds its input gradient to what a later reader wrote (relu, relu6, max and average pooling,
 * global pooling, batchnorm, grouped, depthwise and 1x1 grouped convs, flatten, linear). */
static hs_graph *fan_out(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  if (hs_graph_open(&g, "fanout", 2, 4, 4, &d)) return NULL;
  int c = hs_graph_conv2d(g, 0, 4, 3, 1, 1, 1, 1);    /* 4x4x4 */
  int r1 = hs_graph_relu(g, c);                        /* c has two readers */
  int r2 = hs_graph_relu6(g, c);
  int s = hs_graph_add(g, r1, r2);                     /* s has many readers */
  int g1 = hs_graph_global_avgpool(g, s);              /* 4x1x1 */
  int t = hs_graph_maxpool2d(g, s, 2, 2, 0);           /* 4x2x2 */
  t = hs_graph_add(g, t, hs_graph_avgpool2d(g, s, 2, 2, 0));
  t = hs_graph_add(g, t, hs_graph_conv2d(g, s, 4, 3, 2, 1, 2, 1));
  t = hs_graph_add(g, t, hs_graph_conv2d(g, s, 4, 3, 2, 1, 4, 0));
  int u = hs_graph_conv2d(g, s, 4, 1, 1, 0, 2, 0);     /* 1x1 grouped */
  t = hs_graph_add(g, t, hs_graph_avgpool2d(g, u, 2, 2, 0));
  int b = hs_graph_batchnorm2d(g, s);
  t = hs_graph_add(g, t, hs_graph_maxpool2d(g, b, 2, 2, 0));
  int rr = hs_graph_relu(g, s);
  t = hs_graph_add(g, t, hs_graph_avgpool2d(g, rr, 2, 2, 0));
  int f1 = hs_graph_flatten(g, g1);                    /* g1 is read again below */
  int g2 = hs_graph_add(g, g1, g1);
  int f2 = hs_graph_flatten(g, g2);
  int l2 = hs_graph_linear(g, hs_graph_add(g, f1, f2), 5, 1);
  int f = hs_graph_flatten(g, t);                      /* 16, read by two linears */
  int l1 = hs_graph_linear(g, f, 5, 1);
  int l3 = hs_graph_linear(g, f, 5, 0);
  hs_graph_add(g, hs_graph_add(g, l1, l2), l3);
  if (hs_graph_status(g)) {
    HS_FAIL_AT("graph: %s", hs_graph_diag(g)->msg);
    hs_graph_close(g);
    return NULL;
  }
  return g;
}

static void test_fan_out(void) {
  hs_graph *g = fan_out();
  if (!g) return;
  hs_net *n = NULL;
  hs_diag d = {0};
  hs_net_options o = {.seed = 21};
  ASSERT_EQ(hs_net_open_graph(&n, "cpu", g, &o, &d), 0);
  if (!n) return;
  enum { B = 3 };
  float x[B * 2 * 4 * 4];
  int32_t y[B] = {1, 4, 2};
  uint64_t s = 31;
  fill(x, B * 2 * 4 * 4, -6.0, 6.0, &s); /* wide enough that relu6 saturates */
  check_stats st = {0};
  grad_check(n, x, y, B, "fanout batch 3", &st);
  grad_check(n, x, y, 1, "fanout batch 1", &st);
  printf("  fanout: %d checks, worst %.3f of the tolerance\n", st.checks, st.worst);
  check_descent(n, x, y, B, "fanout");
  hs_net_close(n);
}

/* A conv whose im2col splits a batch of 20 into chunks (of 14 samples with nn_cpu.c's 256 KiB
 * column target) and a 1x1 conv that takes the whole batch at once: the gradient of the batch
 * must be the mean of the single-sample gradients, which take the per-sample paths (no
 * batchnorm couples the samples). */
static void test_chunked_batch(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_graph_open(&g, "chunks", 4, 16, 16, &d), 0);
  int x = hs_graph_conv2d(g, 0, 8, 3, 1, 1, 2, 1); /* 18 x 256 columns per sample and group */
  x = hs_graph_relu(g, x);
  x = hs_graph_maxpool2d(g, x, 4, 4, 0);
  x = hs_graph_conv2d(g, x, 8, 1, 1, 0, 1, 1);
  x = hs_graph_relu(g, x);
  x = hs_graph_global_avgpool(g, x);
  x = hs_graph_flatten(g, x);
  hs_graph_linear(g, x, 10, 1);
  hs_net *n = NULL;
  hs_net_options o = {.seed = 5};
  ASSERT_EQ(hs_net_open_graph(&n, "cpu", g, &o, &d), 0);
  if (!n) return;
  enum { B = 20, IN = 4 * 16 * 16 };
  int64_t np = hs_net_param_count(n);
  float *x5 = malloc((size_t)B * IN * sizeof *x5);
  float *gb = malloc((size_t)np * sizeof *gb), *g1 = malloc((size_t)np * sizeof *g1);
  double *mean = calloc((size_t)np, sizeof *mean);
  int32_t y[B];
  uint64_t s = 77;
  for (int b = 0; b < B; b++) y[b] = (int32_t)(next_u(&s) * 10);
  ASSERT(x5 && gb && g1 && mean);
  if (!x5 || !gb || !g1 || !mean) goto out;
  fill(x5, (int64_t)B * IN, -1.0, 1.0, &s);
  for (int b = 0; b < B; b++) {
    ASSERT_EQ(hs_net_load(n, x5 + (int64_t)b * IN, y + b, 1, &d), 0);
    ASSERT_EQ(hs_net_forward(n, 1, &d), 0);
    ASSERT_EQ(hs_net_backward(n, &d), 0);
    ASSERT_EQ(hs_net_get_grads(n, g1, &d), 0);
    for (int64_t k = 0; k < np; k++) mean[k] += g1[k] / (double)B;
  }
  ASSERT_EQ(hs_net_load(n, x5, y, B, &d), 0);
  ASSERT_EQ(hs_net_forward(n, 1, &d), 0);
  ASSERT_EQ(hs_net_backward(n, &d), 0);
  ASSERT_EQ(hs_net_get_grads(n, gb, &d), 0);
  double worst = 0.0, scale = 0.0;
  for (int64_t k = 0; k < np; k++) {
    if (fabs(mean[k]) > scale) scale = fabs(mean[k]);
    if (fabs(gb[k] - mean[k]) > worst) worst = fabs(gb[k] - mean[k]);
  }
  ASSERT(scale > 0.0);
  ASSERT(worst <= 1e-5 * scale);
out:
  free(x5);
  free(gb);
  free(g1);
  free(mean);
  hs_net_close(n);
}

static void zoo_check(const char *model, int batch) {
  hs_net *n = NULL;
  hs_diag d = {0};
  hs_net_options o = {.seed = 3};
  ASSERT_EQ(hs_net_open(&n, "cpu", model, &o, &d), 0);
  if (!n) return;
  int c, h, w;
  hs_net_input_shape(n, &c, &h, &w);
  int64_t in = (int64_t)c * h * w * batch;
  float *x = malloc((size_t)in * sizeof *x);
  int32_t y[8];
  uint64_t s = 5;
  fill(x, in, 0.0, 1.0, &s);
  for (int b = 0; b < batch; b++) y[b] = (int32_t)((b * 7 + 3) % hs_net_classes(n));
  check_stats st = {0};
  grad_check(n, x, y, batch, model, &st);
  printf("  %s: %d checks, worst %.3f of the tolerance\n", model, st.checks, st.worst);
  check_descent(n, x, y, batch, model);
  free(x);
  hs_net_close(n);
}

static void test_mlp(void) { zoo_check("mlp", 4); }
static void test_cnn(void) { zoo_check("cnn", 2); }

/* A batchnorm right after the input, on 1x1 maps, checked at the batch where its statistics are
 * most sensitive (2 values per channel). */
static void test_batchnorm_small_batch(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_graph_open(&g, "bn", 4, 1, 1, &d), 0);
  int x = hs_graph_linear(g, 0, 6, 1);
  x = hs_graph_batchnorm2d(g, x);
  x = hs_graph_relu(g, x);
  hs_graph_linear(g, x, 3, 1);
  hs_net *n = NULL;
  hs_net_options o = {.seed = 11};
  ASSERT_EQ(hs_net_open_graph(&n, "cpu", g, &o, &d), 0);
  if (!n) return;
  float xs[2 * 4] = {0.3f, -1.2f, 0.8f, 0.1f, -0.5f, 0.9f, 0.2f, -0.7f};
  int32_t ys[2] = {2, 0};
  check_stats st = {0};
  grad_check(n, xs, ys, 2, "bn batch 2", &st);
  printf("  bn: %d checks, worst %.3f of the tolerance\n", st.checks, st.worst);
  hs_net_close(n);
}

/* Linear layers in every combination of batch- and feature-major input and output that
 * nn_cpu.c picks (a linear read by a ReLU and a linear, read through a non-in-place ReLU, fm -> fm,
 * fm -> bm logits, bm -> fm after an add), with in-place ReLU and ReLU6 on both layouts. */
static void test_dense_layouts(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_graph_open(&g, "dense", 1, 4, 4, &d), 0);
  int f = hs_graph_flatten(g, 0);
  int l1 = hs_graph_linear(g, f, 12, 1);             /* fm: read by a relu and a linear */
  int r = hs_graph_relu(g, l1);                      /* not in place: l1 has two readers */
  int l2 = hs_graph_linear(g, l1, 8, 0);             /* fm input, bm output (read by add) */
  int l3 = hs_graph_linear(g, r, 8, 1);
  int x = hs_graph_add(g, l2, l3);
  x = hs_graph_relu6(g, x);                          /* bm, not in place (input is an add) */
  x = hs_graph_linear(g, x, 8, 1);                   /* bm input, fm output */
  x = hs_graph_relu(g, x);                           /* in place, fm */
  x = hs_graph_linear(g, x, 6, 0);                   /* fm -> fm */
  x = hs_graph_relu6(g, x);                          /* in place, fm */
  hs_graph_linear(g, x, 5, 1);                       /* fm -> bm logits */
  hs_net *n = NULL;
  hs_net_options o = {.seed = 13};
  ASSERT_EQ(hs_net_open_graph(&n, "cpu", g, &o, &d), 0);
  if (!n) return;
  /* Scale the layer before the last relu6 so that some of its inputs pass 6. */
  int64_t np = hs_net_param_count(n);
  float *w = malloc((size_t)np * sizeof *w);
  hs_net_get_params(n, w, &d);
  int before6 = hs_graph_count(n->graph) - 3;
  for (int64_t k = 0; k < hs_layer_params(hs_graph_layer(n->graph, before6)); k++)
    w[n->param_off[before6] + k] *= 20.0f;
  hs_net_set_params(n, w, &d);
  free(w);
  enum { B = 5 };
  float xs[B * 16];
  int32_t ys[B] = {0, 4, 2, 1, 3};
  uint64_t s = 17;
  fill(xs, B * 16, -3.0, 3.0, &s);
  check_stats st = {0};
  grad_check(n, xs, ys, B, "dense batch 5", &st);
  grad_check(n, xs, ys, 1, "dense batch 1", &st);
  printf("  dense: %d checks, worst %.3f of the tolerance\n", st.checks, st.worst);
  check_descent(n, xs, ys, B, "dense");
  hs_net_close(n);
}

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
    {"kitchen_sink", test_kitchen_sink},
    {"fan_out", test_fan_out},
    {"chunked_batch", test_chunked_batch},
    {"mlp", test_mlp},
    {"cnn", test_cnn},
    {"batchnorm_small_batch", test_batchnorm_small_batch},
    {"dense_layouts", test_dense_layouts},
    {NULL, NULL},
  };
  return hs_test_main("nn_grad", cases, argc, argv);
}
