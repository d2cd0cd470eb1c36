#include "calib/cal_comm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core_affinity.h"

double hs_cal_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --- lock-step timing over threads -------------------------------------------------------- */

typedef struct lockstep_run {
  const hs_cal_lockstep *ls;
  const hs_cal_comm_opts *o;
  const hs_cpus *cpus;        /* thread i pinned to cpus->id[i] when not NULL */
  pthread_barrier_t bar;
  pthread_mutex_t mu;
  uint64_t rep;               /* repetitions run, warm-up included: written by thread 0 between barriers */
  int done;                   /* written by thread 0 between barriers */
  int rc;                     /* the first failure (under mu), or thread 0's verdict */
  hs_diag err;
  double *samples;            /* timed repetitions */
  int nsamples;
} lockstep_run;

typedef struct lockstep_arg {
  lockstep_run *r;
  int rank;
} lockstep_arg;

static void *lockstep_main(void *p) {
  lockstep_arg *a = p;
  lockstep_run *r = a->r;
  const hs_cal_lockstep *ls = r->ls;
  if (r->cpus) hs_pin_self(r->cpus, a->rank);
  for (;;) {
    if (ls->prepare) ls->prepare(ls->ctx, a->rank);
    pthread_barrier_wait(&r->bar);
    double t0 = a->rank == 0 ? hs_cal_now() : 0;
    hs_diag od = {0};
    int rc = ls->op(ls->ctx, a->rank, r->rep, &od);
    if (rc) {
      pthread_mutex_lock(&r->mu);
      if (!r->rc) r->rc = rc, r->err = od;
      pthread_mutex_unlock(&r->mu);
      if (ls->abort) ls->abort(ls->ctx); /* the others return instead of waiting for this one */
    }
    pthread_barrier_wait(&r->bar);
    if (a->rank == 0) {
      double t = hs_cal_now() - t0;
      pthread_mutex_lock(&r->mu);
      int failed = r->rc;
      pthread_mutex_unlock(&r->mu);
      if (failed) {
        r->done = 1;
      } else if (r->o->stop && *r->o->stop) {
        r->rc = hs_diag_set(&r->err, HS_EINTR, "interrupted");
        r->done = 1;
      } else {
        if (r->rep++ >= (uint64_t)r->o->warmup) r->samples[r->nsamples++] = t;
        if (r->nsamples > 0) {
          int st = hs_cal_stable(r->samples, r->nsamples, &r->o->rule, &r->err);
          if (st < 0) r->rc = st;
          r->done = st != 0;
        }
      }
    }
    /* Thread 0's verdict, seen by all: another repetition, or the end (the buffers then hold
     * the last operation's result). */
    pthread_barrier_wait(&r->bar);
    if (r->done) break;
  }
  return NULL;
}

int hs_cal_time_lockstep(const hs_cal_lockstep *ls, const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d) {
  int rc = hs_cal_rule_check(&o->rule, d);
  if (rc) return rc;
  int world = ls->world;
  if (world < 1 || world > 1024) return hs_diag_set(d, HS_EINVAL, "lock-step timing: 1 to 1024 threads, got %d", world);
  lockstep_run r = {.ls = ls, .o = o};
  hs_cpus cpus;
  if (!o->no_pin && hs_cpus_allowed(&cpus) >= world) r.cpus = &cpus; /* as the runtime pins its workers */
  r.samples = malloc((size_t)o->rule.max_reps * sizeof *r.samples);
  pthread_t *th = calloc((size_t)world, sizeof *th);
  lockstep_arg *args = calloc((size_t)world, sizeof *args);
  if (!r.samples || !th || !args) {
    rc = hs_diag_set(d, HS_ENOMEM, "lock-step timing: out of memory for %d threads", world);
    goto out;
  }
  if (pthread_barrier_init(&r.bar, NULL, (unsigned)world)) {
    rc = hs_diag_set(d, HS_ERUNTIME, "lock-step timing: cannot create a barrier");
    goto out;
  }
  pthread_mutex_init(&r.mu, NULL);
  int started = 0;
  for (int i = 1; i < world; i++) {
    args[i] = (lockstep_arg){.r = &r, .rank = i};
    if (pthread_create(&th[i], NULL, lockstep_main, &args[i])) break;
    started++;
  }
  if (started < world - 1) {
    /* The started threads wait at the first barrier for members that will never come: they
     * are cancelled instead. */
    for (int i = 1; i <= started; i++) pthread_cancel(th[i]);
    for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
    rc = hs_diag_set(d, HS_ERUNTIME, "lock-step timing: cannot start %d threads", world);
  } else {
    args[0] = (lockstep_arg){.r = &r, .rank = 0};
    lockstep_main(&args[0]);
    if (r.cpus) hs_pin_restore(r.cpus);
    for (int i = 1; i < world; i++) pthread_join(th[i], NULL);
    rc = r.rc ? hs_diag_set(d, r.rc, "%s", r.err.msg) : hs_cal_stats_of(r.samples, r.nsamples, out, d);
  }
  pthread_mutex_destroy(&r.mu);
  pthread_barrier_destroy(&r.bar);
out:
  free(r.samples);
  free(th);
  free(args);
  return rc;
}

