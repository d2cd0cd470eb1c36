/* real_worker: a worker's training on a net, shared by the two real runtimes: the threaded one
 * (real_run.c, a worker per thread) and the multi-process one (real_rank.c, a worker per
 * process). Both load a worker's next batch from its shard and run a training forward and
 * backward pass the same way, time a few steps before the run to predict step times when no
 * calibration is given, and emulate a slower device by sleeping after a step.
 *
 * Contract: a hs_real_worker is zeroed by its owner, who opens the net and the data iterator
 * and closes the net; hs_real_worker_free frees the batch buffers only. Not thread-safe: one
 * worker, one thread. Units: seconds, samples. */
#ifndef HS_REAL_WORKER_H
#define HS_REAL_WORKER_H

#include <stdint.h>

#include "core/core_error.h"
#include "nn/nn_data.h"
#include "nn/nn_net.h"
#include "policies/pol_compress.h"

typedef struct hs_real_worker {
  hs_net *net;        /* the owner's */
  hs_data_iter it;    /* the worker's shard */
  float *x;           /* input batch buffer */
  int32_t *y;
  int cap;            /* samples the buffers hold */
  /* The compressor state of what it sends (error feedback persists across sends). */
  hs_compress_slot cs;
  float *cbuf;        /* a vector padded to the compressor's matrix view */
  int prepared;       /* the batch the net was last prepared for (hs_real_worker_ready); 0 none */
} hs_real_worker;

/* The options a worker's net opens with in both runtimes: the run's seed, one thread, and every
 * wait for a GPU bounded by the run's timeout (timeout_s <= 0: 60 s, as the run's other waits),
 * so that a kernel that never ends fails the run instead of hanging a worker. */
hs_net_options hs_real_net_options(uint64_t seed, double timeout_s);

/* Before the run's clock starts: the worker's net made ready for steps of an equal share of the
 * global batch (hs_net_prepare: buffers, and on a GPU every convolution's cuDNN plans), so that
 * the first timed step is a step and not also the set-up. */
int hs_real_worker_prepare(hs_real_worker *w, int64_t global_batch, int workers, hs_diag *d);
/* Before a step's clock starts, in both runtimes: the net made ready for `batch` (hs_net_prepare)
 * unless it was for the worker's last one, so that a batch a policy gives later (lbb,
 * proportional) costs its set-up before the step, not in it, and a repeated batch costs nothing. */
int hs_real_worker_ready(hs_real_worker *w, int batch, hs_diag *d);

/* Loads the worker's next batch of `batch` samples of train into its net and runs a training
 * forward and backward pass: the gradients are in the net, the loss in *loss. */
int hs_real_worker_step(hs_real_worker *w, const hs_dataset *train, int batch, double *loss, hs_diag *d);

/* Times steps at two batch sizes around `share` (a warm-up, then the median of three at share / 2
 * and at share) and fits t = t0 + k * b (both clamped at 0), so that a runtime without a
 * calibration predicts steps with real numbers. The gradients are discarded; the data
 * iterator has moved on (the caller restarts it). */
int hs_real_worker_probe(hs_real_worker *w, const hs_dataset *train, int64_t share, double *t0, double *k, hs_diag *d);

/* Whether the run wants the sleep cut short (its end, a failure elsewhere, an interrupt). */
typedef int hs_real_stopped_fn(void *ctx);

/* The emulated slowdown's sleep of sec seconds, in slices of at most 20 ms so that stopped()
 * cuts it short; bounded by timeout like every other wait of the run: 0, or HS_ERUNTIME when
 * sec is longer (after sleeping timeout, the others having waited that long for this worker). */
int hs_real_sleep(double slow, double sec, double timeout, hs_real_stopped_fn *stopped, void *ctx, hs_diag *d);

/* Sends g (n floats, host memory) through the compressor c at ratio in place, as the
 * simulator's proxy model does (pol_compress.h's real round trip on the vector viewed as one
 * near-square matrix), with worker `worker`'s own context seeded from (seed, worker): what
 * arrives is what the compressor lets through. Nothing when c is NULL or ratio <= 0. */
int hs_real_worker_compress(hs_real_worker *w, const hs_compressor *c, double ratio, float *g, int64_t n,
                            uint64_t seed, int worker, hs_diag *d);

/* The same on the net's gradient, before an all-reduce of it (n floats): where the backend
 * reduces host memory (device_buffers 0) in place, in the net's own buffer; where it reduces
 * device buffers, copied out into host, compressed and copied back. */
int hs_real_worker_compress_grads(hs_real_worker *w, int device_buffers, float *host, const hs_compressor *c,
                                  double ratio, int64_t n, uint64_t seed, int worker, hs_diag *d);

/* The worker's progress for a MODEL push: out = its net's parameters - base, then base = the
 * parameters (P floats each, host memory). A host net's parameters are read where they are (one
 * pass); a device net's are copied out into out first. */
int hs_real_worker_model_delta(hs_real_worker *w, float *out, float *base, int64_t P, hs_diag *d);

/* Frees the batch buffers and the compressor state (not the net). */
void hs_real_worker_free(hs_real_worker *w);

#endif
