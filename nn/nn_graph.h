/* nn_graph: a neural network described as a graph of layers, with its cost.
 *
 * A graph is an array of layers in topological order. Layer 0 is always the input placeholder
 * (kind HS_LAYER_INPUT) that open() creates from the sample shape; every later layer names the
 * earlier layer(s) it reads by index, so a compute backend (cpu, cuda) can execute the array
 * front to back and run backward back to front. Shapes are per sample, (C, H, W); the batch
 * dimension is left to whoever runs the graph. A vector is a shape (n, 1, 1).
 *
 * Builders (hs_graph_conv2d, ...) append one layer, infer its output shape and return the new
 * layer's index (>= 0), or a negative HS_E* code. Errors are sticky, as in cairo: after the
 * first failure every builder returns that same code and appends nothing, so a model can be
 * written as straight-line code and checked once with hs_graph_status(). The message is kept
 * in the graph (hs_graph_diag) and names the layer, what was expected and what was found.
 *
 * Costs (hs_layer_* and hs_graph_* totals), all per sample:
 *   - params: trainable parameters only. Conv weights (+ bias), BatchNorm gamma and beta,
 *     linear W and b. BatchNorm running mean/variance are buffers, not parameters.
 *   - macs: multiply-accumulates of conv and linear layers (the figure ptflops/thop print).
 *   - flops: forward floating-point operations, a multiply-add counted as 2. Conv and linear:
 *     2 * macs, plus one add per output element when there is a bias. Element-wise layers use a
 *     fixed cost per output element: ReLU/ReLU6 1, residual add 1, BatchNorm 2 (the
 *     normalisation is one multiply-add once the batch statistics are known; computing the
 *     statistics is not counted). Max pooling k*k-1 comparisons and average pooling k*k
 *     operations (k*k-1 adds and one scaling) per output element; global average pooling H*W.
 *     The input placeholder and flatten (a view) cost nothing.
 *   - act_bytes: fp32 bytes of the layer's output, which training keeps for backward. Every
 *     layer's output is counted (no in-place ReLU) except the input placeholder (the data
 *     batch, owned by the loader) and flatten (a view of its input).
 *
 * Ownership: hs_graph_open allocates, hs_graph_close frees; layers returned by hs_graph_layer
 * point into the graph and stay valid until the next builder call or close. A graph is not
 * thread-safe for building; once built it is read-only and may be shared. */
#ifndef HS_NN_GRAPH_H
#define HS_NN_GRAPH_H

#include <stdint.h>
#include <stdio.h>

#include "core/core_error.h"

/* One list generates the kind enum and the names (libuv's UV_ERRNO_MAP habit). */
#define HS_LAYER_KIND_MAP(XX)                                                    \
  XX(INPUT, "input")                                                            \
  XX(CONV2D, "conv2d")                                                          \
  XX(BATCHNORM2D, "batchnorm2d")                                                \
  XX(RELU, "relu")                                                              \
  XX(RELU6, "relu6")                                                            \
  XX(MAXPOOL2D, "maxpool2d")                                                    \
  XX(AVGPOOL2D, "avgpool2d")                                                    \
  XX(GLOBAL_AVGPOOL, "global_avgpool")                                          \
  XX(LINEAR, "linear")                                                          \
  XX(ADD, "add")                                                                \
  XX(FLATTEN, "flatten")

typedef enum hs_layer_kind {
#define HS_LAYER_KIND_ENUM(name, str) HS_LAYER_##name,
  HS_LAYER_KIND_MAP(HS_LAYER_KIND_ENUM)
#undef HS_LAYER_KIND_ENUM
  HS_LAYER_KIND_COUNT
} hs_layer_kind;

