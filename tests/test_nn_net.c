/* Tests for nn_net.h on the cpu backend: determinism, parameter layout and counts, SGD
 * arithmetic against a hand computation, forward passes against naive references, batchnorm
 * in training and evaluation mode, argument errors, batch growth and running out of memory,
 * and a short training run that must learn. Gradients are checked in test_nn_grad.c. */
#include <math.h>
#include <stdint.h>

#include "nn/nn_backend.h"
#include "nn/nn_net.h"
#include "nn/nn_zoo.h"
#include "tests/hs_test.h"

static double next_u(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*s >> 11) / 9007199254740992.0;
}

static void fill(float *x, int64_t n, double lo, double hi, uint64_t *s) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * next_u(s));
}

static hs_net *open_model(const char *model, uint64_t seed, int max_batch) {
  hs_net *n = NULL;
  hs_diag d = {0};
  hs_net_options o = {.seed = seed, .max_batch = max_batch, .threads = 1};
  int rc = hs_net_open(&n, "cpu", model, &o, &d);
  if (rc) HS_FAIL_AT("open %s: %s", model, d.msg);
  return n;
}

static hs_net *open_graph(hs_graph *g, uint64_t seed) {
  hs_net *n = NULL;
  hs_diag d = {0};
  hs_net_options o = {.seed = seed};
  int rc = hs_net_open_graph(&n, "cpu", g, &o, &d);
  if (rc) HS_FAIL_AT("open graph: %s", d.msg);
  return n;
}

/* One training step; returns the loss of its forward pass. */
static double train_step(hs_net *n, const float *x, const int32_t *y, int batch,
                         const hs_sgd *sgd) {
  hs_diag d = {0};
  double loss = NAN;
  if (hs_net_load(n, x, y, batch, &d) || hs_net_forward(n, 1, &d) ||
      hs_net_result(n, &loss, NULL, &d) || hs_net_backward(n, &d) ||
      hs_net_update(n, sgd, &d))
    HS_FAIL_AT("train step: %s", d.msg);
  return loss;
}

static double eval_loss(hs_net *n, const float *x, const int32_t *y, int batch, int train,
                        int *correct) {
  hs_diag d = {0};
  double loss = NAN;
  if (hs_net_load(n, x, y, batch, &d) || hs_net_forward(n, train, &d) ||
      hs_net_result(n, &loss, correct, &d))
    HS_FAIL_AT("forward: %s", d.msg);
  return loss;
}

/* Mean softmax cross-entropy of logits z (batch x k), in double. */
static double ref_loss(const double *z, const int32_t *y, int batch, int k) {
  double total = 0.0;
  for (int b = 0; b < batch; b++) {
    const double *zb = z + (int64_t)b * k;
    double mx = zb[0], s = 0.0;
    for (int i = 1; i < k; i++) mx = zb[i] > mx ? zb[i] : mx;
    for (int i = 0; i < k; i++) s += exp(zb[i] - mx);
    total += log(s) - (zb[y[b]] - mx);
  }
  return total / batch;
}

/* --- determinism and layout ---------------------------------------------------------------- */

static void test_determinism(void) {
  hs_net *a = open_model("cnn", 42, 0), *b = open_model("cnn", 42, 0);
  hs_net *c = open_model("cnn", 43, 0);
  if (!a || !b || !c) goto out;
  int64_t np = hs_net_param_count(a);
  ASSERT(memcmp(hs_net_params(a), hs_net_params(b), (size_t)np * sizeof(float)) == 0);
  ASSERT(memcmp(hs_net_params(a), hs_net_params(c), (size_t)np * sizeof(float)) != 0);
  enum { B = 8 };
  float x[B * 784];
  int32_t y[B];
  uint64_t s = 1;
  hs_sgd sgd = {.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4};
  for (int step = 0; step < 4; step++) {
    fill(x, B * 784, 0.0, 1.0, &s);
    for (int i = 0; i < B; i++) y[i] = (int32_t)(next_u(&s) * 10);
    double la = train_step(a, x, y, B, &sgd), lb = train_step(b, x, y, B, &sgd);
    ASSERT(la == lb);
    ASSERT(isfinite(la));
  }
  ASSERT(memcmp(hs_net_params(a), hs_net_params(b), (size_t)np * sizeof(float)) == 0);
out:
  hs_net_close(a);
  hs_net_close(b);
  hs_net_close(c);
}

