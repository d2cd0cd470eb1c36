#include "real/real_comm_calib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib/cal_store.h"
#include "nn/nn_net.h"
#include "real/real_rank.h"
#include "real/real_rank_tcp.h"
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

/* The sizes of a sweep: MIN_BYTES x 4^k up to max and below the largest message, then the
 * messages (each a 4-byte multiple, at least 4), ascending, without repeats; at most cap. */
static int sizes_of(int64_t max, const int64_t *msgs, int n_msgs, int64_t *out, int cap) {
  int64_t big = 0;
  for (int i = 0; i < n_msgs; i++)
    if (msgs[i] > big) big = msgs[i];
  int k = 0;
  for (int64_t b = MIN_BYTES; b <= max && b < big && k < cap; b *= 4) out[k++] = b;
  for (int i = 0; i < n_msgs && k < cap; i++) {
    int64_t b = msgs[i] / 4 * 4;
    int seen = b < 4;
    for (int j = 0; j < k && !seen; j++) seen = out[j] == b;
    if (!seen) out[k++] = b;
  }
  for (int i = 1; i < k; i++)
    for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
      int64_t t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
  return k;
}

enum { MAX_SIZES = 48 };

/* Times size i of a sweep (bytes) into *st, its error prefixed with what it timed. */
typedef int time_size_fn(void *ctx, int i, int64_t bytes, hs_cal_stats *st, hs_diag *d);

/* One op of a sweep (key, cr): each size stored as a comm_sample unless it is already, then the
 * refit (alpha + n/beta); the progress (may be NULL) advances by one per size, *done counting. */
static int sweep(hs_store *s, const hs_comm_key *key, const int64_t *sizes, int ns, time_size_fn *time, void *ctx,
                 hs_progress *prog, double *done, hs_cal_comm_result *cr, hs_diag *d) {
  int rc = 0;
  for (int i = 0; i < ns; i++) {
    int stored = 0;
    if ((rc = hs_cal_comm_stored(s, key, sizes[i], &stored, d))) return rc;
    if (stored) {
      cr->skipped++;
    } else {
      hs_cal_stats st;
      if ((rc = time(ctx, i, sizes[i], &st, d)) || (rc = hs_cal_store_comm_sample(s, key, sizes[i], &st, d)))
        return rc;
      cr->measured++;
    }
    if (prog) hs_progress_update(prog, ++*done);
  }
  return hs_cal_refit_comm(s, key, &cr->alpha_s, &cr->beta_bytes_per_s, &cr->r2, &cr->fitted, cr->why,
                           sizeof cr->why, d);
}

/* A sweep's size through the threads' backend (hs_real_comm_calibrate). */
typedef struct backend_sweep {
  const hs_real_comm_ops *ops;
  hs_real_comm *c;
  float **bufs;
  int world, p2p;
  const hs_cal_comm_opts *timing;
} backend_sweep;

static int backend_time(void *ctx, int i, int64_t bytes, hs_cal_stats *st, hs_diag *d) {
  backend_sweep *b = ctx;
  /* Each size its own range of operation ids (a size is at most max_reps + warmup of them). */
  uint64_t base = ((uint64_t)i + 1) << 32;
  return time_op(b->ops, b->c, b->bufs, b->world, b->p2p, bytes / 4, base, b->timing, st, d);
}

