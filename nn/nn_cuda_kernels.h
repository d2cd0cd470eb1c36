/* nn_cuda_kernels: the cuda backend's own kernels, as C-callable launchers (nn_cuda_kernels.cu).
 *
 * These cover everything of a training step that the cuda backend does not hand to cuDNN's
 * graph API (convolutions) or cuBLAS (linear layers): bias add and bias gradient, batch
 * normalisation (training with batch statistics, evaluation with running statistics, backward),
 * ReLU/ReLU6, max/average/global-average pooling and their backward passes, residual add and
 * gradient accumulation, softmax cross-entropy (loss, top-1 count, gradient of the mean loss) and
 * the SGD update over the flat parameter vector. Internal to nn/.
 *
 * Contract:
 * - Tensors are NCHW fp32 device arrays, batch n; `hw` is H*W of one channel plane.
 * - Every launcher enqueues its kernels on `stream`, never synchronises and never allocates, so
 *   that a whole training step can be captured into a CUDA graph. It returns the launch status
 *   (cudaGetLastError after the launch): cudaSuccess or the error to report.
 * - `accumulate` = 0 writes the gradient over its destination, 1 adds to it (a tensor read by
 *   several layers, as a residual block's input, receives one gradient from each).
 * - Reductions (batch statistics, bias gradients, the loss) accumulate in double, in two passes
 *   (per-slice partial sums, then one finishing thread per channel), so that their result does
 *   not depend on how many SMs run them and stays close to a sequential sum. They use `scratch`,
 *   hs_cuk_scratch_doubles(c_max) doubles of device memory for channel counts up to c_max.
 * - Max pooling keeps no index: backward finds each window's first maximum again (PyTorch's
 *   rule: strictly greater, or NaN), so a tie sends the gradient to the earliest position and
 *   two NaNs in a window send it to the last (as the cpu backend does).
 *   Average pooling counts padding in the divisor (count_include_pad). */
#ifndef HS_NN_CUDA_KERNELS_H
#define HS_NN_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Device-side result of the softmax cross-entropy forward pass. */
typedef struct hs_cuk_result {
  double loss;  /* mean cross-entropy over the batch */
  int correct;  /* samples whose first arg-max logit is the label */
  int bad_label; /* samples whose label was outside [0, classes) (their loss is not summed; the
                    mean still divides by n: the net refuses such a batch before, nn_net.c) */
} hs_cuk_result;

/* Doubles of scratch the reductions need for up to c_max channels. */
int64_t hs_cuk_scratch_doubles(int c_max);

/* y[i][ch][*] += b[ch]. */
cudaError_t hs_cuk_bias_add(float *y, const float *b, int n, int c, int hw, cudaStream_t stream);
/* db[ch] = sum over samples and pixels of dy[i][ch][*] (written over). */
cudaError_t hs_cuk_bias_grad(const float *dy, float *db, double *scratch, int n, int c, int hw,
                             cudaStream_t stream);

/* Training forward: batch mean and biased variance per channel, y = gamma * xhat + beta, saves
 * mean and 1/sqrt(var + eps) for backward, and updates the running statistics as PyTorch does
 * (running_var with the unbiased variance). */
cudaError_t hs_cuk_bn_forward_train(const float *x, float *y, const float *gamma,
                                    const float *beta, float *run_mean, float *run_var,
                                    float *save_mean, float *save_invstd, double *scratch, int n,
                                    int c, int hw, double eps, double momentum,
                                    cudaStream_t stream);
/* Evaluation forward with the running statistics. */
cudaError_t hs_cuk_bn_forward_infer(const float *x, float *y, const float *gamma,
                                    const float *beta, const float *run_mean,
                                    const float *run_var, int n, int c, int hw, double eps,
                                    cudaStream_t stream);
/* Backward of the training forward: dgamma and dbeta written over, dx written or added (dx may
 * be NULL when no input gradient is needed). */
cudaError_t hs_cuk_bn_backward(const float *x, const float *dy, float *dx, const float *gamma,
                               const float *save_mean, const float *save_invstd, float *dgamma,
                               float *dbeta, double *scratch, int n, int c, int hw,
                               int accumulate, cudaStream_t stream);

/* y = min(max(x, 0), cap); cap = INFINITY for ReLU, 6 for ReLU6. */
cudaError_t hs_cuk_relu_forward(const float *x, float *y, int64_t count, float cap,
                                cudaStream_t stream);
/* dx = dy where 0 < y < cap, else 0 (from the forward output y). */
cudaError_t hs_cuk_relu_backward(const float *y, const float *dy, float *dx, int64_t count,
                                 float cap, int accumulate, cudaStream_t stream);

/* Pooling geometry shared by max and average pooling. */
typedef struct hs_cuk_pool {
  int n, c, h, w;    /* input */
  int oh, ow;        /* output */
  int k, stride, pad;
} hs_cuk_pool;

cudaError_t hs_cuk_maxpool_forward(const float *x, float *y, const hs_cuk_pool *p,
                                   cudaStream_t stream);
cudaError_t hs_cuk_maxpool_backward(const float *x, const float *dy, float *dx,
                                    const hs_cuk_pool *p, int accumulate, cudaStream_t stream);
cudaError_t hs_cuk_avgpool_forward(const float *x, float *y, const hs_cuk_pool *p,
                                   cudaStream_t stream);
cudaError_t hs_cuk_avgpool_backward(const float *dy, float *dx, const hs_cuk_pool *p,
                                    int accumulate, cudaStream_t stream);
/* (n, c, hw) -> (n, c): mean over the plane; backward spreads dy / hw over it. */
cudaError_t hs_cuk_gap_forward(const float *x, float *y, int n, int c, int hw,
                               cudaStream_t stream);
cudaError_t hs_cuk_gap_backward(const float *dy, float *dx, int n, int c, int hw, int accumulate,
                                cudaStream_t stream);

/* y = a + b. */
cudaError_t hs_cuk_add(const float *a, const float *b, float *y, int64_t count,
                       cudaStream_t stream);
/* dst = src (accumulate 0) or dst += src (accumulate 1). */
cudaError_t hs_cuk_accumulate(float *dst, const float *src, int64_t count, int accumulate,
                              cudaStream_t stream);

/* Softmax cross-entropy of logits (n x k) against labels: mean loss and top-1 count into *res. */
cudaError_t hs_cuk_xent_forward(const float *logits, const int32_t *labels, int n, int k,
                                hs_cuk_result *res, cudaStream_t stream);
/* Gradient of the mean loss: dlogits = (softmax(logits) - onehot(label)) / n. */
cudaError_t hs_cuk_xent_backward(const float *logits, const int32_t *labels, int n, int k,
                                 float *dlogits, cudaStream_t stream);

/* torch.optim.SGD (dampening 0, not Nesterov): g = grad + wd * w; v = momentum * v + g;
 * w -= lr * v. */
cudaError_t hs_cuk_sgd(float *w, const float *grad, float *v, int64_t count, float lr,
                       float momentum, float weight_decay, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
