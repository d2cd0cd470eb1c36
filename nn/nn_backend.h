/* nn_backend: the table a compute backend (cpu, cuda) implements behind nn_net.h. Internal to
 * nn/: nothing outside nn/ includes this header.
 *
 * nn_net.c owns the parts both backends share: parsing the device string, building the zoo
 * graph, the flat parameter layout (param_off) and the deterministic host-side initialisation
 * (hs_net_init_params), argument checks, and dispatch. A backend owns its memory and kernels:
 * open allocates `params`, `grads` and whatever else it needs (in `impl`), close frees them.
 * Callbacks have the exact signatures below (no casts) and follow nn_net.h's contract. */
#ifndef HS_NN_BACKEND_H
#define HS_NN_BACKEND_H

#include <stdint.h>

#include "core/core_buildinfo.h"
#include "nn/nn_graph.h"
#include "nn/nn_net.h"

#define HS_NET_BACKEND_VERSION 3

typedef enum hs_net_vec { HS_NET_PARAMS = 0, HS_NET_GRADS = 1 } hs_net_vec;

/* A struct tag without a typedef: nn_net.h already names the function hs_net_backend(). */
struct hs_net_backend {
  int version; /* HS_NET_BACKEND_VERSION */
  const char *name; /* "cpu", "cuda" */
  /* n->graph, n->opts, n->n_params, n->param_off, n->device and the parsed ordinal and SM
   * partition are set; the backend allocates params, grads, momentum and activations for
   * max(1, opts.max_batch) samples, copies `init` (host, n_params floats) into params, and
   * sets n->params, n->grads and n->impl. */
  int (*open)(hs_net *n, const float *init, hs_diag *d);
  void (*close)(hs_net *n);
  int (*load)(hs_net *n, const float *x, const int32_t *y, int batch, hs_diag *d);
  int (*forward)(hs_net *n, int train, hs_diag *d);
  int (*backward)(hs_net *n, hs_diag *d);
  int (*update)(hs_net *n, const hs_sgd *o, hs_diag *d);
  int (*result)(hs_net *n, double *loss, int *correct, hs_diag *d);
  /* to_host = 1: vector -> host; 0: host -> vector. */
  int (*copy)(hs_net *n, hs_net_vec which, int to_host, float *host, hs_diag *d);
  int (*zero_momentum)(hs_net *n, hs_diag *d);
  int (*mark)(hs_net *n, int slot, hs_diag *d);
  int (*elapsed)(hs_net *n, int from, int to, double *seconds, hs_diag *d);
  int (*sync)(hs_net *n, hs_diag *d);
  int64_t (*bytes)(const hs_net *n);
  /* Appended in version 2. Like backward, but writes the gradient into `host` (n_params floats
   * of host memory) instead of n->grads; n->grads is then left unspecified. NULL: nn_net.c
   * runs backward and copies n->grads to host. */
  int (*backward_into)(hs_net *n, float *host, hs_diag *d);
  /* Appended in version 3. hs_net_prepare (batch >= 1, checked); NULL: nothing to prepare. */
  int (*prepare)(hs_net *n, int batch, hs_diag *d);
};

struct hs_net {
  const struct hs_net_backend *be;
  hs_graph *graph;       /* owned; the zoo model */
  char device[64];       /* as given to open */
  char model[32];
  int ordinal;           /* cuda: GPU index; -1 for cpu */
  int sm_partition;      /* cuda: SMs of the green-context partition; 0 = whole GPU */
  hs_net_options opts;
  int64_t n_params;
  int64_t *param_off;    /* per layer: offset of its first parameter in the flat vector, or -1 */
  int classes;           /* outputs of the last layer */
  float *params, *grads; /* flat vectors in the backend's memory */
  void *impl;            /* the backend's state */
};

extern const struct hs_net_backend hs_net_backend_cpu;
#if HETSIM_HAVE_CUDA
extern const struct hs_net_backend hs_net_backend_cuda;
#endif

/* Fills host[0..n_params) with the initial parameters of graph g for seed (see nn_net.h). */
int hs_net_init_params(const hs_graph *g, const int64_t *param_off, uint64_t seed, float *host,
                       hs_diag *d);

/* Opens a net on a graph built by the caller rather than taken from the zoo (gradient checks
 * of layer combinations no zoo model has). Takes ownership of g: the net closes it, and so does
 * a failed open. The model name is hs_graph_name(g); the logits are the last layer's output. */
int hs_net_open_graph(hs_net **out, const char *device, hs_graph *g, const hs_net_options *o,
                      hs_diag *d);

/* HS_EINVAL, naming the first batchnorm layer, when a training forward pass of `batch` samples
 * would give one of them a single value per channel (PyTorch refuses it too: no variance); 0
 * otherwise. Both backends check before running anything. */
int hs_net_check_train_batch(const hs_net *n, int batch, hs_diag *d);

/* cpu backend: caps the bytes the net may hold (hs_net_bytes); a load that would grow past the
 * cap fails with HS_ENOMEM as a real allocation failure does. 0 removes the cap. Lets tests
 * exercise the out-of-memory path, and lets a caller emulate a device's memory on the CPU. */
int hs_net_cpu_set_limit(hs_net *n, int64_t bytes, hs_diag *d);

#endif
