/* What the runtimes of the policy interface do alike: see rt_runtime.h for the contract. */
#include "runtime/rt_runtime.h"

#include <stdlib.h>

void hs_runtime_policy_failed(hs_diag *d, const char *policy, int rc) {
  if (!d->msg[0]) hs_diag_set(d, rc, "policy %s failed (%s)", policy, hs_strerror(rc));
}

void hs_runtime_summary(hs_summary *m, int workers, int64_t iterations, int64_t events, int64_t samples,
                        double end) {
  m->workers = workers;
  m->iterations = iterations;
  m->events = events;
  m->samples = samples;
  m->sim_time_s = end;
  m->mean_iteration_s = iterations > 0 ? end / (double)iterations : NAN;
  m->samples_per_s = end > 0 ? (double)samples / end : NAN;
  m->wall_s = NAN;
  m->final_loss = m->final_accuracy = m->time_to_target_s = NAN;
}

int hs_runtime_no_max_batch(hs_runtime *rt, int w) {
  (void)rt, (void)w;
  return 0;
}

double hs_runtime_predict(const hs_perf_model *perf, double t0, double k, double slowdown, int batch) {
  double slow = slowdown > 1 ? slowdown : 1.0;
  if (perf) return hs_perf_eval(perf, (double)batch) * slow;
  double t = t0 + k * (double)batch;
  return (t > 0 ? t : 0) * slow;
}

/* --- timers: a binary heap on (at, seq) ---------------------------------------------------- */

static int earlier(const hs_runtime_timer *a, const hs_runtime_timer *b) {
  return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

int hs_runtime_timers_add(hs_runtime_timers *q, double at, int cluster_event, uint64_t tag, hs_diag *d) {
  if (q->n == q->cap) {
    int nc = q->cap ? 2 * q->cap : 16;
    hs_runtime_timer *h = realloc(q->heap, (size_t)nc * sizeof *h);
    if (!h) return hs_diag_set(d, HS_ENOMEM, "out of memory for timers");
    q->heap = h;
    q->cap = nc;
  }
  hs_runtime_timer t = {.at = at, .cluster_event = cluster_event, .tag = tag, .seq = q->next_seq++};
  int i = q->n++;
  while (i > 0) {
    int p = (i - 1) / 2;
    if (!earlier(&t, &q->heap[p])) break;
    q->heap[i] = q->heap[p];
    i = p;
  }
  q->heap[i] = t;
  return 0;
}

int hs_runtime_timers_pop(hs_runtime_timers *q, double now, hs_runtime_timer *t, double *next) {
  if (!q->n) {
    *next = INFINITY;
    return 0;
  }
  if (q->heap[0].at > now) {
    *next = q->heap[0].at;
    return 0;
  }
  *t = q->heap[0];
  hs_runtime_timer last = q->heap[--q->n];
  int i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= q->n) break;
    if (c + 1 < q->n && earlier(&q->heap[c + 1], &q->heap[c])) c++;
    if (!earlier(&q->heap[c], &last)) break;
    q->heap[i] = q->heap[c];
    i = c;
  }
  if (q->n) q->heap[i] = last;
  return 1;
}

void hs_runtime_timers_free(hs_runtime_timers *q) {
  free(q->heap);
  q->heap = NULL;
  q->n = q->cap = 0;
}