/* --- the cpu backend's all-reduce -------------------------------------------------------- */

typedef struct ring {
  int world;
  size_t n;                   /* floats per buffer */
  float **buf;
  double *wts;                /* 1/world each, as the backend weighs an equal-batch all-reduce */
  pthread_barrier_t bar;      /* between the reduce and the gather */
} ring;

static void chunk_of(int64_t n, int nranks, int c, int64_t *lo, int64_t *hi) {
  *lo = n * c / nranks;
  *hi = n * (c + 1) / nranks;
}

void hs_cal_reduce_chunk(float *const *bufs, const double *wts, int nranks, int me, int64_t n) {
  enum { BLOCK = 1024 };
  float tmp[BLOCK];
  int64_t lo, hi;
  chunk_of(n, nranks, me, &lo, &hi);
  for (int64_t b = lo; b < hi; b += BLOCK) {
    int64_t m = hi - b < BLOCK ? hi - b : BLOCK;
    const float w0 = (float)wts[0], *src = bufs[0] + b;
    for (int64_t i = 0; i < m; i++) tmp[i] = w0 * src[i];
    for (int j = 1; j < nranks; j++) {
      const float wj = (float)wts[j];
      src = bufs[j] + b;
      for (int64_t i = 0; i < m; i++) tmp[i] += wj * src[i];
    }
    memcpy(bufs[me] + b, tmp, (size_t)m * sizeof *tmp);
  }
}

void hs_cal_gather_chunks(float *const *bufs, int nranks, int me, int64_t n) {
  for (int j = 0; j < nranks; j++) {
    if (j == me) continue;
    int64_t lo, hi;
    chunk_of(n, nranks, j, &lo, &hi);
    memcpy(bufs[me] + lo, bufs[j] + lo, (size_t)(hi - lo) * sizeof(float));
  }
}

void hs_cal_reduce_all(float *const *bufs, const double *wts, int nranks, int64_t n) {
  for (int c = 0; c < nranks; c++) hs_cal_reduce_chunk(bufs, wts, nranks, c, n);
  for (int me = 0; me < nranks; me++) hs_cal_gather_chunks(bufs, nranks, me, n);
}

/* Untimed: each participant first writes its own buffer, as a backward pass leaves its
 * gradient, so that the all-reduce reads and writes the others' buffers where a run finds them,
 * in the cache of the core that wrote them, not in the timing thread's own. */
static void ring_prepare(void *ctx, int rank) {
  ring *r = ctx;
  float *mine = r->buf[rank], v = (float)(rank + 1);
  for (size_t i = 0; i < r->n; i++) mine[i] = v;
}

static int ring_allreduce(void *ctx, int rank, uint64_t rep, hs_diag *d) {
  (void)rep, (void)d;
  ring *r = ctx;
  if (r->world <= HS_CAL_SERIAL_RANKS) {
    if (rank == 0) hs_cal_reduce_all(r->buf, r->wts, r->world, (int64_t)r->n);
    return 0;
  }
  hs_cal_reduce_chunk(r->buf, r->wts, r->world, rank, (int64_t)r->n);
  pthread_barrier_wait(&r->bar);
  hs_cal_gather_chunks(r->buf, r->world, rank, (int64_t)r->n);
  return 0;
}

