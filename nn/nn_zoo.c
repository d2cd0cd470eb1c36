/* nn_zoo: the model table and one graph builder per model. See nn_zoo.h.
 *
 * Builders write straight-line code against the sticky-error graph API: a failed step makes
 * every later step fail with the same code, so each builder checks hs_graph_status once at
 * the end instead of after every layer. */
#include "nn/nn_zoo.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef int (*zoo_build_fn)(hs_graph *g);

typedef struct zoo_entry {
  hs_model_info info;
  zoo_build_fn build;
} zoo_entry;

/* --- mlp --------------------------------------------------------------------------------- */

static int build_mlp(hs_graph *g) {
  int x = hs_graph_flatten(g, 0);
  x = hs_graph_linear(g, x, 256, 1);
  x = hs_graph_relu(g, x);
  hs_graph_linear(g, x, 10, 1);
  return hs_graph_status(g);
}

/* --- cnn: LeNet-5 with ReLU and max pooling; padding 2 on the first conv keeps 28x28 so the
 * second block ends at 16x5x5 = 400 features, as LeNet's 32x32 input did. ----------------- */

static int build_cnn(hs_graph *g) {
  int x = hs_graph_conv2d(g, 0, 6, 5, 1, 2, 1, 1);
  x = hs_graph_relu(g, x);
  x = hs_graph_maxpool2d(g, x, 2, 2, 0);
  x = hs_graph_conv2d(g, x, 16, 5, 1, 0, 1, 1);
  x = hs_graph_relu(g, x);
  x = hs_graph_maxpool2d(g, x, 2, 2, 0);
  x = hs_graph_flatten(g, x);
  x = hs_graph_linear(g, x, 120, 1);
  x = hs_graph_relu(g, x);
  x = hs_graph_linear(g, x, 84, 1);
  x = hs_graph_relu(g, x);
  hs_graph_linear(g, x, 10, 1);
  return hs_graph_status(g);
}

/* --- resnet18 (kuangliu/pytorch-cifar models/resnet.py) ---------------------------------- */

/* conv (no bias, as BatchNorm follows and its beta makes a bias redundant) + BatchNorm. */
static int conv_bn(hs_graph *g, int x, int out_c, int k, int stride, int pad, int groups) {
  x = hs_graph_conv2d(g, x, out_c, k, stride, pad, groups, 0);
  return hs_graph_batchnorm2d(g, x);
}

static int basic_block(hs_graph *g, int x, int in_c, int planes, int stride) {
  int y = conv_bn(g, x, planes, 3, stride, 1, 1);
  y = hs_graph_relu(g, y);
  y = conv_bn(g, y, planes, 3, 1, 1, 1);
  int shortcut = x;
  if (stride != 1 || in_c != planes) shortcut = conv_bn(g, x, planes, 1, stride, 0, 1);
  y = hs_graph_add(g, y, shortcut);
  return hs_graph_relu(g, y);
}

static int build_resnet18(hs_graph *g) {
  static const int widths[4] = {64, 128, 256, 512};
  static const int strides[4] = {1, 2, 2, 2};
  int x = conv_bn(g, 0, 64, 3, 1, 1, 1);
  x = hs_graph_relu(g, x);
  int in_c = 64;
  for (int s = 0; s < 4; s++) {
    for (int b = 0; b < 2; b++) {
      x = basic_block(g, x, in_c, widths[s], b == 0 ? strides[s] : 1);
      in_c = widths[s];
    }
  }
  /* kuangliu writes avg_pool2d(out, 4); on the 4x4 map that remains it is a global pool. */
  x = hs_graph_global_avgpool(g, x);
  x = hs_graph_flatten(g, x);
  hs_graph_linear(g, x, 10, 1);
  return hs_graph_status(g);
}

/* --- vgg16 (kuangliu/pytorch-cifar models/vgg.py, VGG('VGG16')) -------------------------- */

