#include "real/real_comm_calib.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cal_store.h"
#include "core/core_affinity.h"
#include "nn/nn_net.h"

enum { MIN_BYTES = 4096, MAX_WORLD = 64 };

typedef struct timer {
  const hs_real_comm_ops *ops;
  hs_real_comm *c;
  float *const *bufs;
  int world, p2p;
  int64_t n;
  int *ranks;
  double *wts;
  const hs_cal_comm_opts *o;
  const hs_cpus *cpus;
  pthread_barrier_t bar;
  pthread_mutex_t mu;
  uint64_t op;       /* the operation id (the message tag for p2p), set by rank 0 between barriers */
  int done;          /* written by rank 0 between barriers */
  int rc;            /* the first failure, under mu */
  hs_diag err;
  int reps;
  double *samples;
  int nsamples;
} timer;

typedef struct timer_arg {
  timer *t;
  int rank;
} timer_arg;

static void failed(timer *t, int rc, const hs_diag *why) {
  pthread_mutex_lock(&t->mu);
  if (!t->rc) {
    t->rc = rc;
    t->err = *why;
  }
  pthread_mutex_unlock(&t->mu);
  t->ops->abort(t->c); /* the others return instead of waiting for this participant */
}

/* One participant's operation: the all-reduce, or for p2p rank 1 sends to rank 0, which receives
 * (the others, if any, only keep the barriers). */
static int once(timer *t, int rank, hs_diag *d) {
  if (!t->p2p)
    return t->ops->allreduce(t->c, t->op, rank, t->bufs[rank], t->n, t->ranks, t->world, t->wts, d);
  if (rank == 1) return t->ops->send(t->c, 1, 0, t->op, t->bufs[1], t->n, d);
  if (rank == 0) return t->ops->recv(t->c, 0, 1, t->op, t->bufs[0], t->n, d);
  return 0;
}

static void *timer_main(void *p) {
  timer_arg *a = p;
  timer *t = a->t;
  if (t->cpus) hs_pin_self(t->cpus, a->rank);
  float *mine = t->bufs[a->rank], v = (float)(a->rank + 1);
  int host = !t->ops->device_buffers || t->p2p;
  for (;;) {
    /* Untimed: the participant writes its own buffer, as a backward pass leaves its gradient
     * (host memory only: a device buffer is where the net's kernels left it). */
    if (host)
      for (int64_t i = 0; i < t->n; i++) mine[i] = v;
    pthread_barrier_wait(&t->bar);
    double t0 = a->rank == 0 ? hs_cal_now() : 0;
    hs_diag od = {0};
    int rc = once(t, a->rank, &od);
    if (rc) failed(t, rc, &od);
    pthread_barrier_wait(&t->bar);
    if (a->rank == 0) {
      double dt = hs_cal_now() - t0;
      t->op++;
      pthread_mutex_lock(&t->mu);
      int bad = t->rc;
      pthread_mutex_unlock(&t->mu);
      if (bad) {
        t->done = 1;
      } else if (t->o->stop && *t->o->stop) {
        t->rc = hs_diag_set(&t->err, HS_EINTR, "interrupted");
        t->done = 1;
      } else {
        if (t->reps++ >= t->o->warmup) t->samples[t->nsamples++] = dt;
        if (t->nsamples > 0) {
          int st = hs_cal_stable(t->samples, t->nsamples, &t->o->rule, &t->err);
          if (st < 0) t->rc = st;
          t->done = st != 0;
        }
      }
    }
    /* Rank 0's verdict, seen by all; the buffers then hold the last operation's result. */
    pthread_barrier_wait(&t->bar);
    if (t->done) break;
  }
  return NULL;
}

