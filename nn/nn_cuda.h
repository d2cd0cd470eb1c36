/* nn_cuda: what a cuda net offers beyond nn_net.h — one training step captured as a CUDA graph.
 *
 * A training step (forward with batch statistics, backward, SGD update) is a few hundred kernel
 * launches; replaying it as one CUDA graph removes the launch overhead, which matters for small
 * batches and for SM-partitioned devices. The captured graph works on the net's buffers in
 * place: hs_net_load of a batch of the same size replaces the data the next replay trains on,
 * and hs_net_result reads the replayed step's loss. The SGD settings are fixed at capture.
 *
 * Contract: capture needs a loaded batch; it builds whatever the step needs first (cuDNN plans,
 * workspaces), then records the step without running it. A replay is invalid after a load of a
 * different batch size (HS_EINVAL: capture again). hs_net_close frees the graph. Nets of other
 * backends, and builds without CUDA, answer HS_EUNSUPPORTED. Calls are asynchronous on the net's
 * stream, as the rest of a cuda net's calls. */
#ifndef HS_NN_CUDA_H
#define HS_NN_CUDA_H

#include "core/core_error.h"
#include "nn/nn_net.h"

/* Records forward(train) + backward + update(opt) of the loaded batch as a CUDA graph. */
int hs_net_cuda_capture_step(hs_net *n, const hs_sgd *opt, hs_diag *d);
/* Runs the captured step once on the net's stream. */
int hs_net_cuda_replay_step(hs_net *n, hs_diag *d);

#endif
