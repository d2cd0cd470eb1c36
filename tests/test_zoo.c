/* Tests for nn_graph and nn_zoo: published parameter counts, hand-computed FLOPs, shapes and
 * shape-inference errors. */
#include "nn/nn_graph.h"
#include "nn/nn_zoo.h"
#include "tests/hs_test.h"

static int64_t params_of(const char *name) {
  hs_model_stats st;
  hs_diag d = {0};
  int rc = hs_zoo_stats(name, &st, &d);
  if (rc) {
    HS_FAIL_AT("hs_zoo_stats(%s): %s", name, d.msg);
    return -1;
  }
  return st.params;
}

/* The published figures: torchsummary / sum(p.numel()) on the reference PyTorch modules. */
static void test_params_mlp(void) { ASSERT_EQ(params_of("mlp"), 203530); }
static void test_params_cnn(void) { ASSERT_EQ(params_of("cnn"), 61706); }
static void test_params_resnet18(void) { ASSERT_EQ(params_of("resnet18"), 11173962); }
static void test_params_vgg16(void) { ASSERT_EQ(params_of("vgg16"), 14728266); }
static void test_params_mobilenetv2(void) { ASSERT_EQ(params_of("mobilenetv2"), 2296922); }

/* Every model builds, its first layer is the input of the table's shape, and the last gives
 * one logit per class. */
static void test_shapes(void) {
  ASSERT_EQ(hs_zoo_count(), 5);
  for (int i = 0; i < hs_zoo_count(); i++) {
    const hs_model_info *mi = hs_zoo_info(i);
    hs_graph *g = NULL;
    hs_diag d = {0};
    int rc = hs_zoo_build(mi->name, &g, &d);
    ASSERT_EQ(rc, 0);
    if (rc) continue;
    const hs_layer *in = hs_graph_layer(g, 0);
    ASSERT_EQ(in->kind, HS_LAYER_INPUT);
    ASSERT_EQ(in->out_c, mi->in_c);
    ASSERT_EQ(in->out_h, mi->in_h);
    ASSERT_EQ(in->out_w, mi->in_w);
    const hs_layer *last = hs_graph_layer(g, hs_graph_last(g));
    ASSERT_EQ(last->kind, HS_LAYER_LINEAR);
    ASSERT_EQ(last->out_c, mi->classes);
    ASSERT_EQ(last->out_h, 1);
    ASSERT_EQ(last->out_w, 1);
    /* Topological order: every input precedes its reader. */
    for (int j = 1; j < hs_graph_count(g); j++) {
      const hs_layer *l = hs_graph_layer(g, j);
      for (int k = 0; k < l->n_in; k++) ASSERT(l->in[k] >= 0 && l->in[k] < j);
    }
    hs_graph_close(g);
  }
  ASSERT(hs_zoo_info(-1) == NULL);
  ASSERT(hs_zoo_info(hs_zoo_count()) == NULL);
}

static void test_info(void) {
  const hs_model_info *mi = hs_zoo_find("cnn");
  ASSERT(mi != NULL);
  if (!mi) return;
  ASSERT_STR(mi->dataset, "fashion-mnist");
  ASSERT_EQ(mi->dataset_train_size, 60000);
  ASSERT_EQ(mi->dataset_test_size, 10000);
  mi = hs_zoo_find("resnet18");
  ASSERT(mi != NULL);
  if (!mi) return;
  ASSERT_STR(mi->dataset, "cifar10");
  ASSERT_EQ(mi->in_c, 3);
  ASSERT_EQ(mi->dataset_train_size, 50000);
  ASSERT(hs_zoo_find("resnet") == NULL);
  ASSERT(hs_zoo_find(NULL) == NULL);
}

/* Closed form: the two linear layers as multiply-adds, one add per bias, one op per ReLU. */
static void test_flops_mlp(void) {
  hs_model_stats st;
  hs_diag d = {0};
  ASSERT_EQ(hs_zoo_stats("mlp", &st, &d), 0);
  double want = 2.0 * (784 * 256 + 256 * 10) + (256 + 10) /* biases */ + 256 /* relu */;
  ASSERT_EQ(st.flops_per_sample, want); /* 407050 */
  ASSERT_EQ(st.train_flops_per_sample, 3 * want);
  ASSERT_EQ(st.grad_bytes, 4 * 203530);
  /* Kept outputs: linear 256, relu 256, linear 10 (flatten is a view). */
  ASSERT_EQ(st.act_bytes_per_sample, 4 * (256 + 256 + 10));
  ASSERT_EQ(st.layers, 4);
}

