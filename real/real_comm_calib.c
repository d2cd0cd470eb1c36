#include "real/real_comm_calib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cal_store.h"
#include "nn/nn_net.h"
#include "real/real_worker.h"

enum { MIN_BYTES = 4096, MAX_WORLD = 64 };

/* One operation of the backend, as the lock-step timer (calib/cal_comm.h) runs it on every
 * thread: the all-reduce of every participant, or for p2p rank 1's send to rank 0 and rank 0's
 * receive (other threads, if any, only keep the barriers). */
typedef struct timed_op {
  const hs_real_comm_ops *ops;
  hs_real_comm *c;
  float *const *bufs;
  int world, p2p, host; /* host: the buffers are host memory, written before each repetition */
  int64_t n;
  uint64_t base;        /* operation ids (and tags) of this size: base + rep */
  int *ranks;
  double *wts;
} timed_op;

/* Untimed: the participant writes its own buffer, as a backward pass leaves its gradient (host
 * memory only: a device buffer is where the net's kernels left it). */
static void op_prepare(void *ctx, int rank) {
  timed_op *t = ctx;
  if (!t->host) return;
  float *mine = t->bufs[rank], v = (float)(rank + 1);
  for (int64_t i = 0; i < t->n; i++) mine[i] = v;
}

static int op_run(void *ctx, int rank, uint64_t rep, hs_diag *d) {
  timed_op *t = ctx;
  uint64_t id = t->base + rep;
  if (!t->p2p) return t->ops->allreduce(t->c, id, rank, t->bufs[rank], t->n, t->ranks, t->world, t->wts, d);
  if (rank == 1) return t->ops->send(t->c, 1, 0, id, t->bufs[1], t->n, d);
  if (rank == 0) return t->ops->recv(t->c, 0, 1, id, t->bufs[0], t->n, d);
  return 0;
}

static void op_abort(void *ctx) {
  timed_op *t = ctx;
  t->ops->abort(t->c);
}

static int time_op(const hs_real_comm_ops *ops, hs_real_comm *c, float *const *bufs, int world, int p2p,
                   int64_t n, uint64_t base, const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d) {
  if (world < 2 || world > MAX_WORLD)
    return hs_diag_set(d, HS_EINVAL, "%s timing: world size must be 2 to %d, got %d", ops->name, MAX_WORLD, world);
  if (n < 1) return hs_diag_set(d, HS_EINVAL, "%s timing: a message of %lld floats", ops->name, (long long)n);
  timed_op t = {.ops = ops, .c = c, .bufs = bufs, .world = world, .p2p = p2p, .host = !ops->device_buffers || p2p,
                .n = n, .base = base};
  int rc;
  t.ranks = malloc((size_t)world * sizeof *t.ranks);
  t.wts = malloc((size_t)world * sizeof *t.wts);
  if (!t.ranks || !t.wts) {
    rc = hs_diag_set(d, HS_ENOMEM, "%s timing: out of memory", ops->name);
  } else {
    for (int i = 0; i < world; i++) t.ranks[i] = i, t.wts[i] = 1.0 / world;
    hs_cal_lockstep ls = {.world = world, .ctx = &t, .prepare = op_prepare, .op = op_run, .abort = op_abort};
    if ((rc = hs_cal_time_lockstep(&ls, o, out, d)))
      hs_diag_prefix(d, "%s %s of %lld bytes", ops->name, p2p ? "send/recv" : "all-reduce", (long long)n * 4);
  }
  free(t.ranks);
  free(t.wts);
  return rc;
}

int hs_real_comm_time_allreduce(const hs_real_comm_ops *ops, hs_real_comm *c, float *const *bufs, int world,
                                int64_t n, const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d) {
  return time_op(ops, c, bufs, world, 0, n, 1, o, out, d);
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
  for (int i = 0; i < ns; i++) {
    int stored = 0;
    if ((rc = hs_cal_comm_stored(s, &key, sizes[i], &stored, d))) return rc;
    if (stored) {
      cr->skipped++;
      continue;
    }
    hs_cal_stats st;
    /* Each size its own range of operation ids (a size is at most max_reps + warmup of them). */
    uint64_t base = ((uint64_t)i + 1) << 32;
    if ((rc = time_op(ops, c, bufs, cr->world_size, p2p, sizes[i] / 4, base, &o->timing, &st, d)) ||
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
  hs_net_options no = hs_real_net_options(1, o->timeout_s);
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
