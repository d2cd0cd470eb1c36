/* rt_evals: the evaluations a real driver defers. At an update that is due an evaluation
 * (rt_core.h's snapshot), a driver keeps a copy of the global model with the update's time and
 * step; evaluating it later gives the same result and is stored with the same time and step,
 * so it waits, where it takes no core from the workers, until the end of the run, unless the
 * run has a target (each evaluation may end it) or the waiting copies grow past
 * HS_RT_EVALS_DEFER_BYTES: then the driver evaluates them during the run (hs_rt_evals_online).
 * Used by the threads (real/real_run.c) and the ranks' coordinator (real/real_rank.c); the
 * simulator evaluates its convergence model at once.
 *
 * Contract: a queue is zeroed, given its net, test set and model size (hs_rt_evals_init) and
 * emptied by hs_rt_evals_clear; it owns the queued models, not the net. Not thread-safe: the
 * driver serialises it as it serialises the core; hs_rt_evals_measure only reads the net and
 * the model it is given, so a driver may run it outside its lock on an entry it popped.
 * Units: seconds, floats, bytes. */
#ifndef HS_RT_EVALS_H
#define HS_RT_EVALS_H

#include <stdint.h>

#include "core/core_error.h"
#include "nn/nn_data.h"
#include "nn/nn_net.h"
#include "runtime/rt_core.h"

/* Waiting copies beyond this many bytes are evaluated during the run. */
#define HS_RT_EVALS_DEFER_BYTES (256.0 * 1024 * 1024)

typedef struct hs_rt_eval {
  double time_s;        /* s, when the update was counted */
  int64_t step;         /* the update (global updates so far) */
  float *model;         /* P floats, owned */
  struct hs_rt_eval *next;
} hs_rt_eval;

typedef struct hs_rt_evals {
  hs_net *net;          /* the evaluation net (the driver's); NULL: nothing is evaluated */
  const hs_dataset *test;
  int64_t P;            /* floats per model */
  int targets;          /* the run has a target loss or accuracy */
  hs_rt_eval *head, *tail;
  int64_t n;            /* waiting */
} hs_rt_evals;

void hs_rt_evals_init(hs_rt_evals *q, hs_net *net, const hs_dataset *test, int64_t P, int targets);
/* Queues a copy of model (P floats) for the update `step` at time t: 0, or HS_ENOMEM with the
 * message in d. */
int hs_rt_evals_keep(hs_rt_evals *q, const float *model, double t, int64_t step, hs_diag *d);
/* Queues model itself (malloc'd, P floats; the queue owns it from now, and frees it on
 * failure): 0, or HS_ENOMEM. */
int hs_rt_evals_take(hs_rt_evals *q, float *model, double t, int64_t step, hs_diag *d);
/* Whether the waiting models are evaluated now (during the run): there are some, and a target
 * needs their answers or they take more than HS_RT_EVALS_DEFER_BYTES. */
int hs_rt_evals_online(const hs_rt_evals *q);
/* The first waiting model (the caller frees it with hs_rt_eval_free), or NULL. */
hs_rt_eval *hs_rt_evals_pop(hs_rt_evals *q);
void hs_rt_eval_free(hs_rt_eval *e);
/* Evaluates model (P floats) on the test set: 0, or the net's error with its message in d. */
int hs_rt_evals_measure(const hs_rt_evals *q, const float *model, double *loss, double *acc, hs_diag *d);
/* Stores the outcome of measuring the model of update `step` at time t (rc, loss, acc and d as
 * hs_rt_evals_measure left them): the evaluation (hs_rt_core_eval), or the run fails with the
 * net's message. Returns 0 or the failure's code. */
int hs_rt_evals_store(hs_rt_core *c, double t, int64_t step, int rc, double loss, double acc, const hs_diag *d);
/* Evaluates and stores (hs_rt_core_eval) every waiting model, in order, then the final model
 * `final` at the run's end unless its update was just evaluated or the run failed (final NULL:
 * none). Every one
 * is tried, after a failure too, so that what was due before it is stored; the first failure
 * fails the run (hs_rt_core_settle) and is returned. */
int hs_rt_evals_drain(hs_rt_evals *q, hs_rt_core *c, const float *final);
/* Frees the waiting models. */
void hs_rt_evals_clear(hs_rt_evals *q);

#endif