/* ResNet-18 on 32x32 is the well-known 0.556 G multiply-accumulates (ptflops: 0.56 GMac), so
 * about 1.11 GFLOPs with a multiply-add counted as 2; element-wise layers add about 1%. */
static void test_flops_resnet18(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_zoo_build("resnet18", &g, &d), 0);
  if (!g) return;
  ASSERT_REL((double)hs_graph_macs(g), 0.556e9, 0.05);
  ASSERT_REL(hs_graph_flops(g), 2 * 0.556e9, 0.05);
  ASSERT(hs_graph_flops(g) >= 2.0 * (double)hs_graph_macs(g));
  hs_graph_close(g);
}

/* LeNet conv1 by hand: 6 maps of 28x28, 25 multiply-adds each, plus the bias. */
static void test_flops_conv_layer(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_zoo_build("cnn", &g, &d), 0);
  if (!g) return;
  const hs_layer *c1 = hs_graph_layer(g, 1);
  ASSERT_EQ(c1->kind, HS_LAYER_CONV2D);
  ASSERT_EQ(hs_layer_macs(c1), 6 * 28 * 28 * 25);
  ASSERT_EQ(hs_layer_flops(c1), 2.0 * 6 * 28 * 28 * 25 + 6 * 28 * 28);
  ASSERT_EQ(hs_layer_params(c1), 6 * 25 + 6);
  ASSERT_EQ(hs_layer_act_bytes(c1), 4 * 6 * 28 * 28);
  hs_graph_close(g);
}

/* Depthwise conv: weights are out_c * (in_c / groups) * k * k; BN has gamma and beta only. */
static void test_depthwise_and_bn(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_graph_open(&g, "dw", 32, 8, 8, &d), 0);
  if (!g) return;
  int c = hs_graph_conv2d(g, 0, 32, 3, 2, 1, 32, 0);
  ASSERT_EQ(c, 1);
  int b = hs_graph_batchnorm2d(g, c);
  ASSERT_EQ(b, 2);
  ASSERT_EQ(hs_graph_status(g), 0);
  const hs_layer *l = hs_graph_layer(g, c);
  ASSERT_EQ(l->out_h, 4);
  ASSERT_EQ(l->out_w, 4);
  ASSERT_EQ(hs_layer_params(l), 32 * 9);
  ASSERT_EQ(hs_layer_macs(l), 32 * 4 * 4 * 9);
  ASSERT_EQ(hs_layer_params(hs_graph_layer(g, b)), 64);
  ASSERT_EQ(hs_graph_params(g), 32 * 9 + 64);
  hs_graph_close(g);
}

static void test_residual_add(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_graph_open(&g, "res", 4, 6, 6, &d), 0);
  if (!g) return;
  int y = hs_graph_conv2d(g, 0, 4, 3, 1, 1, 1, 0);
  int s = hs_graph_add(g, y, 0);
  ASSERT_EQ(s, 2);
  const hs_layer *l = hs_graph_layer(g, s);
  ASSERT_EQ(l->n_in, 2);
  ASSERT_EQ(l->in[0], y);
  ASSERT_EQ(l->in[1], 0);
  /* Shapes that differ cannot be added. */
  int z = hs_graph_conv2d(g, s, 8, 1, 1, 0, 1, 0);
  ASSERT_EQ(z, 3);
  int bad = hs_graph_add(g, z, s);
  ASSERT_EQ(bad, HS_EINVAL);
  ASSERT_CONTAINS(hs_graph_diag(g)->msg, "expected equal shapes");
  hs_graph_close(g);
}

static void test_unknown_model(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_zoo_build("resnet50", &g, &d), HS_ENOTFOUND);
  ASSERT(g == NULL);
  ASSERT_EQ(d.code, HS_ENOTFOUND);
  ASSERT_CONTAINS(d.msg, "resnet50");
  for (int i = 0; i < hs_zoo_count(); i++) ASSERT_CONTAINS(d.msg, hs_zoo_info(i)->name);
  hs_model_stats st;
  hs_diag_clear(&d);
  ASSERT_EQ(hs_zoo_stats("nope", &st, &d), HS_ENOTFOUND);
  ASSERT_CONTAINS(d.msg, "mobilenetv2");
}

/* A kernel larger than the padded input is an error, not a zero or negative shape; and the
 * error is sticky, so later builders fail too and append nothing. */