/* Every zoo model opens, with the zoo's parameter count, class count and input shape, and a
 * layout that packs the layers' parameters back to back in layer order. */
static void test_zoo_models(void) {
  for (int i = 0; i < hs_zoo_count(); i++) {
    const hs_model_info *mi = hs_zoo_info(i);
    hs_net *n = open_model(mi->name, 1, 0);
    if (!n) continue;
    ASSERT_EQ(hs_net_param_count(n), hs_graph_params(n->graph));
    ASSERT_EQ(hs_net_classes(n), mi->classes);
    int c, h, w;
    hs_net_input_shape(n, &c, &h, &w);
    ASSERT_EQ(c, mi->in_c);
    ASSERT_EQ(h, mi->in_h);
    ASSERT_EQ(w, mi->in_w);
    ASSERT_STR(hs_net_backend(n), "cpu");
    ASSERT_STR(hs_net_device(n), "cpu");
    ASSERT_STR(hs_net_model(n), mi->name);
    int64_t off = 0;
    for (int j = 0; j < hs_graph_count(n->graph); j++) {
      int64_t p = hs_layer_params(hs_graph_layer(n->graph, j));
      ASSERT_EQ(n->param_off[j], p ? off : -1);
      off += p;
    }
    ASSERT(hs_net_bytes(n) >= 3 * 4 * hs_net_param_count(n));
    hs_net_close(n);
  }
}

/* PyTorch's default initialisation: conv/linear weights and biases within +-1/sqrt(fan_in)
 * and spread over it; batchnorm gamma 1, beta 0. */
static void test_init(void) {
  hs_net *n = open_model("mobilenetv2", 9, 0);
  if (!n) return;
  const float *p = hs_net_params(n);
  for (int j = 0; j < hs_graph_count(n->graph); j++) {
    const hs_layer *l = hs_graph_layer(n->graph, j);
    int64_t cnt = hs_layer_params(l), off = n->param_off[j];
    if (l->kind == HS_LAYER_BATCHNORM2D) {
      for (int k = 0; k < l->in_c; k++) {
        ASSERT(p[off + k] == 1.0f);
        ASSERT(p[off + l->in_c + k] == 0.0f);
      }
    } else if (cnt > 0) {
      double fan = l->kind == HS_LAYER_CONV2D ? (double)(l->in_c / l->groups) * l->kernel * l->kernel
                                              : (double)l->in_c;
      double bound = 1.0 / sqrt(fan), mx = 0.0;
      for (int64_t k = 0; k < cnt; k++) mx = fmax(mx, fabs(p[off + k]));
      ASSERT(mx <= bound);
      ASSERT(mx >= 0.9 * bound);
    }
  }
  hs_net_close(n);
}

/* --- SGD and the vectors ------------------------------------------------------------------- */