static int build_vgg16(hs_graph *g) {
  enum { M = 0 }; /* a max pool in the configuration */
  static const int cfg[] = {64, 64, M, 128, 128, M, 256, 256, 256, M,
                            512, 512, 512, M, 512, 512, 512, M};
  int x = 0;
  for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
    if (cfg[i] == M) {
      x = hs_graph_maxpool2d(g, x, 2, 2, 0);
    } else {
      /* This VGG keeps the conv bias even though BatchNorm follows; the published count
       * (14,728,266) includes it. */
      x = hs_graph_conv2d(g, x, cfg[i], 3, 1, 1, 1, 1);
      x = hs_graph_batchnorm2d(g, x);
      x = hs_graph_relu(g, x);
    }
  }
  /* kuangliu ends the features with AvgPool2d(kernel_size=1, stride=1), an identity kept
   * here so the graph mirrors the reference module list. */
  x = hs_graph_avgpool2d(g, x, 1, 1, 0);
  x = hs_graph_flatten(g, x);
  hs_graph_linear(g, x, 10, 1);
  return hs_graph_status(g);
}

/* --- mobilenetv2 (kuangliu/pytorch-cifar models/mobilenetv2.py) -------------------------- */

/* Inverted residual: expand 1x1, depthwise 3x3, project 1x1 (linear bottleneck: no ReLU after
 * the projection). The reference uses plain ReLU, not ReLU6, and keeps the expand conv even
 * when the expansion is 1. The residual exists only for stride 1, through a 1x1 conv when
 * the width changes. */
static int inverted_residual(hs_graph *g, int x, int in_c, int out_c, int expansion,
                             int stride) {
  int planes = expansion * in_c;
  int y = conv_bn(g, x, planes, 1, 1, 0, 1);
  y = hs_graph_relu(g, y);
  y = conv_bn(g, y, planes, 3, stride, 1, planes);
  y = hs_graph_relu(g, y);
  y = conv_bn(g, y, out_c, 1, 1, 0, 1);
  if (stride != 1) return y;
  int shortcut = x;
  if (in_c != out_c) shortcut = conv_bn(g, x, out_c, 1, 1, 0, 1);
  return hs_graph_add(g, y, shortcut);
}

static int build_mobilenetv2(hs_graph *g) {
  /* (expansion, out_planes, num_blocks, stride); the reference's CIFAR change is stride 1 in
   * the stem and in the second row (ImageNet uses 2 for both). */
  static const int cfg[7][4] = {{1, 16, 1, 1},  {6, 24, 2, 1},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                {6, 96, 3, 1},  {6, 160, 3, 2}, {6, 320, 1, 1}};
  int x = conv_bn(g, 0, 32, 3, 1, 1, 1);
  x = hs_graph_relu(g, x);
  int in_c = 32;
  for (int r = 0; r < 7; r++) {
    for (int b = 0; b < cfg[r][2]; b++) {
      x = inverted_residual(g, x, in_c, cfg[r][1], cfg[r][0], b == 0 ? cfg[r][3] : 1);
      in_c = cfg[r][1];
    }
  }
  x = conv_bn(g, x, 1280, 1, 1, 0, 1);
  x = hs_graph_relu(g, x);
  x = hs_graph_avgpool2d(g, x, 4, 4, 0);
  x = hs_graph_flatten(g, x);
  hs_graph_linear(g, x, 10, 1);
  return hs_graph_status(g);
}

/* --- table ------------------------------------------------------------------------------- */

/* Designated initializers, so a field added to hs_model_info cannot shift the others. */
#define FMNIST                                                                  \
  .dataset = "fashion-mnist", .in_c = 1, .in_h = 28, .in_w = 28, .classes = 10,  \
  .dataset_train_size = 60000, .dataset_test_size = 10000
#define CIFAR10                                                                 \
  .dataset = "cifar10", .in_c = 3, .in_h = 32, .in_w = 32, .classes = 10,        \
  .dataset_train_size = 50000, .dataset_test_size = 10000