int hs_cal_time_allreduce(int world, int64_t bytes, const hs_cal_comm_opts *o,
                          hs_cal_stats *out, hs_diag *d) {
  int rc = hs_cal_rule_check(&o->rule, d);
  if (rc) return rc;
  if (world < 2 || world > 1024) return hs_diag_set(d, HS_EINVAL, "all-reduce: world size must be 2 to 1024, got %d", world);
  if (bytes < 4) return hs_diag_set(d, HS_EINVAL, "all-reduce: message must be at least 4 bytes, got %lld", (long long)bytes);
  ring r = {.world = world, .n = (size_t)bytes / sizeof(float)};
  r.buf = calloc((size_t)world, sizeof *r.buf);
  r.wts = malloc((size_t)world * sizeof *r.wts);
  int ok = r.buf && r.wts;
  for (int i = 0; ok && i < world; i++) r.wts[i] = 1.0 / world;
  for (int i = 0; ok && i < world; i++) ok = (r.buf[i] = calloc(r.n, sizeof(float))) != NULL;
  if (!ok) {
    rc = hs_diag_set(d, HS_ENOMEM, "all-reduce: out of memory for %d buffers of %lld bytes", world, (long long)bytes);
  } else if (pthread_barrier_init(&r.bar, NULL, (unsigned)world)) {
    rc = hs_diag_set(d, HS_ERUNTIME, "all-reduce: cannot create a barrier");
  } else {
    hs_cal_lockstep ls = {.world = world, .ctx = &r, .prepare = ring_prepare, .op = ring_allreduce};
    rc = hs_cal_time_lockstep(&ls, o, out, d);
    if (rc) hs_diag_prefix(d, "all-reduce");
    pthread_barrier_destroy(&r.bar);
  }
  for (int i = 0; r.buf && i < world; i++) free(r.buf[i]);
  free(r.buf);
  free(r.wts);
  return rc;
}

int hs_cal_time_series(hs_cal_sample_fn *sample, void *ctx, const hs_cal_comm_opts *o, hs_cal_stats *out,
                       hs_diag *d) {
  int rc = hs_cal_rule_check(&o->rule, d);
  if (rc) return rc;
  double *samples = malloc((size_t)o->rule.max_reps * sizeof *samples);
  if (!samples) return hs_diag_set(d, HS_ENOMEM, "out of memory for %d samples", o->rule.max_reps);
  int n = 0;
  for (int rep = 0; !rc; rep++) {
    if (o->stop && *o->stop) {
      rc = hs_diag_set(d, HS_EINTR, "interrupted");
      break;
    }
    double t = 0;
    if ((rc = sample(ctx, rep, &t, d))) break;
    if (rep < o->warmup) continue;
    samples[n++] = t;
    int st = hs_cal_stable(samples, n, &o->rule, d);
    if (st < 0) rc = st;
    else if (st) break;
  }
  if (!rc) rc = hs_cal_stats_of(samples, n, out, d);
  free(samples);
  return rc;
}

typedef struct p2p_bufs {
  char *src, *dst;
  int64_t bytes;
} p2p_bufs;

/* What the cpu backend does for one message: send copies into a fresh buffer in its mailbox,
 * recv copies out of it and frees it. */
static int p2p_sample(void *ctx, int rep, double *t, hs_diag *d) {
  p2p_bufs *b = ctx;
  double t0 = hs_cal_now();
  char *msg = malloc((size_t)b->bytes);
  if (!msg) return hs_diag_set(d, HS_ENOMEM, "p2p: out of memory for a message of %lld bytes", (long long)b->bytes);
  memcpy(msg, b->src, (size_t)b->bytes);
  memcpy(b->dst, msg, (size_t)b->bytes);
  free(msg);
  *t = hs_cal_now() - t0;
  /* Keep the copy observable so that it is not optimised away. */
  b->src[rep % b->bytes] = b->dst[(rep + 1) % b->bytes];
  return 0;
}

