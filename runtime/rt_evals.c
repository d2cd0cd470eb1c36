/* Deferred evaluations of the global model: see rt_evals.h for the contract. */
#include "runtime/rt_evals.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_eval.h"

void hs_rt_evals_init(hs_rt_evals *q, hs_net *net, const hs_dataset *test, int64_t P, int targets) {
  q->net = net;
  q->test = test;
  q->P = P;
  q->targets = targets;
}

int hs_rt_evals_take(hs_rt_evals *q, float *model, double t, int64_t step, hs_diag *d) {
  hs_rt_eval *e = calloc(1, sizeof *e);
  if (!e) {
    free(model);
    return hs_diag_set(d, HS_ENOMEM, "out of memory for an evaluation");
  }
  e->time_s = t;
  e->step = step;
  e->model = model;
  if (q->tail) q->tail->next = e;
  else q->head = e;
  q->tail = e;
  q->n++;
  return 0;
}

int hs_rt_evals_keep(hs_rt_evals *q, const float *model, double t, int64_t step, hs_diag *d) {
  float *copy = malloc((size_t)q->P * sizeof *copy);
  if (!copy) return hs_diag_set(d, HS_ENOMEM, "out of memory for an evaluation");
  memcpy(copy, model, (size_t)q->P * sizeof *copy);
  return hs_rt_evals_take(q, copy, t, step, d);
}

int hs_rt_evals_online(const hs_rt_evals *q) {
  return q->head && (q->targets || (double)q->n * (double)q->P * sizeof(float) > HS_RT_EVALS_DEFER_BYTES);
}

hs_rt_eval *hs_rt_evals_pop(hs_rt_evals *q) {
  hs_rt_eval *e = q->head;
  if (!e) return NULL;
  q->head = e->next;
  if (!q->head) q->tail = NULL;
  q->n--;
  e->next = NULL;
  return e;
}

void hs_rt_eval_free(hs_rt_eval *e) {
  if (!e) return;
  free(e->model);
  free(e);
}

int hs_rt_evals_measure(const hs_rt_evals *q, const float *model, double *loss, double *acc, hs_diag *d) {
  *loss = *acc = NAN;
  return hs_net_evaluate_params(q->net, model, q->test, loss, acc, d);
}

int hs_rt_evals_store(hs_rt_core *c, double t, int64_t step, int rc, double loss, double acc, const hs_diag *d) {
  if (rc) return hs_rt_core_abort(c, rc, "evaluation at step %lld: %s", (long long)step, d->msg);
  return hs_rt_core_settle(c, hs_rt_core_eval(c, t, step, loss, acc));
}

/* Evaluates one model and stores the result. */
static int eval_one(hs_rt_evals *q, hs_rt_core *c, const float *model, double t, int64_t step) {
  double loss, acc;
  hs_diag d = {0};
  int rc = hs_rt_evals_measure(q, model, &loss, &acc, &d);
  return hs_rt_evals_store(c, t, step, rc, loss, acc, &d);
}

int hs_rt_evals_drain(hs_rt_evals *q, hs_rt_core *c, const float *final) {
  int first = 0;
  for (hs_rt_eval *e; (e = hs_rt_evals_pop(q));) {
    int rc = q->net ? eval_one(q, c, e->model, e->time_s, e->step) : 0;
    if (rc && !first) first = rc;
    hs_rt_eval_free(e);
  }
  if (!first && !c->failed && final && q->net && hs_rt_core_final_eval_due(c)) first = eval_one(q, c, final, c->end, c->iterations);
  return first;
}

void hs_rt_evals_clear(hs_rt_evals *q) {
  for (hs_rt_eval *e; (e = hs_rt_evals_pop(q));) hs_rt_eval_free(e);
}
