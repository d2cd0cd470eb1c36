/* nn_eval: the loss and accuracy of a net's current parameters on the first samples of a
 * dataset, the evaluation that the real runtimes (threads and ranks) and the proxy
 * convergence model run.
 *
 * Contract: samples [0, n) of ds go through the net in chunks of at most `chunk` (forward
 * pass only, no gradients), in order, through the caller's buffers x (chunk samples of the
 * dataset's shape) and y (chunk labels); the net must hold a batch of `chunk`. The loss is
 * the mean over samples of the chunks' mean losses weighted by their sizes, the accuracy the
 * fraction of correct predictions. hs_net_evaluate allocates nothing; hs_net_evaluate_params
 * first loads `params` into the net, then evaluates every sample of ds in chunks of 500
 * through buffers it allocates and frees. Errors are the net's or the dataset's, with their
 * messages (HS_ENOMEM for the buffers). */
#ifndef HS_NN_EVAL_H
#define HS_NN_EVAL_H

#include <stdint.h>

#include "core/core_error.h"
#include "nn/nn_data.h"
#include "nn/nn_net.h"

int hs_net_evaluate(hs_net *net, const hs_dataset *ds, int64_t n, int chunk, float *x, int32_t *y,
                    double *loss, double *accuracy, hs_diag *d);
int hs_net_evaluate_params(hs_net *net, const float *params, const hs_dataset *ds, double *loss,
                           double *accuracy, hs_diag *d);

#endif
