/* rt_model: the arithmetic on the global model, written once for every runtime that holds one:
 * the simulator's proxy convergence model (sim/sim_proxy.c), the threaded real runtime's
 * parameter server and all-reduce update (real/real_run.c) and the multi-process runtime's
 * server and replicas (real/real_rank.c).
 *
 *   weights            w_i = v_i / sum v (v_i the given weight, or participant i's last batch);
 *                      1/n each when the sum is 0
 *   all-reduce GRAD    global -= lr * sum_i w_i g_i      (the reduced vector comes in)
 *   all-reduce MODEL   global  = sum_i w_i x_i
 *   push GRAD          global -= lr * weight * g          (HS_PS_APPLY), or accumulated as
 *                      acc += b * weight * g, acc_w += b  (HS_PS_ACCUMULATE; b its batch)
 *   push MODEL         global += weight * delta, or acc += weight * delta, acc_w += 1
 *   apply              global -= lr * acc / acc_w (gradients) or global += acc / acc_w (model
 *                      deltas); the accumulator is emptied
 *   model delta        delta = x - base; base = x       (a worker's progress since its last sync)
 *
 * Precision: one, fp32 (float) everywhere, accumulator included: the vectors are fp32 on the
 * wire and in the nets, and the simulator's proxy model, whose results the golden tests pin,
 * has always accumulated in float. Each element's arithmetic is fixed (x + (-lr) * g, never
 * fused), so every holder of the same model rounds alike and replicas stay bit-identical.
 *
 * Contract: a hs_runtime_model is zeroed, opened with its size and closed by its owner; it is
 * not thread-safe (the runtimes serialise the updates of their global model). The vector
 * functions take restrict pointers: their arguments never overlap (the model delta excepted). Units: floats, samples. */
#ifndef HS_RT_MODEL_H
#define HS_RT_MODEL_H

#include <stdint.h>

#include "core/core_error.h"
#include "policies/pol_policy.h"

typedef struct hs_runtime_model {
  int64_t P;        /* floats per model */
  float *global;    /* the global model (P floats; zero when opened) */
  float *acc;       /* accumulated pushes (P floats) */
  double acc_w;     /* GRAD: sum of the accumulated batches; MODEL: their count */
  int acc_model;    /* the accumulated pushes are model deltas */
} hs_runtime_model;

/* 0, or HS_ENOMEM with the message in d. */
int hs_runtime_model_open(hs_runtime_model *m, int64_t P, hs_diag *d);
void hs_runtime_model_close(hs_runtime_model *m);

/* v[i] <- v[i] / sum v over n >= 1 values (finite, not negative: the runtime core's checks);
 * 1/n each when the sum is 0. */
void hs_runtime_weights(double *v, int n);

/* y = a x; y += a x; x -= lr g (as x + (-lr) g), the result also written to q unless q is
 * NULL (a net that holds the same model updated in the same pass). */
void hs_runtime_vec_scale(float *restrict y, const float *restrict x, float a, int64_t n);
void hs_runtime_vec_axpy(float *restrict y, const float *restrict x, float a, int64_t n);
void hs_runtime_vec_sgd(float *restrict x, float *restrict q, const float *restrict g, float lr, int64_t n);

/* The global model takes an all-reduce's result red: GRAD, global -= lr * red (also written to
 * q unless NULL); MODEL, global = red (q ignored). */
void hs_runtime_model_allreduced(hs_runtime_model *m, hs_comm_what what, const float *red, double lr, float *q);

/* A push arrives: buf (P floats, scaled in place by weight when weight > 0 and != 1) is
 * applied or accumulated as the header says; batch is the pushing worker's last batch. */
void hs_runtime_model_push(hs_runtime_model *m, hs_comm_what what, hs_ps_mode mode, float *buf, double batch,
                           double weight, double lr);

/* Applies the accumulated pushes (nothing when none) and empties the accumulator. */
void hs_runtime_model_apply(hs_runtime_model *m, double lr);

/* delta = x - base, then base = x (n floats); delta is x itself (in place), or overlaps neither
 * x nor base; base overlaps neither. */
void hs_runtime_model_delta(float *delta, const float *x, float *base, int64_t n);

#endif