int hs_cal_time_p2p(int64_t bytes, const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d) {
  int rc = hs_cal_rule_check(&o->rule, d);
  if (rc) return rc;
  if (bytes < 1) return hs_diag_set(d, HS_EINVAL, "p2p: message must be at least 1 byte, got %lld", (long long)bytes);
  p2p_bufs b = {.src = malloc((size_t)bytes), .dst = malloc((size_t)bytes), .bytes = bytes};
  if (!b.src || !b.dst) {
    rc = hs_diag_set(d, HS_ENOMEM, "p2p: out of memory for two buffers of %lld bytes", (long long)bytes);
  } else {
    memset(b.src, 1, (size_t)bytes);
    memset(b.dst, 0, (size_t)bytes);
    rc = hs_cal_time_series(p2p_sample, &b, o, out, d);
  }
  free(b.src);
  free(b.dst);
  return rc;
}

typedef struct handoff {
  pthread_mutex_t mu;
  pthread_cond_t cv;   /* the waiter waits here for go */
  pthread_cond_t back; /* the timer waits here for parked */
  int parked, go, quit;
  double t_sig, t_woke;
  const hs_cpus *cpus; /* the waiter pinned to cpus->id[1] when not NULL */
} handoff;

static void *waiter_main(void *p) {
  handoff *h = p;
  if (h->cpus) hs_pin_self(h->cpus, 1);
  pthread_mutex_lock(&h->mu);
  for (;;) {
    h->parked = 1;
    pthread_cond_signal(&h->back);
    while (!h->go && !h->quit) pthread_cond_wait(&h->cv, &h->mu);
    if (h->quit) break;
    h->t_woke = hs_cal_now();
    h->go = 0;
    h->parked = 0;
  }
  pthread_mutex_unlock(&h->mu);
  return NULL;
}

int hs_cal_time_wake(const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d) {
  int rc = hs_cal_rule_check(&o->rule, d);
  if (rc) return rc;
  double *samples = malloc((size_t)o->rule.max_reps * sizeof *samples);
  if (!samples) return hs_diag_set(d, HS_ENOMEM, "wake: out of memory for %d samples", o->rule.max_reps);
  handoff h = {0};
  hs_cpus cpus;
  if (!o->no_pin && hs_cpus_allowed(&cpus) >= 2) h.cpus = &cpus;
  pthread_mutex_init(&h.mu, NULL);
  pthread_cond_init(&h.cv, NULL);
  pthread_cond_init(&h.back, NULL);
  pthread_t th;
  if (pthread_create(&th, NULL, waiter_main, &h)) {
    rc = hs_diag_set(d, HS_ERUNTIME, "wake: cannot start a thread");
    goto out;
  }
  if (h.cpus) hs_pin_self(h.cpus, 0);
  int n = 0;
  for (int rep = 0;; rep++) {
    pthread_mutex_lock(&h.mu);
    while (!h.parked || h.go) pthread_cond_wait(&h.back, &h.mu);
    /* The last signal was taken (go cleared), and parked was set again under the mutex that
     * pthread_cond_wait releases: the waiter waits. */
    double t = h.t_woke - h.t_sig;
    pthread_mutex_unlock(&h.mu);
    if (rep > o->warmup) {
      samples[n++] = t;
      int st = hs_cal_stable(samples, n, &o->rule, d);
      if (st) {
        rc = st < 0 ? st : 0;
        break;
      }
    }
    if (o->stop && *o->stop) {
      rc = hs_diag_set(d, HS_EINTR, "interrupted");
      break;
    }
    double t0 = hs_cal_now();
    while (hs_cal_now() - t0 < HS_CAL_WAKE_IDLE_S) {}
    pthread_mutex_lock(&h.mu);
    h.go = 1;
    h.t_sig = hs_cal_now();
    pthread_cond_signal(&h.cv);
    pthread_mutex_unlock(&h.mu);
  }
  pthread_mutex_lock(&h.mu);
  h.quit = 1;
  pthread_cond_signal(&h.cv);
  pthread_mutex_unlock(&h.mu);
  pthread_join(th, NULL);
  if (h.cpus) hs_pin_restore(h.cpus);
  if (!rc) rc = hs_cal_stats_of(samples, n, out, d);
out:
  pthread_cond_destroy(&h.back);
  pthread_cond_destroy(&h.cv);
  pthread_mutex_destroy(&h.mu);
  free(samples);
  return rc;
}