typedef struct hs_layer {
  hs_layer_kind kind;
  int n_in;                 /* number of inputs: 0 (input), 1, or 2 (add) */
  int in[2];                /* indices of the input layers, -1 where unused */
  int in_c, in_h, in_w;     /* shape of in[0] (channels, pixels, pixels) */
  int out_c, out_h, out_w;  /* inferred output shape (channels, pixels, pixels) */
  int kernel;               /* conv/pool: square kernel side (pixels); 0 otherwise */
  int stride;               /* conv/pool: stride (pixels); 0 otherwise */
  int pad;                  /* conv/pool: zero padding on each side (pixels); 0 otherwise */
  int groups;               /* conv: groups (in_c for depthwise); 1 otherwise */
  int bias;                 /* conv/linear: 1 when the layer adds a learned bias */
  double eps;               /* batchnorm: added to the variance (PyTorch's 1e-5); 0 otherwise */
  double momentum;          /* batchnorm: running-statistics update factor (PyTorch's 0.1) */
} hs_layer;

typedef struct hs_graph hs_graph;

const char *hs_layer_kind_name(hs_layer_kind kind); /* "conv2d"; "?" when out of range */

/* Creates an empty graph whose layer 0 is the input of shape (c, h, w). name is copied (may be
 * NULL) and only used in messages. Returns 0, HS_EINVAL for a non-positive shape, or HS_ENOMEM. */
int hs_graph_open(hs_graph **out, const char *name, int c, int h, int w, hs_diag *d);
void hs_graph_close(hs_graph *g); /* NULL is fine */

/* Sticky status: 0 while every builder has succeeded, else the first failure's code. */
int hs_graph_status(const hs_graph *g);
const hs_diag *hs_graph_diag(const hs_graph *g); /* the first failure's message */

/* --- builders: return the new layer's index, or a negative HS_E* code ------------------- */

/* 2-D convolution with a square kernel k, stride and zero padding pad on each side.
 * groups must divide both the input channels and out_c (groups == in_c is depthwise).
 * Output side = (in + 2*pad - k) / stride + 1; a kernel larger than the padded input fails. */
int hs_graph_conv2d(hs_graph *g, int input, int out_c, int k, int stride, int pad, int groups,
                    int bias);
int hs_graph_batchnorm2d(hs_graph *g, int input); /* affine, eps 1e-5, momentum 0.1 */
int hs_graph_relu(hs_graph *g, int input);
int hs_graph_relu6(hs_graph *g, int input);
int hs_graph_maxpool2d(hs_graph *g, int input, int k, int stride, int pad);
/* Padding, when any, is counted in the divisor (PyTorch's count_include_pad=True). */
int hs_graph_avgpool2d(hs_graph *g, int input, int k, int stride, int pad);
int hs_graph_global_avgpool(hs_graph *g, int input); /* (C,H,W) -> (C,1,1) */
/* Fully connected; the input must be a vector (C,1,1): flatten or pool first. */
int hs_graph_linear(hs_graph *g, int input, int out_features, int bias);
int hs_graph_add(hs_graph *g, int a, int b); /* element-wise sum; both shapes must match */
int hs_graph_flatten(hs_graph *g, int input); /* (C,H,W) -> (C*H*W,1,1) */

/* --- reading ----------------------------------------------------------------------------- */

int hs_graph_count(const hs_graph *g);                 /* layers, the input included */
int hs_graph_last(const hs_graph *g);                  /* index of the last layer */
const hs_layer *hs_graph_layer(const hs_graph *g, int i); /* NULL when out of range */
const char *hs_graph_name(const hs_graph *g);

/* Per-layer costs, per sample (see the header block for what is counted). */
int64_t hs_layer_params(const hs_layer *l);    /* trainable parameters */
int64_t hs_layer_macs(const hs_layer *l);      /* multiply-accumulates */
double hs_layer_flops(const hs_layer *l);      /* forward FLOPs, multiply-add = 2 */
int64_t hs_layer_act_bytes(const hs_layer *l); /* bytes of fp32 output kept for backward */

/* Totals over all layers, per sample. */
int64_t hs_graph_params(const hs_graph *g);
int64_t hs_graph_macs(const hs_graph *g);
double hs_graph_flops(const hs_graph *g);
int64_t hs_graph_act_bytes(const hs_graph *g);

/* One line per layer: index, kind, inputs, hyper-parameters, output shape, params, FLOPs.
 * Returns 0 or HS_EIO when writing fails. */
int hs_graph_print(const hs_graph *g, FILE *f);

#endif
