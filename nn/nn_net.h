/* nn_net: training a zoo model on a compute backend (cpu, cuda), behind one interface.
 *
 * A net is a model of the zoo (nn_zoo.h) instantiated on one device: its parameters, gradients,
 * momentum and activations live in the backend's memory (host memory for cpu, device memory for
 * cuda). Everyone above nn/ (calibration, the simulator's proxy numerics, the real runtime)
 * drives a net only through this header:
 *
 *   hs_net_open(&n, "cpu", "mlp", &opts, d);
 *   hs_net_load(n, x, y, batch, d);           host arrays -> backend memory
 *   hs_net_forward(n, 1, d);                  training forward pass (batch statistics)
 *   hs_net_backward(n, d);                    gradients of the mean loss over the batch
 *                                             (or hs_net_backward_into(n, host, d))
 *   ... all-reduce / compress hs_net_grads(n) in place, or through get/set_grads ...
 *   hs_net_update(n, &sgd, d);                SGD with momentum and weight decay
 *   hs_net_result(n, &loss, &correct, d);     waits for the device
 *
 * Layout: every trainable parameter of every layer lives in one flat fp32 vector, in layer order
 * (conv/linear weight then bias; batchnorm gamma then beta), and the gradient vector has the same
 * layout, so that a whole model or gradient is one buffer for all-reduce, averaging and
 * compression. BatchNorm running statistics are buffers outside that vector (they stay local to
 * a worker). Inputs are NCHW fp32, labels int32 class indices.
 *
 * Devices: "cpu"; "cuda:I" (GPU I); "cuda:I/sm=N" (a green-context partition of N SMs of GPU I).
 * Opening a cuda device in a build without CUDA, or on a machine without a GPU, fails with
 * HS_EUNSUPPORTED and a message that says which.
 *
 * Contract:
 * - Every call returns 0 or a negative HS_E* code with the diag filled; nothing exits.
 * - hs_net_load grows the net's buffers when batch exceeds what it holds; running out of memory
 *   returns HS_ENOMEM (the calibration's batch sweep stops there) and leaves the net usable at
 *   the batches it already held.
 * - Initialisation is deterministic for (model, seed) and identical across backends: weights
 *   are drawn on the host (PyTorch's default: uniform +-1/sqrt(fan_in) for conv and linear
 *   weights and biases; batchnorm gamma 1, beta 0) and copied to the device.
 * - A net is used by one thread at a time; different nets may run on different threads (the
 *   real runtime's cpu backend runs one worker per thread). opts.threads bounds the threads the
 *   cpu backend itself uses for one net (0 = 1).
 * - Calls on a cuda net are asynchronous on the net's stream: hs_net_result, hs_net_elapsed and
 *   the get_ functions wait for it; hs_net_sync waits explicitly. Every wait is bounded by
 *   opts.wait_s (a kernel that never ends fails the call instead of hanging its thread).
 * Units: seconds, bytes, samples. */
#ifndef HS_NN_NET_H
#define HS_NN_NET_H

#include <stdint.h>

#include "core/core_error.h"

typedef struct hs_net hs_net;

typedef struct hs_net_options {
  uint64_t seed;   /* weight initialisation */
  int max_batch;   /* samples to allocate for up front; 0 = grow on demand */
  int threads;     /* cpu backend: threads for one net's kernels; 0 = 1 */
  double wait_s;   /* cuda backend: the longest one call waits for the device, seconds; 0 =
                      HS_NET_WAIT_DEFAULT_S. A wait that runs out fails with HS_ERUNTIME and
                      leaves the net unusable (close still works) */
} hs_net_options;

#define HS_NET_WAIT_DEFAULT_S 600.0
#define HS_NET_WAIT_MAX_S 86400.0

/* SGD with momentum and weight decay, as torch.optim.SGD (dampening 0, not Nesterov):
 *   g = grad + weight_decay * w;  v = momentum * v + g;  w = w - lr * v.
 * Weight decay applies to every parameter, batchnorm and biases included, as PyTorch's default. */
typedef struct hs_sgd {
  double lr;
  double momentum;
  double weight_decay;
} hs_sgd;