static void test_sgd_arithmetic(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_graph_open(&g, "tiny", 3, 1, 1, &d), 0);
  hs_graph_linear(g, 0, 2, 1);
  hs_net *n = open_graph(g, 1);
  if (!n) return;
  ASSERT_EQ(hs_net_param_count(n), 8);
  float w0[8] = {0.5f, -1.0f, 2.0f, 0.25f, 0.0f, -0.75f, 1.5f, -2.0f};
  float g1[8] = {0.1f, 0.2f, -0.3f, 0.4f, -0.5f, 0.6f, 0.0f, 1.0f};
  float g2[8] = {-0.2f, 0.1f, 0.3f, 0.0f, 0.5f, -0.6f, 0.7f, -1.0f};
  ASSERT_EQ(hs_net_set_params(n, w0, &d), 0);
  hs_sgd sgd = {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};
  double w[8], v[8] = {0};
  for (int k = 0; k < 8; k++) w[k] = w0[k];
  const float *grads[3] = {g1, g2, g1};
  for (int step = 0; step < 3; step++) {
    if (step == 2) { /* momentum restarts from 0 */
      ASSERT_EQ(hs_net_zero_momentum(n, &d), 0);
      for (int k = 0; k < 8; k++) v[k] = 0.0;
    }
    ASSERT_EQ(hs_net_set_grads(n, grads[step], &d), 0);
    ASSERT_EQ(hs_net_update(n, &sgd, &d), 0);
    for (int k = 0; k < 8; k++) {
      double gk = grads[step][k] + sgd.weight_decay * w[k];
      v[k] = sgd.momentum * v[k] + gk;
      w[k] -= sgd.lr * v[k];
    }
    float got[8];
    ASSERT_EQ(hs_net_get_params(n, got, &d), 0);
    for (int k = 0; k < 8; k++) ASSERT_NEAR(got[k], w[k], 1e-6);
  }
  /* the update reads the gradient, it does not consume it */
  float gg[8];
  ASSERT_EQ(hs_net_get_grads(n, gg, &d), 0);
  ASSERT(memcmp(gg, g1, sizeof gg) == 0);
  /* invalid settings, as torch.optim.SGD rejects them */
  hs_sgd bad = {.lr = -0.1, .momentum = 0.9};
  ASSERT_EQ(hs_net_update(n, &bad, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "lr");
  bad = (hs_sgd){.lr = NAN};
  ASSERT_EQ(hs_net_update(n, &bad, &d), HS_EINVAL);
  hs_net_close(n);
}

static void test_vectors_round_trip(void) {
  hs_net *n = open_model("mlp", 2, 0);
  if (!n) return;
  hs_diag d = {0};
  int64_t np = hs_net_param_count(n);
  float *a = malloc((size_t)np * sizeof *a), *b = malloc((size_t)np * sizeof *b);
  uint64_t s = 8;
  fill(a, np, -1.0, 1.0, &s);
  ASSERT_EQ(hs_net_set_params(n, a, &d), 0);
  ASSERT_EQ(hs_net_get_params(n, b, &d), 0);
  ASSERT(memcmp(a, b, (size_t)np * sizeof *a) == 0);
  ASSERT(memcmp(a, hs_net_params(n), (size_t)np * sizeof *a) == 0);
  fill(a, np, -1.0, 1.0, &s);
  ASSERT_EQ(hs_net_set_grads(n, a, &d), 0);
  ASSERT_EQ(hs_net_get_grads(n, b, &d), 0);
  ASSERT(memcmp(a, b, (size_t)np * sizeof *a) == 0);
  ASSERT(memcmp(a, hs_net_grads(n), (size_t)np * sizeof *a) == 0);
  /* backward writes over the gradient, whatever was there */
  float x[2 * 784];
  int32_t y[2] = {1, 2};
  fill(x, 2 * 784, 0.0, 1.0, &s);
  ASSERT_EQ(hs_net_load(n, x, y, 2, &d), 0);
  ASSERT_EQ(hs_net_forward(n, 1, &d), 0);
  ASSERT_EQ(hs_net_backward(n, &d), 0);
  ASSERT_EQ(hs_net_get_grads(n, a, &d), 0);
  fill(b, np, -5.0, 5.0, &s);
  ASSERT_EQ(hs_net_set_grads(n, b, &d), 0);
  ASSERT_EQ(hs_net_backward(n, &d), 0);
  ASSERT_EQ(hs_net_get_grads(n, b, &d), 0);
  ASSERT(memcmp(a, b, (size_t)np * sizeof *a) == 0);
  /* backward_into writes the same gradient over a caller's buffer, and may run again */
  for (int rep = 0; rep < 2; rep++) {
    fill(b, np, -5.0, 5.0, &s);
    ASSERT_EQ(hs_net_backward_into(n, b, &d), 0);
    ASSERT(memcmp(a, b, (size_t)np * sizeof *a) == 0);
  }
  ASSERT_EQ(hs_net_backward_into(n, NULL, &d), HS_EINVAL);
  ASSERT_EQ(hs_net_forward(n, 0, &d), 0);
  ASSERT_EQ(hs_net_backward_into(n, b, &d), HS_EINVAL); /* needs a training pass */
  ASSERT_EQ(hs_net_get_params(n, NULL, &d), HS_EINVAL);
  free(a);
  free(b);
  hs_net_close(n);
}