static int time_op(const hs_real_comm_ops *ops, hs_real_comm *c, float *const *bufs, int world, int p2p,
                   int64_t n, uint64_t *op_id, const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d) {
  int rc = hs_cal_rule_check(&o->rule, d);
  if (rc) return rc;
  if (world < 2 || world > MAX_WORLD)
    return hs_diag_set(d, HS_EINVAL, "%s timing: world size must be 2 to %d, got %d", ops->name, MAX_WORLD, world);
  if (n < 1) return hs_diag_set(d, HS_EINVAL, "%s timing: a message of %lld floats", ops->name, (long long)n);
  timer t = {.ops = ops, .c = c, .bufs = bufs, .world = world, .p2p = p2p, .n = n, .o = o, .op = *op_id};
  hs_cpus cpus;
  if (!o->no_pin && hs_cpus_allowed(&cpus) >= world) t.cpus = &cpus; /* as the runtime pins its workers */
  t.ranks = malloc((size_t)world * sizeof *t.ranks);
  t.wts = malloc((size_t)world * sizeof *t.wts);
  t.samples = malloc((size_t)o->rule.max_reps * sizeof *t.samples);
  pthread_t *th = calloc((size_t)world, sizeof *th);
  timer_arg *args = calloc((size_t)world, sizeof *args);
  if (!t.ranks || !t.wts || !t.samples || !th || !args) {
    rc = hs_diag_set(d, HS_ENOMEM, "%s timing: out of memory", ops->name);
    goto out;
  }
  for (int i = 0; i < world; i++) t.ranks[i] = i, t.wts[i] = 1.0 / world;
  if (pthread_barrier_init(&t.bar, NULL, (unsigned)world)) {
    rc = hs_diag_set(d, HS_ERUNTIME, "%s timing: cannot create a barrier", ops->name);
    goto out;
  }
  pthread_mutex_init(&t.mu, NULL);
  int started = 0;
  for (int i = 1; i < world; i++) {
    args[i] = (timer_arg){.t = &t, .rank = i};
    if (pthread_create(&th[i], NULL, timer_main, &args[i])) break;
    started++;
  }
  if (started < world - 1) {
    /* The started threads wait at the first barrier for members that never come. */
    for (int i = 1; i <= started; i++) pthread_cancel(th[i]);
    for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
    rc = hs_diag_set(d, HS_ERUNTIME, "%s timing: cannot start %d threads", ops->name, world);
  } else {
    args[0] = (timer_arg){.t = &t, .rank = 0};
    timer_main(&args[0]);
    if (t.cpus) hs_pin_restore(t.cpus);
    for (int i = 1; i < world; i++) pthread_join(th[i], NULL);
    rc = t.rc ? hs_diag_set(d, t.rc, "%s %s of %lld bytes: %s", ops->name, p2p ? "send/recv" : "all-reduce",
                            (long long)n * 4, t.err.msg)
              : hs_cal_stats_of(t.samples, t.nsamples, out, d);
  }
  pthread_mutex_destroy(&t.mu);
  pthread_barrier_destroy(&t.bar);
  *op_id = t.op;
out:
  free(t.ranks);
  free(t.wts);
  free(t.samples);
  free(th);
  free(args);
  return rc;
}

int hs_real_comm_time_allreduce(const hs_real_comm_ops *ops, hs_real_comm *c, float *const *bufs, int world,
                                int64_t n, const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d) {
  uint64_t op = 1;
  return time_op(ops, c, bufs, world, 0, n, &op, o, out, d);
}

/* The sizes of the sweep: MIN_BYTES x 4^k up to min(max, grad), then grad. */
static int sizes_of(int64_t max, int64_t grad, int64_t *out, int cap) {
  int k = 0;
  for (int64_t b = MIN_BYTES; b <= max && b < grad && k < cap - 1; b *= 4) out[k++] = b;
  out[k++] = grad;
  return k;
}