/* Both ops of hs_real_comm_calibrate on bufs: the all-reduce (cr[0], p2p 0) or send/recv (cr[1]). */
static int backend_sweep_op(hs_store *s, int64_t dev_id, const hs_real_comm_calib_opts *o, const hs_real_comm_ops *ops,
                            hs_real_comm *c, float **bufs, int p2p, int64_t grad_bytes, hs_cal_comm_result *cr,
                            hs_diag *d) {
  hs_comm_key key = {.device = dev_id, .backend = o->backend, .op = cr->op, .world_size = cr->world_size};
  int64_t sizes[MAX_SIZES];
  int ns = sizes_of(o->max_bytes, &grad_bytes, 1, sizes, MAX_SIZES);
  backend_sweep b = {.ops = ops, .c = c, .bufs = bufs, .world = cr->world_size, .p2p = p2p, .timing = &o->timing};
  double done = 0;
  return sweep(s, &key, sizes, ns, backend_time, &b, NULL, &done, cr, d);
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
  if ((rc = backend_sweep_op(s, dev_id, o, ops, c, grads, 0, n * 4, &cr[0], d))) goto out;
  /* Send/recv carry the parameter server's traffic in host memory on every backend
   * (real_comm.h), so their buffers are host buffers of the same size. */
  for (int i = 0; i < 2 && !rc; i++)
    if (!(host[i] = calloc((size_t)n, sizeof(float)))) rc = hs_diag_set(d, HS_ENOMEM, "out of memory");
  if (!rc) rc = backend_sweep_op(s, dev_id, o, ops, c, host, 1, n * 4, &cr[1], d);
out:
  if (c && ops->close) ops->close(c);
  for (int i = 0; nets && i < o->world; i++) hs_net_close(nets[i]);
  free(nets);
  free(grads);
  free(host[0]);
  free(host[1]);
  return rc;
}

/* ---- the multi-process channel (hs_real_comm_calibrate_ranks) ---- */

enum { CMD_END = 1, CMD_ALLREDUCE = 2, CMD_P2P = 3, CMD_WAKE = 4, CMD_SIZES = 5, CMD_FLOATS = 4 };

/* One process's side: its rank of the channel, and the operation ids every rank counts alike
 * (each command, and each operation it starts, takes the next ones on every rank, taking part
 * or not). */
typedef struct ranks_side {
  const hs_real_comm_ops *ops;
  hs_real_comm *c;
  int rank, world;
  uint64_t seq;
  float *buf, cmd[CMD_FLOATS];
  int *ranks;
  double *ones, *wts;
} ranks_side;

/* A count below 2^36 in two floats, each half exact (and exact in a sum over ranks of whom one
 * holds it), and back. */
static void put_count(float *f, int64_t n) {
  f[0] = (float)(n >> 12);
  f[1] = (float)(n & 4095);
}
static int64_t get_count(const float *f) { return ((int64_t)f[0] << 12) + (int64_t)f[1]; }

/* Every rank's cmd[] summed (weights 1) into every rank's. */
static int ranks_sum(ranks_side *x, hs_diag *d) {
  return x->ops->allreduce(x->c, x->seq++, x->rank, x->cmd, CMD_FLOATS, x->ranks, x->world, x->ones, d);
}

/* The command all-reduce: rank 0's cmd[] (what, and n as put_count) reaches every rank. */
static int ranks_command(ranks_side *x, int what, int64_t n, hs_diag *d) {
  memset(x->cmd, 0, sizeof x->cmd);
  if (x->rank == 0) {
    x->cmd[0] = (float)what;
    put_count(x->cmd + 1, n);
  }
  return ranks_sum(x, d);
}