/* --- forward passes against naive references ----------------------------------------------- */

/* Naive NCHW convolution in double: weights [oc][ic/groups][k][k], then bias. */
static void ref_conv(const float *x, int b, int c, int h, int w, const float *p, int oc, int k,
                     int stride, int pad, int groups, int bias, double *y, int oh, int ow) {
  int cg = c / groups, ocg = oc / groups;
  for (int n = 0; n < b; n++)
    for (int o = 0; o < oc; o++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++) {
          double acc = bias ? p[(int64_t)oc * cg * k * k + o] : 0.0;
          for (int ci = 0; ci < cg; ci++)
            for (int ki = 0; ki < k; ki++)
              for (int kj = 0; kj < k; kj++) {
                int ih = i * stride - pad + ki, iw = j * stride - pad + kj;
                if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                int cin = (o / ocg) * cg + ci;
                acc += (double)p[((o * cg + ci) * k + ki) * k + kj] *
                       x[(((int64_t)n * c + cin) * h + ih) * w + iw];
              }
          y[(((int64_t)n * oc + o) * oh + i) * ow + j] = acc;
        }
}

static void check_conv(int c, int h, int oc, int k, int stride, int pad, int groups, int bias) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_graph_open(&g, "conv", c, h, h, &d), 0);
  int x = hs_graph_conv2d(g, 0, oc, k, stride, pad, groups, bias);
  hs_graph_flatten(g, x);
  const hs_layer *l = hs_graph_layer(g, 1);
  int oh = l->out_h;
  hs_net *n = open_graph(g, 4);
  if (!n) return;
  enum { B = 3 };
  int64_t in = (int64_t)B * c * h * h, classes = (int64_t)oc * oh * oh;
  float *xs = malloc((size_t)in * sizeof *xs);
  double *z = malloc((size_t)(B * classes) * sizeof *z);
  int32_t y[B];
  uint64_t s = 17;
  fill(xs, in, -1.0, 1.0, &s);
  for (int b = 0; b < B; b++) y[b] = (int32_t)(next_u(&s) * (double)classes);
  ref_conv(xs, B, c, h, h, hs_net_params(n), oc, k, stride, pad, groups, bias, z, oh, oh);
  double got = eval_loss(n, xs, y, B, 1, NULL);
  double want = ref_loss(z, y, B, (int)classes);
  if (!(fabs(got - want) <= 1e-5 * fabs(want)))
    HS_FAIL_AT("conv c%d h%d oc%d k%d s%d p%d g%d b%d: loss %.9g, reference %.9g", c, h, oc, k,
               stride, pad, groups, bias, got, want);
  free(xs);
  free(z);
  hs_net_close(n);
}