static int sweep(hs_store *s, int64_t dev_id, const hs_real_comm_calib_opts *o, const hs_real_comm_ops *ops,
                 hs_real_comm *c, float **bufs, int p2p, int64_t grad_bytes, hs_cal_comm_result *cr, hs_diag *d) {
  hs_comm_key key = {.device = dev_id, .backend = o->backend, .op = cr->op, .world_size = cr->world_size};
  int64_t sizes[40];
  int ns = sizes_of(o->max_bytes, grad_bytes, sizes, 40), rc = 0;
  uint64_t op_id = 1;
  for (int i = 0; i < ns; i++) {
    int stored = 0;
    if ((rc = hs_cal_comm_stored(s, &key, sizes[i], &stored, d))) return rc;
    if (stored) {
      cr->skipped++;
      continue;
    }
    hs_cal_stats st;
    if ((rc = time_op(ops, c, bufs, cr->world_size, p2p, sizes[i] / 4, &op_id, &o->timing, &st, d)) ||
        (rc = hs_cal_store_comm_sample(s, &key, sizes[i], &st, d)))
      return rc;
    cr->measured++;
  }
  return hs_cal_refit_comm(s, &key, &cr->alpha_s, &cr->beta_bytes_per_s, &cr->r2, &cr->fitted, cr->why,
                           sizeof cr->why, d);
}

int hs_real_comm_calibrate(hs_store *s, int64_t dev_id, const hs_real_comm_calib_opts *o,
                           hs_cal_comm_result cr[2], hs_diag *d) {
  const hs_real_comm_ops *ops = hs_real_comm_find(o->backend, d);
  if (!ops) return HS_EINVAL;
  if (o->world < 2 || o->world > MAX_WORLD)
    return hs_diag_set(d, HS_EINVAL, "%s communication: world size must be 2 to %d, got %d", o->backend, MAX_WORLD,
                       o->world);
  memset(cr, 0, 2 * sizeof *cr);
  for (int i = 0; i < 2; i++) {
    snprintf(cr[i].backend, sizeof cr[i].backend, "%s", o->backend);
    snprintf(cr[i].op, sizeof cr[i].op, "%s", i == 0 ? "allreduce" : "p2p");
    cr[i].world_size = i == 0 ? o->world : 2;
  }
  hs_net **nets = calloc((size_t)o->world, sizeof *nets);
  float **grads = calloc((size_t)o->world, sizeof *grads), *host[2] = {NULL, NULL};
  hs_real_comm *c = NULL;
  int rc = 0;
  if (!nets || !grads) {
    rc = hs_diag_set(d, HS_ENOMEM, "out of memory");
    goto out;
  }
  /* The all-reduce's buffers: the gradients of `world` nets of the model on the device, as
   * the workers of a run hold them (the local backend finds each one's owning net). */
  hs_net_options no = {.seed = 1};
  for (int i = 0; i < o->world && !rc; i++)
    if (!(rc = hs_net_open(&nets[i], o->device, o->model, &no, d))) grads[i] = hs_net_grads(nets[i]);
  if (rc) {
    hs_diag_prefix(d, "%s communication on %s", o->backend, o->device);
    goto out;
  }
  int64_t n = hs_net_param_count(nets[0]);
  hs_real_comm_config cfg = {.world = o->world, .n = n, .timeout_s = o->timeout_s, .device = o->device};
  if ((rc = ops->open(&c, &cfg, d))) goto out;
  if ((rc = sweep(s, dev_id, o, ops, c, grads, 0, n * 4, &cr[0], d))) goto out;
  /* Send/recv carry the parameter server's traffic in host memory on every backend
   * (real_comm.h), so their buffers are host buffers of the same size. */
  for (int i = 0; i < 2 && !rc; i++)
    if (!(host[i] = calloc((size_t)n, sizeof(float)))) rc = hs_diag_set(d, HS_ENOMEM, "out of memory");
  if (!rc) rc = sweep(s, dev_id, o, ops, c, host, 1, n * 4, &cr[1], d);
out:
  if (c && ops->close) ops->close(c);
  for (int i = 0; nets && i < o->world; i++) hs_net_close(nets[i]);
  free(nets);
  free(grads);
  free(host[0]);
  free(host[1]);
  return rc;
}