/* The operation a command starts, on this rank; *t (rank 0) its time. */
static int ranks_op(ranks_side *x, int what, int64_t n, double *t, hs_diag *d) {
  const hs_real_comm_ops *o = x->ops;
  int rc = 0;
  if (what == CMD_ALLREDUCE) {
    double t0 = hs_real_mono();
    rc = o->allreduce(x->c, x->seq++, x->rank, x->buf, n, x->ranks, x->world, x->wts, d);
    *t = hs_real_mono() - t0;
  } else if (what == CMD_P2P) {
    uint64_t tag = x->seq++;
    double t0 = hs_real_mono();
    if (x->rank == 1) rc = o->send(x->c, 1, 0, tag, x->buf, n, d);
    else if (x->rank == 0) rc = o->recv(x->c, 0, 1, tag, x->buf, n, d);
    *t = hs_real_mono() - t0;
  } else if (what == CMD_WAKE) {
    uint64_t tag = x->seq;
    x->seq += 2;
    if (x->rank == 1) {
      if (!(rc = o->recv(x->c, 1, 0, tag, x->buf, 1, d))) rc = o->send(x->c, 1, 0, tag + 1, x->buf, 1, d);
    } else if (x->rank == 0) {
      /* Busy, as the coordinator is between messages, while rank 1 waits and its CPU goes idle. */
      double t0 = hs_real_mono();
      while (hs_real_mono() - t0 < HS_CAL_WAKE_IDLE_S) {
      }
      t0 = hs_real_mono();
      if (!(rc = o->send(x->c, 0, 1, tag, x->buf, 1, d))) rc = o->recv(x->c, 0, 1, tag + 1, x->buf, 1, d);
      *t = (hs_real_mono() - t0) / 2;
    }
  } else {
    rc = hs_diag_set(d, HS_ERUNTIME, "rank %d: rank 0 sent an unknown command %d", x->rank, what);
  }
  return rc;
}

/* Every rank sizes its buffers by its own list of message sizes (its --model and --comm-max),
 * and rank 0 times its list: the lists must be the same. Rank 0 sends a digest of its list (24
 * bits); each rank answers, in a second all-reduce that every rank sums alike, whether its own
 * list has that digest, and if not its rank and its largest message; all fail together with
 * HS_EINVAL before anything is timed. */
static int ranks_agree(ranks_side *x, const int64_t *sizes, int ns, hs_diag *d) {
  uint64_t h = (uint64_t)ns;
  for (int i = 0; i < ns; i++) h = h * 0x100000001b3ULL ^ (uint64_t)sizes[i];
  int64_t digest = (int64_t)((h ^ (h >> 24) ^ (h >> 48)) & 0xffffff);
  int rc = ranks_command(x, CMD_SIZES, digest, d);
  if (rc) return rc;
  int64_t theirs = get_count(x->cmd + 1);
  if (x->rank != 0 && (int)x->cmd[0] != CMD_SIZES)
    return hs_diag_set(d, HS_ERUNTIME, "rank %d: rank 0 began with command %d, not the list of sizes (another "
                       "version of hetsim?)", x->rank, (int)x->cmd[0]);
  int other = theirs != digest;
  int64_t big = sizes[ns - 1];
  memset(x->cmd, 0, sizeof x->cmd);
  if (other) {
    x->cmd[0] = 1;
    x->cmd[1] = (float)x->rank;
    put_count(x->cmd + 2, big);
  }
  if ((rc = ranks_sum(x, d))) return rc;
  int n_other = (int)x->cmd[0];
  if (n_other == 0) return 0;
  if (x->rank != 0)
    return hs_diag_set(d, HS_EINVAL, other ? "its message sizes (its --model and --comm-max) differ from rank 0's"
                                           : "another rank's message sizes differ from rank 0's");
  if (n_other == 1)
    return hs_diag_set(d, HS_EINVAL, "rank %d was started with other message sizes than rank 0 (its largest %lld "
                       "bytes, rank 0's %lld): start every rank with the same --model and --comm-max",
                       (int)x->cmd[1], (long long)get_count(x->cmd + 2), (long long)big);
  return hs_diag_set(d, HS_EINVAL, "%d ranks were started with other message sizes than rank 0: start every rank with "
                     "the same --model and --comm-max", n_other);
}

/* A rank other than 0: serves rank 0's commands until the end. */
static int ranks_serve(ranks_side *x, hs_diag *d) {
  for (;;) {
    int rc = ranks_command(x, 0, 0, d);
    if (rc) return rc;
    int what = (int)x->cmd[0];
    int64_t n = get_count(x->cmd + 1);
    if (what == CMD_END) return 0;
    double t;
    if ((rc = ranks_op(x, what, n, &t, d))) return rc;
  }
}

