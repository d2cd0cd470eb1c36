/* nn_zoo: the named models hetsim simulates and trains, each built as an nn_graph.
 *
 * The CIFAR-10 models follow kuangliu/pytorch-cifar layer for layer, so that parameter counts,
 * FLOPs and memory match what people run and publish:
 *   mlp          784-256-10 with ReLU, Fashion-MNIST 1x28x28            203,530 parameters
 *   cnn          LeNet-5 style, Fashion-MNIST 1x28x28                    61,706 parameters
 *   resnet18     CIFAR ResNet-18 (3x3 stem, no max pool), 3x32x32    11,173,962 parameters
 *   vgg16        CIFAR VGG-16 with BatchNorm, 3x32x32                14,728,266 parameters
 *   mobilenetv2  CIFAR MobileNetV2 (stride-1 stem), 3x32x32           2,296,922 parameters
 *
 * The info table is static and immutable (no registration at run time). hs_zoo_build returns
 * a fresh graph the caller closes with hs_graph_close. All figures are per sample; see
 * nn_graph.h for what counts as a parameter, a FLOP and an activation byte. */
#ifndef HS_NN_ZOO_H
#define HS_NN_ZOO_H

#include <stdint.h>

#include "core/core_error.h"
#include "nn/nn_graph.h"

typedef struct hs_model_info {
  const char *name;            /* "resnet18" */
  const char *description;     /* one line */
  const char *dataset;         /* "fashion-mnist" | "cifar10" */
  int in_c, in_h, in_w;        /* input sample shape (channels, pixels, pixels) */
  int classes;                 /* output logits */
  int64_t dataset_train_size;  /* samples: 60000 for fashion-mnist, 50000 for cifar10 */
  int64_t dataset_test_size;   /* samples: 10000 */
} hs_model_info;

int hs_zoo_count(void);
const hs_model_info *hs_zoo_info(int i);            /* NULL when out of range */
const hs_model_info *hs_zoo_find(const char *name); /* NULL if unknown */

/* Writes "mlp, cnn, resnet18, ..." into buf (always terminated); for usage messages. */
void hs_zoo_names(char *buf, size_t size);

/* Builds the model's layer graph; the caller closes it. HS_ENOTFOUND with the list of valid
 * names if unknown; HS_ENOMEM when memory runs out. */
int hs_zoo_build(const char *name, struct hs_graph **out, hs_diag *d);

/* Convenience: totals without keeping the graph. */
typedef struct hs_model_stats {
  int64_t params;                /* trainable parameters */
  int64_t grad_bytes;            /* bytes: fp32 gradient size = 4 * params */
  double flops_per_sample;       /* FLOPs: forward, multiply-add = 2 */
  double train_flops_per_sample; /* FLOPs: forward + backward, taken as 3 x forward */
  double act_bytes_per_sample;   /* bytes: fp32 activations kept for backward */
  int layers;                    /* graph layers, the input placeholder excluded */
} hs_model_stats;

int hs_zoo_stats(const char *name, hs_model_stats *out, hs_diag *d);

#endif