int hs_net_open(hs_net **out, const char *device, const char *model, const hs_net_options *o,
                hs_diag *d);
void hs_net_close(hs_net *n); /* NULL is fine */

const char *hs_net_device(const hs_net *n);  /* as given to open */
const char *hs_net_backend(const hs_net *n); /* "cpu" or "cuda" */
const char *hs_net_model(const hs_net *n);
int64_t hs_net_param_count(const hs_net *n);
void hs_net_input_shape(const hs_net *n, int *c, int *h, int *w);
int hs_net_classes(const hs_net *n);

/* Makes the net ready for steps of `batch` samples without running one: its buffers hold the
 * batch and, on a cuda net, the cuDNN plans of every convolution at that batch are built (what
 * a first step would otherwise do inside its time; bench_gpu_nn measures it). Parameters and
 * batchnorm statistics stay as they are; buffers that grow drop the loaded batch and the last
 * forward pass's results, as the load of a larger batch does (load again). A later hs_net_load
 * of this batch or a smaller one allocates nothing. HS_EINVAL for batch < 1; HS_ENOMEM as
 * hs_net_load, the net left usable at the batches it held. */
int hs_net_prepare(hs_net *n, int batch, hs_diag *d);
/* Copies a batch of inputs (batch x C x H x W fp32) and labels (int32 in [0, classes)) into the
 * net. A label out of range is HS_EINVAL. */
int hs_net_load(hs_net *n, const float *x, const int32_t *y, int batch, hs_diag *d);
/* train = 1: batch statistics in batchnorm (and its running statistics updated); 0: running
 * statistics, for evaluation. Computes the softmax cross-entropy of the loaded batch. */
int hs_net_forward(hs_net *n, int train, hs_diag *d);
/* Gradients of the mean cross-entropy of the last training forward pass, written over (not
 * added to) hs_net_grads. */
int hs_net_backward(hs_net *n, hs_diag *d);
/* As hs_net_backward, but the gradient goes straight into `grads` (host memory,
 * hs_net_param_count floats, written over) instead of hs_net_grads, whose content is then
 * unspecified. The cpu backend writes there directly, which saves the copy of
 * hs_net_get_grads (the proxy convergence model keeps one gradient per simulated worker); cuda
 * computes into its own buffer and copies. */
int hs_net_backward_into(hs_net *n, float *grads, hs_diag *d);
/* One SGD step from the gradient buffer as it is now (after any all-reduce or compression). */
int hs_net_update(hs_net *n, const hs_sgd *opt, hs_diag *d);
/* Loss (mean over the batch) and correct top-1 predictions of the last forward pass. */
int hs_net_result(hs_net *n, double *loss, int *correct, hs_diag *d);

/* The flat vectors, in the backend's memory (a device pointer for cuda), of
 * hs_net_param_count floats each. */
float *hs_net_params(hs_net *n);
float *hs_net_grads(hs_net *n);
/* Copies between the flat vectors and host memory. */
int hs_net_get_params(hs_net *n, float *host, hs_diag *d);
int hs_net_set_params(hs_net *n, const float *host, hs_diag *d);
int hs_net_get_grads(hs_net *n, float *host, hs_diag *d);
int hs_net_set_grads(hs_net *n, const float *host, hs_diag *d);
/* Momentum is part of a worker's optimizer state; local SGD with model averaging keeps it. */
int hs_net_zero_momentum(hs_net *n, hs_diag *d);

/* Timing, for calibration. hs_net_mark records slot (0..HS_NET_MARKS-1) on the net's stream
 * (a CUDA event on a GPU, the monotonic clock on the CPU); hs_net_elapsed waits and gives the
 * time between two recorded marks. */
#define HS_NET_MARKS 8
int hs_net_mark(hs_net *n, int slot, hs_diag *d);
int hs_net_elapsed(hs_net *n, int from, int to, double *seconds, hs_diag *d);
int hs_net_sync(hs_net *n, hs_diag *d);

/* Bytes the backend holds for the net at its current batch capacity (params, grads, momentum,
 * activations, workspaces); for reports and memory limits. */
int64_t hs_net_bytes(const hs_net *n);

#endif