/* Rank 0: one point (a command and its operation per repetition), timed by hs_cal_time_series. */
typedef struct ranks_point {
  ranks_side *x;
  int what;
  int64_t n;
} ranks_point;

static int ranks_sample(void *ctx, int rep, double *t, hs_diag *d) {
  (void)rep;
  ranks_point *p = ctx;
  int rc = ranks_command(p->x, p->what, p->n, d);
  return rc ? rc : ranks_op(p->x, p->what, p->n, t, d);
}

static int ranks_time(ranks_side *x, int what, int64_t n, const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d) {
  ranks_point p = {.x = x, .what = what, .n = n};
  return hs_cal_time_series(ranks_sample, &p, o, out, d);
}

int hs_real_ranks_calib_points(const hs_real_ranks_calib_opts *o) {
  int64_t sizes[MAX_SIZES];
  return 2 * sizes_of(o->max_bytes, o->msg_bytes, o->n_msgs, sizes, MAX_SIZES) + 1;
}

/* A sweep's size over the channel (rank 0). */
typedef struct ranks_sweep {
  ranks_side *x;
  int what;
  const hs_cal_comm_opts *timing;
} ranks_sweep;

static int ranks_time_size(void *ctx, int i, int64_t bytes, hs_cal_stats *st, hs_diag *d) {
  (void)i;
  ranks_sweep *r = ctx;
  int rc = ranks_time(r->x, r->what, bytes / 4, r->timing, st, d);
  if (rc) hs_diag_prefix(d, "tcp %s of %lld bytes", r->what == CMD_P2P ? "send/recv" : "all-reduce", (long long)bytes);
  return rc;
}

/* Rank 0: one op of the channel (cr) at every size. */
static int ranks_sweep_op(ranks_side *x, hs_store *s, int64_t dev_id, const hs_real_ranks_calib_opts *o, int what,
                          const int64_t *sizes, int ns, hs_cal_comm_result *cr, double *done, hs_diag *d) {
  hs_comm_key key = {.device = dev_id, .backend = "tcp", .op = cr->op, .world_size = cr->world_size};
  ranks_sweep r = {.x = x, .what = what, .timing = &o->timing};
  return sweep(s, &key, sizes, ns, ranks_time_size, &r, o->progress, done, cr, d);
}

static int ranks_lead(ranks_side *x, hs_store *s, int64_t dev_id, const hs_real_ranks_calib_opts *o,
                      const int64_t *sizes, int ns, hs_cal_comm_result cr[2], hs_cal_stats *wake, int *wake_state,
                      hs_diag *d) {
  double done = 0;
  int rc = 0;
  if (o->redo && (rc = hs_cal_forget_comm(s, dev_id, "tcp", d))) return rc;
  if ((rc = ranks_sweep_op(x, s, dev_id, o, CMD_ALLREDUCE, sizes, ns, &cr[0], &done, d)) ||
      (rc = ranks_sweep_op(x, s, dev_id, o, CMD_P2P, sizes, ns, &cr[1], &done, d)))
    return rc;
  hs_comm_key key = {.device = dev_id, .backend = "tcp", .op = "wake", .world_size = 2};
  int stored = 0;
  if ((rc = hs_cal_comm_stored(s, &key, 0, &stored, d))) return rc;
  if (stored) {
    *wake_state = 2;
  } else {
    if ((rc = ranks_time(x, CMD_WAKE, 1, &o->timing, wake, d))) {
      hs_diag_prefix(d, "tcp hand-off");
      return rc;
    }
    if ((rc = hs_cal_store_comm_sample(s, &key, 0, wake, d))) return rc;
    *wake_state = 1;
  }
  if (o->progress) hs_progress_update(o->progress, ++done);
  return 0;
}

