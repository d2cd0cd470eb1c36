#include "calib/cal_comm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double hs_cal_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct ring {
  int world;
  size_t n;                   /* floats per buffer */
  float **buf;
  pthread_barrier_t bar;
  const hs_cal_comm_opts *o;
  int done;                   /* written by thread 0 between barriers */
  int rc;                     /* thread 0's verdict */
  int reps;                   /* repetitions run, warm-up included */
  double *samples;            /* timed repetitions */
  int nsamples;
  hs_diag *d;
} ring;

typedef struct ring_arg {
  ring *r;
  int rank;
} ring_arg;

static void chunk(const ring *r, int c, size_t *lo, size_t *hi) {
  *lo = r->n * (size_t)c / (size_t)r->world;
  *hi = r->n * (size_t)(c + 1) / (size_t)r->world;
}

static void allreduce_once(ring *r, int rank) {
  int w = r->world;
  float *dst = r->buf[rank];
  const float *src = r->buf[(rank - 1 + w) % w];
  size_t lo, hi;
  for (int s = 0; s < w - 1; s++) { /* reduce-scatter */
    chunk(r, ((rank - 1 - s) % w + w) % w, &lo, &hi);
    for (size_t i = lo; i < hi; i++) dst[i] += src[i];
    pthread_barrier_wait(&r->bar);
  }
  for (int s = 0; s < w - 1; s++) { /* all-gather */
    chunk(r, ((rank - s) % w + w) % w, &lo, &hi);
    memcpy(dst + lo, src + lo, (hi - lo) * sizeof *dst);
    pthread_barrier_wait(&r->bar);
  }
}

static void *ring_main(void *p) {
  ring_arg *a = p;
  ring *r = a->r;
  for (;;) {
    pthread_barrier_wait(&r->bar);
    if (r->done) break;
    double t0 = a->rank == 0 ? hs_cal_now() : 0;
    allreduce_once(r, a->rank);
    pthread_barrier_wait(&r->bar);
    if (a->rank == 0) {
      double t = hs_cal_now() - t0;
      if (r->reps++ >= r->o->warmup) r->samples[r->nsamples++] = t;
      if (r->o->stop && *r->o->stop) {
        r->rc = hs_diag_set(r->d, HS_EINTR, "interrupted");
        r->done = 1;
      } else if (r->nsamples > 0) {
        int st = hs_cal_stable(r->samples, r->nsamples, &r->o->rule, r->d);
        if (st < 0) r->rc = st;
        r->done = st != 0;
      }
    }
  }
  return NULL;
}

int hs_cal_time_allreduce(int world, int64_t bytes, const hs_cal_comm_opts *o,
                          hs_cal_stats *out, hs_diag *d) {
  int rc = hs_cal_rule_check(&o->rule, d);
  if (rc) return rc;
  if (world < 2 || world > 1024) return hs_diag_set(d, HS_EINVAL, "all-reduce: world size must be 2 to 1024, got %d", world);
  if (bytes < 4) return hs_diag_set(d, HS_EINVAL, "all-reduce: message must be at least 4 bytes, got %lld", (long long)bytes);
  ring r = {.world = world, .n = (size_t)bytes / sizeof(float), .o = o, .d = d};
  r.buf = calloc((size_t)world, sizeof *r.buf);
  r.samples = malloc((size_t)o->rule.max_reps * sizeof *r.samples);
  pthread_t *th = calloc((size_t)world, sizeof *th);
  ring_arg *args = calloc((size_t)world, sizeof *args);
  int ok = r.buf && r.samples && th && args;
  for (int i = 0; ok && i < world; i++) ok = (r.buf[i] = calloc(r.n, sizeof(float))) != NULL;
  if (!ok) {
    rc = hs_diag_set(d, HS_ENOMEM, "all-reduce: out of memory for %d buffers of %lld bytes", world, (long long)bytes);
    goto out;
  }
  if (pthread_barrier_init(&r.bar, NULL, (unsigned)world)) {
    rc = hs_diag_set(d, HS_ERUNTIME, "all-reduce: cannot create a barrier");
    goto out;
  }
  int started = 0;
  for (int i = 1; i < world; i++) {
    args[i] = (ring_arg){.r = &r, .rank = i};
    if (pthread_create(&th[i], NULL, ring_main, &args[i])) break;
    started++;
  }
  if (started < world - 1) {
    /* Release the started threads: they wait at the first barrier for all world members,
     * which will never come, so they are cancelled instead. */
    for (int i = 1; i <= started; i++) pthread_cancel(th[i]);
    for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&r.bar);
    rc = hs_diag_set(d, HS_ERUNTIME, "all-reduce: cannot start %d threads", world);
    goto out;
  }
  args[0] = (ring_arg){.r = &r, .rank = 0};
  ring_main(&args[0]);
  for (int i = 1; i < world; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&r.bar);
  rc = r.rc;
  if (!rc) rc = hs_cal_stats_of(r.samples, r.nsamples, out, d);
out:
  for (int i = 0; r.buf && i < world; i++) free(r.buf[i]);
  free(r.buf);
  free(r.samples);
  free(th);
  free(args);
  return rc;
}

int hs_cal_time_p2p(int64_t bytes, const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d) {
  int rc = hs_cal_rule_check(&o->rule, d);
  if (rc) return rc;
  if (bytes < 1) return hs_diag_set(d, HS_EINVAL, "p2p: message must be at least 1 byte, got %lld", (long long)bytes);
  char *src = malloc((size_t)bytes), *dst = malloc((size_t)bytes);
  double *samples = malloc((size_t)o->rule.max_reps * sizeof *samples);
  if (!src || !dst || !samples) {
    rc = hs_diag_set(d, HS_ENOMEM, "p2p: out of memory for two buffers of %lld bytes", (long long)bytes);
    goto out;
  }
  memset(src, 1, (size_t)bytes);
  memset(dst, 0, (size_t)bytes);
  int n = 0;
  for (int rep = 0;; rep++) {
    if (o->stop && *o->stop) {
      rc = hs_diag_set(d, HS_EINTR, "interrupted");
      goto out;
    }
    double t0 = hs_cal_now();
    memcpy(dst, src, (size_t)bytes);
    double t = hs_cal_now() - t0;
    /* Keep the copy observable so that it is not optimised away. */
    src[rep % bytes] = dst[(rep + 1) % bytes];
    if (rep < o->warmup) continue;
    samples[n++] = t;
    int st = hs_cal_stable(samples, n, &o->rule, d);
    if (st < 0) {
      rc = st;
      goto out;
    }
    if (st) break;
  }
  rc = hs_cal_stats_of(samples, n, out, d);
out:
  free(src);
  free(dst);
  free(samples);
  return rc;
}