static void test_shape_errors(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_graph_open(&g, "tiny", 1, 4, 4, &d), 0);
  if (!g) return;
  int rc = hs_graph_conv2d(g, 0, 8, 7, 1, 1, 1, 1); /* 7 > 4 + 2 */
  ASSERT_EQ(rc, HS_EINVAL);
  ASSERT_EQ(hs_graph_status(g), HS_EINVAL);
  ASSERT_CONTAINS(hs_graph_diag(g)->msg, "tiny: layer 1 (conv2d)");
  ASSERT_CONTAINS(hs_graph_diag(g)->msg, "larger than the padded input 6x6");
  ASSERT_EQ(hs_graph_count(g), 1);
  ASSERT_EQ(hs_graph_relu(g, 0), HS_EINVAL); /* sticky */
  ASSERT_EQ(hs_graph_count(g), 1);
  hs_graph_close(g);

  /* Each of these fails on a fresh graph. */
  struct { int what; const char *msg; } cases[] = {
      {0, "groups"}, {1, "expected a vector"}, {2, "layer index"}, {3, "larger than"},
      {4, "out_channels"}, {5, "kernel > 0"}, {6, "more than half"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ASSERT_EQ(hs_graph_open(&g, "t", 3, 8, 8, &d), 0);
    if (!g) return;
    switch (cases[i].what) {
    case 0: rc = hs_graph_conv2d(g, 0, 8, 3, 1, 1, 2, 0); break; /* 3 % 2 != 0 */
    case 1: rc = hs_graph_linear(g, 0, 10, 1); break;           /* not flattened */
    case 2: rc = hs_graph_relu(g, 5); break;                    /* no such layer */
    case 3: rc = hs_graph_maxpool2d(g, 0, 16, 16, 0); break;
    case 4: rc = hs_graph_conv2d(g, 0, 0, 3, 1, 1, 1, 0); break;
    case 5: rc = hs_graph_conv2d(g, 0, 8, 3, 0, 1, 1, 0); break; /* stride 0 */
    default: rc = hs_graph_maxpool2d(g, 0, 2, 2, 2); break;
    }
    ASSERT_EQ(rc, HS_EINVAL);
    ASSERT_CONTAINS(hs_graph_diag(g)->msg, cases[i].msg);
    hs_graph_close(g);
  }

  ASSERT_EQ(hs_graph_open(&g, "neg", 0, 8, 8, &d), HS_EINVAL);
  ASSERT(g == NULL);
  ASSERT_CONTAINS(d.msg, "expected positive");
}

/* Many layers force the array to grow; indices and shapes survive the reallocation. */
static void test_growth(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_graph_open(&g, "deep", 2, 3, 3, &d), 0);
  if (!g) return;
  int x = 0;
  for (int i = 0; i < 1000; i++) x = hs_graph_relu(g, x);
  ASSERT_EQ(x, 1000);
  ASSERT_EQ(hs_graph_count(g), 1001);
  ASSERT_EQ(hs_graph_layer(g, 1000)->in[0], 999);
  ASSERT_EQ(hs_graph_act_bytes(g), 1000LL * 4 * 2 * 3 * 3);
  ASSERT(hs_graph_layer(g, 1001) == NULL);
  hs_graph_close(g);
}

/* The printout names each kind and ends with the totals. */
static void test_print(void) {
  hs_graph *g = NULL;
  hs_diag d = {0};
  ASSERT_EQ(hs_zoo_build("cnn", &g, &d), 0);
  if (!g) return;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ASSERT(f != NULL);
  if (f) {
    ASSERT_EQ(hs_graph_print(g, f), 0);
    fclose(f);
    ASSERT_CONTAINS(buf, "conv2d");
    ASSERT_CONTAINS(buf, "maxpool2d");
    ASSERT_CONTAINS(buf, "(16,5,5)");
    ASSERT_CONTAINS(buf, "61706 params");
    free(buf);
  }
  hs_graph_close(g);
}

static const hs_test_case cases[] = {
    {"params_mlp", test_params_mlp},
    {"params_cnn", test_params_cnn},
    {"params_resnet18", test_params_resnet18},
    {"params_vgg16", test_params_vgg16},
    {"params_mobilenetv2", test_params_mobilenetv2},
    {"shapes", test_shapes},
    {"info", test_info},
    {"flops_mlp", test_flops_mlp},
    {"flops_resnet18", test_flops_resnet18},
    {"flops_conv_layer", test_flops_conv_layer},
    {"depthwise_and_bn", test_depthwise_and_bn},
    {"residual_add", test_residual_add},
    {"unknown_model", test_unknown_model},
    {"shape_errors", test_shape_errors},
    {"growth", test_growth},
    {"print", test_print},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("zoo", cases, argc, argv); }