static void test_conv_forward(void) {
  check_conv(3, 7, 4, 3, 1, 1, 1, 1);  /* padded, bias */
  check_conv(4, 7, 6, 3, 2, 1, 2, 0);  /* stride 2, grouped, no bias */
  check_conv(4, 6, 4, 3, 2, 1, 4, 1);  /* depthwise, stride 2 */
  check_conv(2, 5, 6, 3, 1, 2, 2, 1);  /* depthwise, multiplier 3, wide padding */
  check_conv(4, 5, 6, 1, 1, 0, 2, 1);  /* 1x1 grouped */
  check_conv(2, 9, 3, 5, 3, 2, 1, 1);  /* stride 3 */
}

/* Pooling against hand-made references: max pooling ignores padding, average pooling counts it
 * in the divisor (count_include_pad). */
static void check_pool(int kind, int c, int h, int k, int stride, int pad) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_graph_open(&g, "pool", c, h, h, &d), 0);
  int x = kind ? hs_graph_avgpool2d(g, 0, k, stride, pad) : hs_graph_maxpool2d(g, 0, k, stride, pad);
  hs_graph_flatten(g, x);
  int oh = hs_graph_layer(g, 1)->out_h;
  hs_net *n = open_graph(g, 4);
  if (!n) return;
  enum { B = 2 };
  int classes = c * oh * oh;
  float xs[B * 3 * 9 * 9];
  double z[B * 3 * 9 * 9];
  int32_t y[B] = {1, (int32_t)(classes - 1)};
  uint64_t s = 23;
  fill(xs, B * c * h * h, -3.0, 3.0, &s);
  for (int b = 0; b < B; b++)
    for (int ch = 0; ch < c; ch++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < oh; j++) {
          double acc = kind ? 0.0 : -INFINITY;
          for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
              int ih = i * stride - pad + ki, iw = j * stride - pad + kj;
              if (ih < 0 || ih >= h || iw < 0 || iw >= h) continue;
              double v = xs[((b * c + ch) * h + ih) * h + iw];
              acc = kind ? acc + v : fmax(acc, v);
            }
          z[((b * c + ch) * oh + i) * oh + j] = kind ? acc / (k * k) : acc;
        }
  double got = eval_loss(n, xs, y, B, 0, NULL), want = ref_loss(z, y, B, classes);
  if (!(fabs(got - want) <= 1e-5 * fabs(want)))
    HS_FAIL_AT("%s k%d s%d p%d: loss %.9g, reference %.9g", kind ? "avgpool" : "maxpool", k,
               stride, pad, got, want);
  hs_net_close(n);
}

static void test_pool_forward(void) {
  check_pool(0, 3, 7, 3, 2, 1);
  check_pool(0, 2, 8, 2, 2, 0);
  check_pool(1, 3, 7, 3, 2, 1);
  check_pool(1, 2, 9, 2, 1, 1);
}

/* Batchnorm by hand on two samples of two channels: training normalises with the batch
 * statistics and moves the running ones (momentum 0.1, unbiased variance); evaluation uses
 * the running ones and leaves them alone. */