static const zoo_entry zoo[] = {
    {.info = {.name = "mlp", .description = "multilayer perceptron 784-256-10 with ReLU",
              FMNIST},
     .build = build_mlp},
    {.info = {.name = "cnn",
              .description = "LeNet-5 style CNN: two 5x5 conv + max-pool blocks, then 120-84-10",
              FMNIST},
     .build = build_cnn},
    {.info = {.name = "resnet18",
              .description = "ResNet-18 for CIFAR (3x3 stem, no max pool), BasicBlocks [2,2,2,2]",
              CIFAR10},
     .build = build_resnet18},
    {.info = {.name = "vgg16",
              .description = "VGG-16 with BatchNorm for CIFAR, one linear classifier", CIFAR10},
     .build = build_vgg16},
    {.info = {.name = "mobilenetv2",
              .description = "MobileNetV2 for CIFAR (stride-1 stem, ReLU, width 1.0)", CIFAR10},
     .build = build_mobilenetv2},
};

#undef FMNIST
#undef CIFAR10

enum { ZOO_COUNT = (int)(sizeof zoo / sizeof zoo[0]) };

int hs_zoo_count(void) { return ZOO_COUNT; }

const hs_model_info *hs_zoo_info(int i) {
  if (i < 0 || i >= ZOO_COUNT) return NULL;
  return &zoo[i].info;
}

static const zoo_entry *find_entry(const char *name) {
  if (!name) return NULL;
  for (int i = 0; i < ZOO_COUNT; i++)
    if (strcmp(zoo[i].info.name, name) == 0) return &zoo[i];
  return NULL;
}

const hs_model_info *hs_zoo_find(const char *name) {
  const zoo_entry *e = find_entry(name);
  return e ? &e->info : NULL;
}

void hs_zoo_names(char *buf, size_t size) {
  if (size == 0) return;
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < ZOO_COUNT && used < size; i++) {
    int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", zoo[i].info.name);
    if (n < 0) break;
    used += (size_t)n;
  }
}

int hs_zoo_build(const char *name, hs_graph **out, hs_diag *d) {
  *out = NULL;
  const zoo_entry *e = find_entry(name);
  if (!e) {
    char names[256];
    hs_zoo_names(names, sizeof names);
    return hs_diag_set(d, HS_ENOTFOUND, "unknown model \"%s\"; valid models: %s",
                       name ? name : "(null)", names);
  }
  const hs_model_info *mi = &e->info;
  hs_graph *g;
  int rc = hs_graph_open(&g, mi->name, mi->in_c, mi->in_h, mi->in_w, d);
  if (rc) return rc;
  rc = e->build(g);
  if (rc) {
    rc = hs_diag_set(d, rc, "%s", hs_graph_diag(g)->msg);
    hs_graph_close(g);
    return rc;
  }
  /* A builder that ends anywhere but at the logits is a bug in this file; say so rather than
   * hand a backend a graph that disagrees with the table. */
  const hs_layer *last = hs_graph_layer(g, hs_graph_last(g));
  if (last->out_c != mi->classes || last->out_h != 1 || last->out_w != 1) {
    rc = hs_diag_set(d, HS_ERUNTIME, "%s: graph ends in (%d,%d,%d), expected (%d,1,1)",
                     mi->name, last->out_c, last->out_h, last->out_w, mi->classes);
    hs_graph_close(g);
    return rc;
  }
  *out = g;
  return 0;
}

int hs_zoo_stats(const char *name, hs_model_stats *out, hs_diag *d) {
  memset(out, 0, sizeof *out);
  hs_graph *g;
  int rc = hs_zoo_build(name, &g, d);
  if (rc) return rc;
  out->params = hs_graph_params(g);
  out->grad_bytes = 4 * out->params;
  out->flops_per_sample = hs_graph_flops(g);
  /* Backward costs about twice the forward: one product for the input gradient and one for
   * the weight gradient per forward product (the usual 1:2 rule of thumb). */
  out->train_flops_per_sample = 3.0 * out->flops_per_sample;
  out->act_bytes_per_sample = (double)hs_graph_act_bytes(g);
  out->layers = hs_graph_count(g) - 1;
  hs_graph_close(g);
  return 0;
}