int hs_real_comm_calibrate_ranks(hs_store *s, const hs_cal_device *dev, int64_t *dev_id, const hs_real_ranks_calib_opts *o,
                                 hs_cal_comm_result cr[2], hs_cal_stats *wake, int *wake_state, hs_diag *d) {
  hs_real_launch l;
  int rc = hs_real_launch_read(&l, 0, d);
  if (rc) return rc;
  if (!strcmp(l.source, "none") || l.world < 2)
    return hs_diag_set(d, HS_EINVAL, "the multi-process channel is timed by 2 or more processes started by mpirun or "
                       "torchrun, got %d", l.world < 1 ? 1 : l.world);
  if (l.rank == 0 && !s) return hs_diag_set(d, HS_EINVAL, "rank 0 of the channel's timing needs the database");
  if (o->n_msgs < 1) return hs_diag_set(d, HS_EINVAL, "the channel's timing needs a message size");
  memset(cr, 0, 2 * sizeof *cr);
  *wake_state = 0;
  for (int i = 0; i < 2; i++) {
    snprintf(cr[i].backend, sizeof cr[i].backend, "tcp");
    snprintf(cr[i].op, sizeof cr[i].op, "%s", i == 0 ? "allreduce" : "p2p");
    cr[i].world_size = i == 0 ? l.world : 2;
  }
  int64_t sizes[MAX_SIZES];
  int ns = sizes_of(o->max_bytes, o->msg_bytes, o->n_msgs, sizes, MAX_SIZES);
  if (ns < 1) return hs_diag_set(d, HS_EINVAL, "the channel's timing needs a message of at least 4 bytes");
  int64_t n = sizes[ns - 1] / 4;
  ranks_side x = {.ops = &hs_real_comm_tcp_rank, .rank = l.rank, .world = l.world};
  int pinned = 0;
  x.buf = calloc((size_t)n, sizeof *x.buf);
  x.ranks = malloc((size_t)l.world * sizeof *x.ranks);
  x.ones = malloc((size_t)l.world * sizeof *x.ones);
  x.wts = malloc((size_t)l.world * sizeof *x.wts);
  if (!x.buf || !x.ranks || !x.ones || !x.wts) {
    rc = hs_diag_set(d, HS_ENOMEM, "out of memory for the channel's buffers of %lld bytes", (long long)n * 4);
    goto out;
  }
  for (int i = 0; i < l.world; i++) x.ranks[i] = i, x.ones[i] = 1, x.wts[i] = 1.0 / l.world;
  for (int64_t i = 0; i < n; i++) x.buf[i] = (float)(l.rank + 1);
  /* Each process on its own CPU where the run's ranks would be (hs_real_rank_pins). */
  hs_real_config pin_as = {.device = "cpu", .pin = o->timing.no_pin ? HS_PIN_NONE : HS_PIN_AUTO};
  hs_cpus cpus;
  int k;
  pinned = hs_real_rank_pins(&pin_as, &l, 0, &cpus, &k) && !hs_pin_self(&cpus, k);
  hs_real_comm_config cfg = {.world = l.world, .n = n, .timeout_s = o->timeout_s};
  if ((rc = x.ops->open(&x.c, &cfg, d)) || (rc = ranks_agree(&x, sizes, ns, d))) goto out;
  if (l.rank != 0) {
    rc = ranks_serve(&x, d);
  } else {
    /* The device is stored once the ranks agree, so that a refused launch stores nothing. */
    if (!(rc = hs_cal_store_device(s, dev, dev_id, d)))
      rc = ranks_lead(&x, s, *dev_id, o, sizes, ns, cr, wake, wake_state, d);
    /* The others are told the end unless the channel itself failed (then they fail with it). */
    hs_diag ed = {0};
    if (rc != HS_ERUNTIME && ranks_command(&x, CMD_END, 0, &ed) && !rc)
      rc = hs_diag_set(d, ed.code ? ed.code : HS_ERUNTIME, "%s", ed.msg);
  }
out:
  if (pinned) (void)hs_pin_restore(&cpus);
  if (x.c) x.ops->close(x.c);
  free(x.buf);
  free(x.ranks);
  free(x.ones);
  free(x.wts);
  return rc;
}
