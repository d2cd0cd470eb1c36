/* A worker's training on a net: see real_worker.h for the contract. */
#define _GNU_SOURCE
#include "real/real_worker.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "real/real_comm.h"
#include "runtime/rt_model.h"

hs_net_options hs_real_net_options(uint64_t seed, double timeout_s) {
  return (hs_net_options){.seed = seed, .max_batch = 0, .threads = 1, .wait_s = hs_real_timeout(timeout_s)};
}

int hs_real_worker_prepare(hs_real_worker *w, int64_t global_batch, int workers, hs_diag *d) {
  int64_t share = workers > 0 ? global_batch / workers : global_batch;
  hs_diag pd = {0};
  int batch = share < 1 ? 1 : share > INT32_MAX ? INT32_MAX : (int)share;
  int rc = hs_net_prepare(w->net, batch, &pd);
  if (!rc) w->prepared = batch;
  /* Out of memory at the equal share is not the run's failure: the policy may give this worker
   * less (the net stays usable at what it holds), and a batch that does not fit fails its step. */
  if (rc && rc != HS_ENOMEM) return hs_diag_set(d, rc, "%s", pd.msg);
  return 0;
}

int hs_real_worker_ready(hs_real_worker *w, int batch, hs_diag *d) {
  if (batch == w->prepared) return 0;
  int rc = hs_net_prepare(w->net, batch, d);
  if (!rc) w->prepared = batch;
  return rc;
}

int hs_real_worker_step(hs_real_worker *w, const hs_dataset *train, int batch, double *loss, hs_diag *d) {
  if (batch > w->cap) {
    int c, h, wd;
    hs_data_shape(train, &c, &h, &wd);
    float *nx = realloc(w->x, (size_t)batch * (size_t)(c * h * wd) * sizeof *nx);
    if (nx) w->x = nx;
    int32_t *ny = realloc(w->y, (size_t)batch * sizeof *ny);
    if (ny) w->y = ny;
    if (!nx || !ny) return hs_diag_set(d, HS_ENOMEM, "out of memory for a batch of %d samples", batch);
    w->cap = batch;
  }
  int rc, correct;
  if ((rc = hs_data_iter_next(&w->it, batch, w->x, w->y, NULL, d)) || (rc = hs_net_load(w->net, w->x, w->y, batch, d)) ||
      (rc = hs_net_forward(w->net, 1, d)) || (rc = hs_net_backward(w->net, d)) ||
      (rc = hs_net_result(w->net, loss, &correct, d)))
    return rc;
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int hs_real_worker_probe(hs_real_worker *w, const hs_dataset *train, int64_t share, double *t0, double *k, hs_diag *d) {
  int b2 = (int)(share > 1 ? share : 2), b1 = b2 / 2 > 0 ? b2 / 2 : 1;
  double med[2];
  int bs[2] = {b1, b2};
  for (int j = 0; j < 2; j++) {
    double t[3], loss;
    int rc = hs_real_worker_step(w, train, bs[j], &loss, d); /* warm-up */
    for (int r = 0; !rc && r < 3; r++) {
      double a = hs_real_mono();
      rc = hs_real_worker_step(w, train, bs[j], &loss, d);
      t[r] = hs_real_mono() - a;
    }
    if (rc) return rc;
    qsort(t, 3, sizeof t[0], cmp_double);
    med[j] = t[1];
  }
  *k = b2 > b1 ? (med[1] - med[0]) / (double)(b2 - b1) : 0;
  if (*k < 0) *k = 0;
  *t0 = med[0] - *k * (double)b1;
  if (*t0 < 0) *t0 = 0;
  return 0;
}

int hs_real_sleep(double slow, double sec, double timeout, hs_real_stopped_fn *stopped, void *ctx, hs_diag *d) {
  if (!(sec > 0)) return 0;
  double end = hs_real_mono() + fmin(sec, timeout);
  for (;;) {
    if (stopped(ctx)) return 0;
    double left = end - hs_real_mono();
    if (left <= 0) break;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(fmin(left, 0.02) * 1e9)};
    nanosleep(&ts, NULL); /* a signal ends a slice early: the loop looks at the flags again */
  }
  if (sec > timeout)
    return hs_diag_set(d, HS_ERUNTIME, "its emulated slowdown (%g) stretches a step by %g s, past --timeout %g s", slow,
                       sec, timeout);
  return 0;
}

int hs_real_worker_compress(hs_real_worker *w, const hs_compressor *c, double ratio, float *g, int64_t n,
                            uint64_t seed, int worker, hs_diag *d) {
  if (!c || !(ratio > 0)) return 0;
  hs_block b = hs_compress_flat_block((double)n);
  if (!w->cbuf && !(w->cbuf = calloc((size_t)(b.rows * b.cols), sizeof *w->cbuf)))
    return hs_diag_set(d, HS_ENOMEM, "out of memory for the compressor's buffer");
  return hs_compress_slot_send(&w->cs, c, ratio, g, n, w->cbuf, seed, (uint64_t)worker, d);
}

int hs_real_worker_compress_grads(hs_real_worker *w, int device_buffers, float *host, const hs_compressor *c,
                                  double ratio, int64_t n, uint64_t seed, int worker, hs_diag *d) {
  if (!c || !(ratio > 0)) return 0;
  if (!device_buffers) return hs_real_worker_compress(w, c, ratio, hs_net_grads(w->net), n, seed, worker, d);
  int rc = hs_net_get_grads(w->net, host, d);
  if (!rc) rc = hs_real_worker_compress(w, c, ratio, host, n, seed, worker, d);
  return rc ? rc : hs_net_set_grads(w->net, host, d);
}

void hs_real_worker_free(hs_real_worker *w) {
  hs_compress_slot_close(&w->cs);
  free(w->cbuf);
  w->cbuf = NULL;
  free(w->x);
  free(w->y);
  w->x = NULL;
  w->y = NULL;
  w->cap = 0;
}

int hs_real_worker_model_delta(hs_real_worker *w, float *out, float *base, int64_t P, hs_diag *d) {
  if (!strcmp(hs_net_backend(w->net), "cpu")) {
    hs_runtime_model_delta(out, hs_net_params(w->net), base, P);
    return 0;
  }
  int rc = hs_net_get_params(w->net, out, d);
  if (!rc) hs_runtime_model_delta(out, out, base, P);
  return rc;
}