static void test_batchnorm_modes(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_graph_open(&g, "bn", 2, 1, 1, &d), 0);
  hs_graph_flatten(g, hs_graph_batchnorm2d(g, 0));
  hs_net *n = open_graph(g, 1);
  if (!n) return;
  float x[4] = {1.0f, 2.0f, 3.0f, 6.0f}; /* channel 0: 1, 3; channel 1: 2, 6 */
  int32_t y[2] = {0, 1};
  const double eps = 1e-5;
  /* training: batch mean (2, 4), biased variance (1, 4) */
  double a = 1.0 / sqrt(1.0 + eps), b = 2.0 / sqrt(4.0 + eps);
  double zt[4] = {-a, -b, a, b};
  double lt = eval_loss(n, x, y, 2, 1, NULL);
  ASSERT_NEAR(lt, ref_loss(zt, y, 2, 2), 1e-6);
  /* running mean 0.1 * (2, 4); running variance 0.9 + 0.1 * unbiased (2, 8) */
  double rm[2] = {0.2, 0.4}, rv[2] = {1.1, 1.7};
  double ze[4];
  for (int s = 0; s < 2; s++)
    for (int c = 0; c < 2; c++) ze[s * 2 + c] = (x[s * 2 + c] - rm[c]) / sqrt(rv[c] + eps);
  int correct = -1;
  double le = eval_loss(n, x, y, 2, 0, &correct);
  ASSERT_NEAR(le, ref_loss(ze, y, 2, 2), 1e-6);
  ASSERT_EQ(correct, 1); /* both samples' largest logit is channel 1; the labels are 0, 1 */
  ASSERT(fabs(le - lt) > 0.1);
  ASSERT(eval_loss(n, x, y, 2, 0, NULL) == le); /* evaluation leaves the statistics */
  /* backward needs a training pass */
  ASSERT_EQ(hs_net_backward(n, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "training forward");
  /* one value per channel cannot be normalised in training, as in PyTorch */
  ASSERT_EQ(hs_net_load(n, x, y, 1, &d), 0);
  ASSERT_EQ(hs_net_forward(n, 1, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "more than one value");
  ASSERT_EQ(hs_net_forward(n, 0, &d), 0);
  hs_net_close(n);
}

/* --- errors -------------------------------------------------------------------------------- */

static void test_bad_device(void) {
  static const char *bad[] = {"gpu", "cuda", "cuda:", "cuda:x", "cuda:-1", "cuda:0/sm=0",
                              "cuda:0/sm=", "cuda:0/", "cpu:0", "CPU", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    static char sentinel;
    hs_net *n = (hs_net *)(void *)&sentinel; /* must come back NULL */
    hs_diag d = {0};
    ASSERT_EQ(hs_net_open(&n, bad[i], "mlp", NULL, &d), HS_EINVAL);
    ASSERT(n == NULL);
    ASSERT_CONTAINS(d.msg, "expected \"cpu\", \"cuda:I\" or \"cuda:I/sm=N\"");
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
    ASSERT_CONTAINS(d.msg, quoted);
  }
  /* a well-formed cuda device: either a cuda net or a clear "not supported" */
  hs_net *n = NULL;
  hs_diag d = {0};
  int rc = hs_net_open(&n, "cuda:0/sm=16", "mlp", NULL, &d);
  if (rc == 0) {
    ASSERT_STR(hs_net_backend(n), "cuda");
    hs_net_close(n);
  } else {
    ASSERT_EQ(rc, HS_EUNSUPPORTED);
    ASSERT_CONTAINS(d.msg, "cuda:0/sm=16");
  }
  ASSERT_EQ(hs_net_open(&n, "cpu", "lenet", NULL, &d), HS_ENOTFOUND);
  ASSERT_CONTAINS(d.msg, "mlp");
  hs_net_options o = {.threads = -1};
  ASSERT_EQ(hs_net_open(&n, "cpu", "mlp", &o, &d), HS_EINVAL);
  /* The bound on a cuda net's waits: a negative, NaN or over-long one is refused for every
   * device, so that a script's mistake shows on the cpu too. */
  const double bad_wait[] = {-1.0, NAN, HS_NET_WAIT_MAX_S * 2};
  for (int i = 0; i < 3; i++) {
    o = (hs_net_options){.wait_s = bad_wait[i]};
    ASSERT_EQ(hs_net_open(&n, "cpu", "mlp", &o, &d), HS_EINVAL);
    ASSERT_CONTAINS(d.msg, "wait_s");
  }
  o = (hs_net_options){.wait_s = 0.5};
  ASSERT_EQ(hs_net_open(&n, "cpu", "mlp", &o, &d), 0);
  hs_net_close(n);
}

static void test_bad_calls(void) {
  hs_net *n = open_model("mlp", 1, 0);
  if (!n) return;
  hs_diag d = {0};
  float x[3 * 784] = {0};
  int32_t y[3] = {0, 10, 1};
  ASSERT_EQ(hs_net_forward(n, 1, &d), HS_EINVAL); /* nothing loaded */
  ASSERT_CONTAINS(d.msg, "no batch loaded");
  ASSERT_EQ(hs_net_load(n, x, y, 3, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "label of sample 1");
  ASSERT_CONTAINS(d.msg, "got 10");
  y[1] = -1;
  ASSERT_EQ(hs_net_load(n, x, y, 3, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "got -1");
  y[1] = 9;
  ASSERT_EQ(hs_net_load(n, x, y, 0, &d), HS_EINVAL);
  ASSERT_EQ(hs_net_load(n, NULL, y, 3, &d), HS_EINVAL);
  ASSERT_EQ(hs_net_load(n, x, y, 3, &d), 0);
  double loss;
  ASSERT_EQ(hs_net_result(n, &loss, NULL, &d), HS_EINVAL); /* no forward yet */
  ASSERT_EQ(hs_net_backward(n, &d), HS_EINVAL);
  ASSERT_EQ(hs_net_forward(n, 1, &d), 0);
  ASSERT_EQ(hs_net_result(n, &loss, NULL, &d), 0);
  ASSERT_NEAR(loss, log(10.0), 0.5);
  ASSERT_EQ(hs_net_mark(n, HS_NET_MARKS, &d), HS_EINVAL);
  ASSERT_EQ(hs_net_mark(n, -1, &d), HS_EINVAL);
  double t = -1.0;
  ASSERT_EQ(hs_net_elapsed(n, 0, 1, &t, &d), HS_EINVAL); /* never recorded */
  ASSERT_EQ(hs_net_mark(n, 0, &d), 0);
  ASSERT_EQ(hs_net_backward(n, &d), 0);
  ASSERT_EQ(hs_net_mark(n, 1, &d), 0);
  ASSERT_EQ(hs_net_sync(n, &d), 0);
  ASSERT_EQ(hs_net_elapsed(n, 0, 1, &t, &d), 0);
  ASSERT(t >= 0.0);
  hs_net_close(n);
  hs_net_close(NULL);
}

/* --- memory -------------------------------------------------------------------------------- */

static void test_batch_growth(void) {
  hs_net *n = open_model("cnn", 6, 0), *big = open_model("cnn", 6, 64);
  hs_diag d = {0};
  if (!n || !big) goto out;
  enum { B = 64 };
  float *x = malloc(B * 784 * sizeof *x);
  int32_t y[B];
  uint64_t s = 3;
  fill(x, B * 784, 0.0, 1.0, &s);
  for (int i = 0; i < B; i++) y[i] = i % 10;
  double l2 = eval_loss(n, x, y, 2, 1, NULL);
  int64_t bytes2 = hs_net_bytes(n);
  ASSERT(hs_net_bytes(big) > bytes2);
  double l64 = eval_loss(n, x, y, B, 1, NULL);
  ASSERT(hs_net_bytes(n) > bytes2);
  ASSERT(l64 == eval_loss(big, x, y, B, 1, NULL)); /* grown or allocated up front: same */
  ASSERT(l2 == eval_loss(n, x, y, 2, 1, NULL));   /* smaller batches still fit */
  /* prepare: the buffers of a batch without a step (the grown buffers drop the loaded batch, as
   * a larger load does), and loading the prepared batch then allocates nothing */
  hs_net *p = open_model("cnn", 6, 0);
  if (p) {
    ASSERT(l2 == eval_loss(p, x, y, 2, 1, NULL));
    ASSERT_EQ(hs_net_prepare(p, 0, &d), HS_EINVAL);
    ASSERT_CONTAINS(d.msg, "batch >= 1");
    ASSERT_EQ(hs_net_prepare(p, B, &d), 0);
    int64_t prepared = hs_net_bytes(p);
    ASSERT(prepared > bytes2);
    double again = NAN;
    ASSERT_EQ(hs_net_result(p, &again, NULL, &d), HS_EINVAL);
    ASSERT_EQ(hs_net_prepare(p, 2, &d), 0); /* smaller: nothing to do */
    ASSERT_EQ(hs_net_bytes(p), prepared);
    ASSERT(l64 == eval_loss(p, x, y, B, 1, NULL));
    ASSERT_EQ(hs_net_bytes(p), prepared);
    hs_net_close(p);
  }
  /* out of memory: a cap just above what the net holds refuses the next growth, and the net
   * goes on at the batches it had */
  hs_net *m = open_model("cnn", 6, 0);
  if (m) {
    ASSERT(l2 == eval_loss(m, x, y, 2, 1, NULL));
    int64_t held = hs_net_bytes(m);
    ASSERT_EQ(hs_net_cpu_set_limit(m, held + 1024, &d), 0);
    ASSERT_EQ(hs_net_load(m, x, y, B, &d), HS_ENOMEM);
    ASSERT_CONTAINS(d.msg, "batch of 64");
    ASSERT_EQ(hs_net_bytes(m), held);
    ASSERT(l2 == eval_loss(m, x, y, 2, 1, NULL));
    ASSERT_EQ(hs_net_backward(m, &d), 0);
    ASSERT_EQ(hs_net_cpu_set_limit(m, 0, &d), 0);
    ASSERT(l64 == eval_loss(m, x, y, B, 1, NULL));
    hs_net_close(m);
  }
  /* open with a batch that does not fit the cap of physical memory */
  hs_net *huge = NULL;
  hs_net_options o = {.max_batch = INT32_MAX};
  ASSERT_EQ(hs_net_open(&huge, "cpu", "cnn", &o, &d), HS_ENOMEM);
  ASSERT(huge == NULL);
  free(x);
out:
  hs_net_close(n);
  hs_net_close(big);
}

/* --- learning ------------------------------------------------------------------------------ */

/* mlp on ten noisy prototypes: the loss of the last steps falls below half the first. */
static void test_mlp_learns(void) {
  hs_net *n = open_model("mlp", 2024, 32);
  if (!n) return;
  enum { B = 32, D = 784, K = 10 };
  float *proto = malloc(K * D * sizeof *proto), *x = malloc(B * D * sizeof *x);
  int32_t y[B];
  uint64_t s = 11;
  fill(proto, K * D, 0.0, 1.0, &s);
  hs_sgd sgd = {.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4};
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 100; step++) {
    for (int b = 0; b < B; b++) {
      y[b] = (int32_t)(next_u(&s) * K);
      for (int i = 0; i < D; i++)
        x[b * D + i] = proto[y[b] * D + i] + (float)(next_u(&s) - 0.5);
    }
    double loss = train_step(n, x, y, B, &sgd);
    if (step == 0) first = loss;
    if (step >= 95) last += loss / 5;
  }
  printf("  mlp: loss %.4f at step 0, %.4f over steps 95-99\n", first, last);
  ASSERT(first > 1.5);
  ASSERT(last < 0.5 * first);
  int correct = 0;
  eval_loss(n, x, y, B, 0, &correct);
  ASSERT(correct >= B * 9 / 10);
  free(proto);
  free(x);
  hs_net_close(n);
}

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
    {"determinism", test_determinism},
    {"zoo_models", test_zoo_models},
    {"init", test_init},
    {"sgd_arithmetic", test_sgd_arithmetic},
    {"vectors_round_trip", test_vectors_round_trip},
    {"conv_forward", test_conv_forward},
    {"pool_forward", test_pool_forward},
    {"batchnorm_modes", test_batchnorm_modes},
    {"bad_device", test_bad_device},
    {"bad_calls", test_bad_calls},
    {"batch_growth", test_batch_growth},
    {"mlp_learns", test_mlp_learns},
    {NULL, NULL},
  };
  return hs_test_main("nn_net", cases, argc, argv);
}
