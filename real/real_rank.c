/* The multi-process real runtime: see real_rank.h for the contract.
 *
 * Frames: every control message is a fixed cmsg, followed by `len` payload bytes (an
 * all-reduce's weights and ranks, or an error's text). Both ends are this program on hosts of
 * one byte order. Every command gets exactly one report, in order, so the coordinator knows
 * what each worker still has to do (`outstanding`) and can tell a stall from work in flight. */
#define _GNU_SOURCE
#include "real/real_rank.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/core_affinity.h"
#include "nn/nn_eval.h"
#include "nn/nn_net.h"
#include "real/real_worker.h"
#include "runtime/rt_core.h"
#include "runtime/rt_evals.h"
#include "runtime/rt_model.h"
#include "runtime/rt_runtime.h"
#include "real/real_rank_tcp.h"

enum {
  C_COMPUTE = 1, C_LOCAL = 2, C_ALLREDUCE = 3, C_STOP = 4, C_PUSH = 5, C_PULL = 6, /* to a worker */
  S_PUSH = 7, S_PULL = 8, S_APPLY = 9,                                            /* to the server */
  R_READY = 11, R_COMPUTE = 12, R_LOCAL = 13, R_ALLREDUCE = 14, R_ERROR = 15, R_PUSH = 16, R_PULL = 17,
  R_SERVER = 18,
  C_BEAT = 10, R_BEAT = 19, /* heartbeats both ways: a rank silent for --timeout is taken for stopped */
  C_GIVE = 20, R_GIVE = 21  /* worker 0 (no server rank): send its replica to `peer` (a sync) */
};

typedef struct cmsg {
  int32_t kind, worker, batch, what, n, code, snapshot, len; /* len: payload bytes */
  int32_t ps_mode, peer;                                     /* S_PUSH, S_PULL: the worker's rank */
  int32_t compressor, pad;        /* C_PUSH, C_ALLREDUCE: compressor_id of hs_comm_opts' (0 none) */
  uint64_t tag, op;
  double lr, slowdown, dur, loss; /* READY: dur, loss = the probe's t0 and k; payload: the step
                                     model of the rank's --calib, if any (hs_perf_model);
                                     R_ALLREDUCE: loss = the replica's digest */
  double weight;                  /* S_PUSH: hs_comm_opts.weight */
  double ratio;                   /* C_PUSH, C_ALLREDUCE: the compressor's setting */
} cmsg;

/* A compressor on the wire: 1 + its place in hs_compressor_list (the same program on every
 * rank), 0 for none, -1 for one not in the list; the ratio (hs_comm_opts') travels beside it. */
static int32_t compressor_id(const hs_comm_opts *o) {
  if (!o || !o->compressor || !(o->ratio > 0)) return 0;
  const hs_compressor *const *l = hs_compressor_list();
  for (int32_t i = 0; l[i]; i++)
    if (l[i] == o->compressor) return i + 1;
  return -1;
}

/* The command's compressor (NULL for none), or HS_ERUNTIME for an id this program lacks. */
static int compressor_of(const cmsg *m, const hs_compressor **c, hs_diag *d) {
  *c = NULL;
  if (m->compressor == 0) return 0;
  const hs_compressor *const *l = hs_compressor_list();
  for (int32_t i = 0; l[i]; i++)
    if (i + 1 == m->compressor) {
      *c = l[i];
      return 0;
    }
  return hs_diag_set(d, HS_ERUNTIME, "operation %llu: unknown compressor %d from rank 0",
                     (unsigned long long)m->op, (int)m->compressor);
}

#define MAX_PAYLOAD (1 << 20)

static int send_msg(int fd, const cmsg *m, const void *payload, double timeout) {
  double dl = hs_real_mono() + timeout;
  if (hs_rank_write(fd, m, sizeof *m, dl, -1)) return -1;
  if (m->len > 0 && hs_rank_write(fd, payload, (size_t)m->len, dl, -1)) return -1;
  return 0;
}

/* Reads one message, all of it by deadline (a sender stopped between its header and its
 * payload is as silent as one stopped before both); *payload is malloc'd (NULL when empty).
 * 0, or hs_rank_read's codes. */
static int recv_msg(int fd, cmsg *m, void **payload, double deadline, int abort_fd) {
  *payload = NULL;
  int r = hs_rank_read(fd, m, sizeof *m, deadline, abort_fd);
  if (r) return r;
  if (m->len < 0 || m->len > MAX_PAYLOAD) return -1;
  if (m->len == 0) return 0;
  char *p = malloc((size_t)m->len + 1);
  if (!p) return -1;
  if ((r = hs_rank_read(fd, p, (size_t)m->len, deadline, abort_fd))) {
    free(p);
    return r;
  }
  p[m->len] = 0;
  *payload = p;
  return 0;
}

/* --- the executor: one worker's net, shard and replica -------------------------------------- */

typedef struct cmd {
  cmsg m;
  void *payload;
  struct cmd *next;
} cmd;

typedef struct snap {
  uint64_t op;
  float *model;
  struct snap *next;
} snap;

typedef struct exec {
  const hs_real_config *cfg;
  const hs_real_launch *launch;   /* how this process was started */
  int rank, worker, n, fd;        /* rank: in the comm; worker: its index (the server: 0);
                                     n: every worker of the run, joiners too */
  int n_start;                    /* the workers at the start: the shards (worker w reads shard
                                     w mod n_start), the equal share of the batch */
  int probe;                      /* times its steps before the run (a worker's rank, no perf) */
  int server;                     /* the parameter-server rank: replica is the global model */
  float *base, *srv_buf;          /* worker: the model at its last sync; server: a transfer */
  int world;
  double timeout;
  hs_shards *sh;
  hs_real_worker tw;              /* its net, its shard, its batch buffers (real_worker.h) */
  int64_t P;
  hs_runtime_model gm;            /* the replica (gm.global; the server's: the global model) and the
                                     server's accumulated pushes (rt_model.h) */
  float *host;
  hs_real_comm *comm;
  pthread_t reader, th;
  int inited, reader_started, th_started;
  int wake[2]; /* wakes the reader at the end */
  pthread_mutex_t mu, smu; /* smu: one writer at a time on fd (the reports, the reader's beats) */
  pthread_cond_t cv;
  cmd *head, *tail;
  int silent; /* the reader heard nothing from rank 0 within the bound (with lost) */
  int stop, stop_code, lost, failed; /* stop_code: the run's outcome on rank 0 (0, or HS_E*) */
  int cancel_open; /* set (atomically) with stop or lost: ends the comm's open (its cfg.cancel) */
  snap *snaps; /* rank 0: worker 0's replica at the evaluated iterations (mu) */
  double probe_t0, probe_k;
  int rc; /* the executor's result */
  hs_diag diag;
} exec;

/* How often a quiet end of the control channel says that it is alive: a rank (or rank 0) that
 * hears nothing for --timeout takes the other end for stopped or hung (SIGSTOP, a debugger, a
 * machine that froze), which no closed connection would ever tell. */
static double beat_interval(double timeout) { return fmin(timeout / 4, 1.0); }

static int exec_send(exec *e, const cmsg *m, const void *payload) {
  pthread_mutex_lock(&e->smu);
  int r = send_msg(e->fd, m, payload, e->timeout);
  pthread_mutex_unlock(&e->smu);
  return r;
}

static void *reader_main(void *p) {
  exec *e = p;
  /* Until rank 0's first word, rank 0 may still be waiting for the other ranks' start-up, which
   * it bounds by 2 * timeout + 60 s (await_ready); after it, rank 0 beats every beat_interval. */
  double heard = hs_real_mono(), sent = heard, bound = 2 * e->timeout + 60, hb = beat_interval(e->timeout);
  for (;;) {
    cmsg m;
    void *pl = NULL;
    int r;
    /* Beat by the clock, not by a quiet poll: rank 0's own beats must not keep a rank in a long
     * step from beating. */
    double now = hs_real_mono();
    if (e->rank != 0 && now - sent >= hb) {
      cmsg beat = {.kind = R_BEAT, .worker = e->worker};
      (void)exec_send(e, &beat, NULL); /* a failure shows as silence or a closed connection */
      sent = now = hs_real_mono();
    }
    if (e->rank != 0 && now - heard > bound) {
      r = -2;
      pthread_mutex_lock(&e->mu);
      if (!e->stop) e->silent = 1;
      pthread_mutex_unlock(&e->mu);
    } else {
      struct pollfd pf[2] = {{.fd = e->fd, .events = POLLIN}, {.fd = e->wake[0], .events = POLLIN}};
      /* Rank 0's own executor (a socket pair in its process) beats nobody and waits as long as it must. */
      int pr = poll(pf, 2, e->rank == 0 ? -1 : (int)(fmax(sent + hb - now, 0) * 1000) + 1);
      if (pr == 0 || (pr < 0 && errno == EINTR)) continue;
      if (pr < 0 || (pf[1].revents & POLLIN)) {
        r = -3;
      } else {
        r = recv_msg(e->fd, &m, &pl, hs_real_mono() + e->timeout, e->wake[0]);
        if (!r) {
          heard = hs_real_mono();
          bound = e->timeout;
          if (m.kind == C_BEAT) continue;
        }
      }
    }
    pthread_mutex_lock(&e->mu);
    if (r || m.kind == C_STOP) {
      if (!r) {
        e->stop = 1;
        e->stop_code = m.code;
      } else if (r != -3 && !e->stop) {
        e->lost = 1;
        /* -2 after a poll that said readable: rank 0 stopped between a message's two writes */
        if (r == -2) e->silent = 1;
      }
      pthread_cond_broadcast(&e->cv);
      __atomic_store_n(&e->cancel_open, 1, __ATOMIC_RELAXED);
      if (e->comm) e->cfg->comm->abort(e->comm);
      pthread_mutex_unlock(&e->mu);
      free(pl);
      break;
    }
    cmd *c = calloc(1, sizeof *c);
    if (!c) {
      e->lost = 1;
      __atomic_store_n(&e->cancel_open, 1, __ATOMIC_RELAXED);
      pthread_cond_broadcast(&e->cv);
      pthread_mutex_unlock(&e->mu);
      free(pl);
      break;
    }
    c->m = m;
    c->payload = pl;
    if (e->tail) e->tail->next = c;
    else e->head = c;
    e->tail = c;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
  }
  return NULL;
}

/* Whether the emulated slowdown's sleep ends early: rank 0 said stop, or is lost. */
static int exec_stopped(void *ctx) {
  exec *e = ctx;
  pthread_mutex_lock(&e->mu);
  int stop = e->stop || e->lost;
  pthread_mutex_unlock(&e->mu);
  return stop;
}

/* The pre-run fit of real_worker.h, on this rank's own device (every worker's rank times its
 * steps at once, as they will train); the data iterator then restarts on its worker's shard. */
static int probe(exec *e, hs_diag *d) {
  int rc = hs_real_worker_probe(&e->tw, e->cfg->train, e->cfg->global_batch / e->n_start, &e->probe_t0, &e->probe_k, d);
  if (rc) return rc;
  return hs_data_iter_init(&e->tw.it, e->cfg->train, e->sh, e->worker % e->n_start, 0, d);
}

static int exec_setup(exec *e, hs_diag *d) {
  const hs_real_config *cfg = e->cfg;
  hs_net_options no = hs_real_net_options(cfg->seed, cfg->timeout_s);
  int rc;
  if ((rc = hs_shards_open(&e->sh, hs_data_count(cfg->train), e->n_start, NULL, cfg->seed, d)) ||
      (rc = hs_net_open(&e->tw.net, cfg->device, cfg->model, &no, d)) ||
      (rc = hs_real_worker_prepare(&e->tw, cfg->global_batch, e->n_start, d)))
    return rc;
  e->P = hs_net_param_count(e->tw.net);
  size_t bytes = (size_t)e->P * sizeof(float);
  if ((rc = hs_runtime_model_open(&e->gm, e->P, d))) return rc;
  e->host = malloc(bytes);
  e->base = malloc(bytes);
  if (e->server) e->srv_buf = malloc(bytes);
  if (!e->host || !e->base || (e->server && !e->srv_buf))
    return hs_diag_set(d, HS_ENOMEM, "out of memory for the model replica");
  hs_touch_pages(e->host, bytes); /* the base: by the copy below */
  if (e->server) hs_touch_pages(e->srv_buf, bytes);
  if ((rc = hs_net_get_params(e->tw.net, e->gm.global, d)) ||
      (rc = hs_data_iter_init(&e->tw.it, cfg->train, e->sh, e->worker % e->n_start, 0, d)))
    return rc;
  memcpy(e->base, e->gm.global, bytes);
  hs_real_comm_config cc = {.world = e->world, .n = e->P, .timeout_s = e->timeout, .device = cfg->device,
                            .cancel = &e->cancel_open};
  hs_real_comm *comm = NULL;
  if ((rc = cfg->comm->open(&comm, &cc, d))) return rc;
  pthread_mutex_lock(&e->mu);
  e->comm = comm; /* the reader aborts it when rank 0 says stop */
  int stopped = e->stop || e->lost;
  pthread_mutex_unlock(&e->mu);
  if (stopped) cfg->comm->abort(comm);
  if (e->probe && (rc = probe(e, d))) return rc;
  return 0;
}

/* Keeps a copy of the replica for the coordinator's evaluation of operation op (rank 0). */
static int keep_snapshot(exec *e, uint64_t op, hs_diag *d) {
  snap *s = calloc(1, sizeof *s);
  if (s) s->model = malloc((size_t)e->P * sizeof *s->model);
  if (!s || !s->model) {
    free(s);
    return hs_diag_set(d, HS_ENOMEM, "out of memory for an evaluation's model");
  }
  memcpy(s->model, e->gm.global, (size_t)e->P * sizeof *s->model);
  s->op = op;
  pthread_mutex_lock(&e->mu);
  s->next = e->snaps;
  e->snaps = s;
  pthread_mutex_unlock(&e->mu);
  return 0;
}

/* A digest of the replica: 64 of its parameters, evenly spread, summed with weights. Replicas
 * that took the same updates are equal bit for bit, and so are their digests; one that missed an
 * update differs nearly everywhere. The all-reduce's report carries it, and the coordinator
 * compares the participants' (handle): a check of the runtime's own bookkeeping that costs 64
 * reads a round, not a pass over the model. */
static double replica_digest(const exec *e) {
  double h = 0;
  for (int k = 0; k < 64; k++) h += (k + 1) * (double)e->gm.global[(int64_t)k * e->P / 64];
  return h;
}

static int do_allreduce(exec *e, const cmd *c, double *dur, double *digest, hs_diag *d) {
  int n = c->m.n;
  if (n < 1 || (size_t)c->m.len != (size_t)n * (sizeof(double) + sizeof(int32_t)) || !c->payload)
    return hs_diag_set(d, HS_ERUNTIME, "all-reduce %llu: a malformed command", (unsigned long long)c->m.op);
  const double *wts = c->payload;
  int ranks[HS_RANK_MAX_WORLD];
  if (n > HS_RANK_MAX_WORLD) return hs_diag_set(d, HS_ERUNTIME, "all-reduce over %d ranks", n);
  memcpy(ranks, (const char *)c->payload + (size_t)n * sizeof(double), (size_t)n * sizeof(int32_t));
  const hs_real_comm_ops *cm = e->cfg->comm;
  int grad = c->m.what == HS_COMM_GRAD;
  const hs_compressor *comp;
  int rc = compressor_of(&c->m, &comp, d);
  /* A compressed gradient: what the others receive is what the compressor lets through. */
  if (!rc && grad && comp)
    rc = hs_real_worker_compress_grads(&e->tw, cm->device_buffers, e->host, comp, c->m.ratio, e->P, e->cfg->seed,
                                       e->worker, d);
  if (rc) return rc;
  double t0 = hs_real_mono();
  float *buf = grad ? hs_net_grads(e->tw.net) : hs_net_params(e->tw.net);
  if ((rc = cm->allreduce(e->comm, c->m.op, e->rank, buf, e->P, ranks, n, wts, d))) return rc;
  const float *red = buf;
  if (cm->device_buffers) {
    if ((rc = grad ? hs_net_get_grads(e->tw.net, e->host, d) : hs_net_get_params(e->tw.net, e->host, d))) return rc;
    red = e->host;
  }
  hs_runtime_model_allreduced(&e->gm, grad ? HS_COMM_GRAD : HS_COMM_MODEL, red, c->m.lr, NULL);
  if ((rc = hs_net_set_params(e->tw.net, e->gm.global, d))) return rc;
  if (c->m.snapshot && (rc = keep_snapshot(e, c->m.op, d))) return rc;
  *digest = replica_digest(e);
  *dur = hs_real_mono() - t0;
  return 0;
}

/* Worker: sends its update to the server (GRAD: its gradient; MODEL: its progress since its
 * last sync or push, the base moving to the model sent), as real_run.c's do_push. */
static int do_push(exec *e, const cmd *c, double *dur, hs_diag *d) {
  int rc;
  const hs_compressor *comp;
  if ((rc = compressor_of(&c->m, &comp, d))) return rc;
  if (c->m.what == HS_COMM_GRAD) {
    rc = hs_net_get_grads(e->tw.net, e->host, d);
  } else {
    rc = hs_real_worker_model_delta(&e->tw, e->host, e->base, e->P, d);
  }
  /* A compressed update: the server receives what the compressor lets through (real_run.c). */
  if (!rc) rc = hs_real_worker_compress(&e->tw, comp, c->m.ratio, e->host, e->P, e->cfg->seed, e->worker, d);
  if (rc) return rc;
  double t0 = hs_real_mono();
  rc = e->cfg->comm->send(e->comm, e->rank, 0, c->m.op, e->host, e->P, d);
  *dur = hs_real_mono() - t0;
  return rc;
}

/* Worker: takes the global model from rank 0: the server's, or (a sync, without a server rank)
 * worker 0's replica, which then is its replica too. */
static int do_pull(exec *e, const cmd *c, double *dur, hs_diag *d) {
  double t0 = hs_real_mono();
  int rc = e->cfg->comm->recv(e->comm, e->rank, 0, c->m.op, e->host, e->P, d);
  if (!rc) rc = hs_net_set_params(e->tw.net, e->host, d);
  if (rc) return rc;
  memcpy(e->base, e->host, (size_t)e->P * sizeof *e->base);
  memcpy(e->gm.global, e->host, (size_t)e->P * sizeof *e->gm.global);
  *dur = hs_real_mono() - t0;
  return 0;
}

/* Server: the three operations of real_run.c's server lane, on its global model (replica). */
static int do_server(exec *e, const cmd *c, hs_diag *d) {
  int rc = 0;
  if (c->m.kind == S_PULL) return e->cfg->comm->send(e->comm, 0, c->m.peer, c->m.op, e->gm.global, e->P, d);
  if (c->m.kind == S_PUSH) {
    if ((rc = e->cfg->comm->recv(e->comm, 0, c->m.peer, c->m.op, e->srv_buf, e->P, d))) return rc;
    hs_runtime_model_push(&e->gm, (hs_comm_what)c->m.what, (hs_ps_mode)c->m.ps_mode, e->srv_buf,
                          (double)c->m.batch, c->m.weight, c->m.lr);
  } else if (c->m.kind == S_APPLY) {
    hs_runtime_model_apply(&e->gm, c->m.lr);
  } else {
    return hs_diag_set(d, HS_ERUNTIME, "parameter server: unknown command %d from the coordinator", c->m.kind);
  }
  return c->m.snapshot ? keep_snapshot(e, c->m.op, d) : 0;
}

static int execute(exec *e, const cmd *c, cmsg *rep, hs_diag *d) {
  rep->worker = e->worker;
  rep->op = c->m.op;
  rep->tag = c->m.tag;
  rep->batch = c->m.batch;
  if (e->server) {
    rep->kind = R_SERVER;
    return do_server(e, c, d);
  }
  switch (c->m.kind) {
  case C_COMPUTE: {
    /* The batch's set-up before the step's clock (real_worker.h). */
    int rc = hs_real_worker_ready(&e->tw, c->m.batch, d);
    if (rc) return rc;
    double loss = NAN, t0 = hs_real_mono();
    rc = hs_real_worker_step(&e->tw, e->cfg->train, c->m.batch, &loss, d);
    if (rc) return rc;
    double slow = c->m.slowdown > 1 ? c->m.slowdown : 1.0;
    if ((rc = hs_real_sleep(slow, (slow - 1.0) * (hs_real_mono() - t0), e->timeout, exec_stopped, e, d)))
      return rc; /* as real_run.h */
    rep->kind = R_COMPUTE;
    rep->dur = hs_real_mono() - t0;
    rep->loss = loss;
    return 0;
  }
  case C_LOCAL: {
    hs_sgd opt = {.lr = c->m.lr, .momentum = 0, .weight_decay = 0};
    rep->kind = R_LOCAL;
    return hs_net_update(e->tw.net, &opt, d);
  }
  case C_ALLREDUCE:
    rep->kind = R_ALLREDUCE;
    return do_allreduce(e, c, &rep->dur, &rep->loss, d); /* loss: the replica's digest */
  case C_PUSH:
    rep->kind = R_PUSH;
    return do_push(e, c, &rep->dur, d);
  case C_PULL:
    rep->kind = R_PULL;
    return do_pull(e, c, &rep->dur, d);
  case C_GIVE: {
    rep->kind = R_GIVE;
    double t0 = hs_real_mono();
    int rc = e->cfg->comm->send(e->comm, e->rank, c->m.peer, c->m.op, e->gm.global, e->P, d);
    rep->dur = hs_real_mono() - t0;
    return rc;
  }
  default:
    return hs_diag_set(d, HS_ERUNTIME, "unknown command %d from rank 0", c->m.kind);
  }
}

static void report_error(exec *e, int rc, const hs_diag *d) {
  cmsg m = {.kind = R_ERROR, .worker = e->worker, .code = rc, .len = (int32_t)strlen(d->msg)};
  (void)exec_send(e, &m, d->msg);
}

/* Set-up, READY, then the commands until stop; e->rc and e->diag hold the outcome. */
static void exec_run(exec *e) {
  /* On the rank's own CPU, as the threads' workers are (before the probe, which then times the
   * steps as the run takes them). */
  hs_cpus cpus;
  int k;
  if (hs_real_rank_pins(e->cfg, e->launch, e->server, &cpus, &k)) (void)hs_pin_self(&cpus, k);
  hs_diag d = {0};
  int rc = exec_setup(e, &d);
  if (rc) {
    hs_diag_prefix(&d, "rank %d", e->rank);
    report_error(e, rc, &d);
    e->rc = rc;
    e->diag = d;
  } else {
    /* What predicts this worker's steps: its own device's calibration (this process's --calib,
     * for its --device) or the fit of its steps timed just now. */
    cmsg ready = {.kind = R_READY, .worker = e->worker, .op = (uint64_t)e->P, .dur = e->probe_t0, .loss = e->probe_k};
    const hs_perf_model *pm = e->server ? NULL : e->cfg->perf;
    hs_perf_model own; /* sent whole: its padding and unused points zeroed, not left unset */
    memset(&own, 0, sizeof own);
    if (pm) {
      own.form = pm->form;
      memcpy(own.p, pm->p, sizeof own.p);
      own.max_batch = pm->max_batch;
      own.n_points = pm->n_points;
      for (int i = 0; i < pm->n_points && i < HS_PERF_MAX_POINTS; i++) {
        own.pt_batch[i] = pm->pt_batch[i];
        own.pt_s[i] = pm->pt_s[i];
      }
      ready.len = (int32_t)sizeof own;
    }
    if (exec_send(e, &ready, &own))
      e->rc = hs_diag_set(&e->diag, HS_ERUNTIME, "rank 0 went away during start-up");
  }
  if (e->rc) e->failed = 1;
  pthread_mutex_lock(&e->mu);
  for (;;) {
    while (!e->head && !e->stop && !e->lost) pthread_cond_wait(&e->cv, &e->mu);
    if (e->stop || e->lost) break;
    cmd *c = e->head;
    e->head = c->next;
    if (!e->head) e->tail = NULL;
    pthread_mutex_unlock(&e->mu);
    if (!e->failed) {
      cmsg rep = {0};
      hs_diag cd = {0};
      rc = execute(e, c, &rep, &cd);
      if (rc) {
        /* Tell rank 0 and wait for its stop: it ends the run and tells everyone. */
        if (e->server) hs_diag_prefix(&cd, "parameter server (rank 0)");
        else hs_diag_prefix(&cd, "worker %d (rank %d)", e->worker, e->rank);
        report_error(e, rc, &cd);
        e->failed = 1;
        e->rc = rc;
        e->diag = cd;
      } else if (exec_send(e, &rep, NULL)) {
        e->failed = 1;
      }
    }
    free(c->payload);
    free(c);
    pthread_mutex_lock(&e->mu);
  }
  int lost = e->lost && !e->stop, silent = e->silent;
  pthread_mutex_unlock(&e->mu);
  if (lost && silent)
    e->rc = hs_diag_set(&e->diag, HS_ERUNTIME, "rank 0 did not answer on the control channel within %g s "
                        "(its process stopped or hangs?); ending", e->timeout);
  else if (lost) /* the cause, whatever a wait in progress said about it (aborted, a closed peer) */
    e->rc = hs_diag_set(&e->diag, HS_ERUNTIME, "rank 0 closed the control connection (its process died?); ending");
  /* Once rank 0 said stop, rank 0 alone reports the run (its exit status, its message): this
   * rank ends quietly, also after errors of its own (rank 0 has them), because a launcher such
   * as mpirun kills the other ranks, rank 0 included, when one ends with a failure. */
  if (!lost) e->rc = 0;
}

/* rank: in the comm; n: every worker of the run (n_start at the start, then the joiners); off: 1
 * when rank 0 is the parameter server (worker w is then rank w + 1). */
static int exec_init(exec *e, const hs_real_config *cfg, const hs_real_launch *l, int rank, int n, int n_start,
                     int off, int fd) {
  memset(e, 0, sizeof *e);
  e->cfg = cfg;
  e->launch = l;
  e->rank = rank;
  e->server = off && rank == 0;
  e->worker = e->server ? 0 : rank - off;
  e->n = n;
  e->n_start = n_start;
  e->world = n + off;
  e->fd = fd;
  e->probe = !e->server && !cfg->perf;
  e->probe_t0 = e->probe_k = NAN;
  e->timeout = hs_real_timeout(cfg->timeout_s);
  e->wake[0] = e->wake[1] = -1;
  pthread_mutex_init(&e->mu, NULL);
  pthread_mutex_init(&e->smu, NULL);
  pthread_cond_init(&e->cv, NULL);
  e->inited = 1;
  if (pipe(e->wake)) return -1;
  if (pthread_create(&e->reader, NULL, reader_main, e)) return -1;
  e->reader_started = 1;
  return 0;
}

static void exec_fini(exec *e) {
  if (!e->inited) return;
  if (e->reader_started) {
    char b = 1;
    (void)!write(e->wake[1], &b, 1);
    pthread_join(e->reader, NULL);
  }
  if (e->comm) e->cfg->comm->close(e->comm);
  while (e->head) {
    cmd *c = e->head;
    e->head = c->next;
    free(c->payload);
    free(c);
  }
  while (e->snaps) {
    snap *s = e->snaps;
    e->snaps = s->next;
    free(s->model);
    free(s);
  }
  hs_net_close(e->tw.net);
  hs_shards_close(e->sh);
  hs_real_worker_free(&e->tw);
  hs_runtime_model_close(&e->gm);
  free(e->host);
  free(e->base);
  free(e->srv_buf);
  if (e->wake[0] >= 0) close(e->wake[0]);
  if (e->wake[1] >= 0) close(e->wake[1]);
  pthread_cond_destroy(&e->cv);
  pthread_mutex_destroy(&e->smu);
  pthread_mutex_destroy(&e->mu);
}

static void *exec_thread(void *p) {
  exec_run(p);
  return NULL;
}

/* --- the coordinator (rank 0): the ranks' driver of the runtime core (rt_core.h) ------------ */

/* What the coordinator keeps of a worker beside the core's worker table. */
typedef struct cworker {
  int outstanding; /* commands the worker has not reported yet */
  /* Its step in flight (the core's `computing`): `ahead` commands before it still to report;
   * once none, the step runs since step_start (s), which the summary counts up to the end. */
  int ahead;
  double step_start;
  /* What predicts its steps, from its rank's READY: the calibration of that rank's device
   * (its --calib), or else the fit of steps its rank timed before the run (NaN otherwise). */
  int has_perf;
  hs_perf_model perf;
  double probe_t0, probe_k;
  /* Without a server rank: the iteration (seq) its replica holds once its queued commands
   * have run. An all-reduce of seq S updates the replicas of S - 1 to S; a participant behind
   * (a joiner whose all-reduces went on while it took the model) takes worker 0's replica
   * after it (sync_from0), as the threads' participants take the global model. */
  uint64_t rv;
  uint64_t stale_op; /* the all-reduce after which it takes worker 0's replica (its digest differs) */
} cworker;

/* A cop's kind beyond hs_comm_kind's: a worker takes rank 0's model (sync_from0). */
enum { OP_SYNC = 100 };

typedef struct cop {
  uint64_t id, seq, tag;   /* seq: the iteration it makes (all-reduce, apply-mode push, apply) */
  int kind;                /* hs_comm_kind, or OP_SYNC */
  int join;                /* OP_SYNC: the worker joins once it holds the model */
  int digested;            /* all-reduce: digest holds the first up-to-date participant's */
  double digest;
  int left;                /* reports still to come */
  int worker, ps_mode, got_server, got_worker;
  uint64_t version;        /* push: the worker's version at issue; pull: the version sent */
  int64_t step;            /* push: the worker's step at issue */
  double start;
  struct cop *next;
} cop;

typedef struct crd {
  hs_rt_core core;         /* first member: the runtime core (the policy sees its hs_runtime) */
  const hs_real_config *cfg;
  int n, off, world;       /* off: 1 when rank 0 is the parameter server; world = n + off; n:
                              every worker of the run, joiners too (the core has those that
                              have joined) */
  int n_start;             /* the workers at the start */
  int *fds;                /* fds[r]: the control socket of rank r (rank 0: the socket pair) */
  int srv_outstanding;     /* commands the server has not reported yet */
  double timeout;
  cworker *w;              /* beside the core's worker table */
  exec *x0;
  int64_t P;
  uint64_t next_op, seq;
  uint64_t cur_op;         /* the operation whose update the core is counting (drv_snapshot) */
  double t0;
  int stalled, interrupted;
  cop *ops;
  hs_runtime_timers timers;
  hs_net *eval_net;
  hs_rt_evals evals;       /* models waiting for their evaluation, in order (rt_evals.h) */
} crd;

static crd *R(hs_rt_core *c) { return (crd *)c; }
static double now_of(const crd *s) { return hs_real_mono() - s->t0; }

/* Records the first failure and ends the run (hs_rt_core_abort); returns code. */
#define cfail(s, ...) hs_rt_core_abort(&(s)->core, __VA_ARGS__)

static void finish(crd *s) { hs_rt_core_stop(&s->core, now_of(s)); }

/* After a call into the core: a failure (rc != 0, the message in the core's diag) fails the
 * run; a stop condition the core reached has marked it done. Returns rc. */
static int settle(crd *s, int rc) { return hs_rt_core_settle(&s->core, rc); }

static int send_cmd(crd *s, int w, cmsg *m, const void *payload) {
  m->worker = w;
  if (send_msg(s->fds[w + s->off], m, payload, s->timeout))
    return cfail(s, HS_ERUNTIME, "cannot reach worker %d (rank %d) over the control channel (its process died?)", w,
                 w + s->off);
  s->w[w].outstanding++;
  return 0;
}

static int send_srv(crd *s, cmsg *m) {
  if (send_msg(s->fds[0], m, NULL, s->timeout))
    return cfail(s, HS_ERUNTIME, "cannot reach the parameter server (rank 0's thread)");
  s->srv_outstanding++;
  return 0;
}

static cop *op_new(crd *s, int kind, const hs_comm_opts *o, int left) {
  cop *op = calloc(1, sizeof *op);
  if (!op) {
    cfail(s, HS_ENOMEM, "out of memory for a communication record");
    return NULL;
  }
  op->id = ++s->next_op;
  op->kind = kind;
  op->tag = o->tag;
  op->ps_mode = (int)o->ps_mode;
  op->left = left;
  op->worker = -1;
  op->start = now_of(s);
  op->next = s->ops;
  s->ops = op;
  return op;
}

/* Whether the global update that operation seq makes is evaluated: rank 0's replica is then
 * kept at it (the executor's snapshot), for drv_snapshot to find when the core counts it. */
static int snapshot_due(const crd *s, uint64_t seq) { return hs_rt_core_eval_due(&s->core, (int64_t)seq); }

static int flush_record(crd *s, int w) { return settle(s, hs_rt_core_flush(&s->core, w)); }

/* --- the driver table (rt_core.h): what the core asks of the ranks (coordinator thread) ---- */

static double drv_now(hs_rt_core *c) { return now_of(R(c)); }
static double drv_predict(hs_rt_core *c, int w, int batch) {
  crd *s = R(c);
  const cworker *x = &s->w[w];
  return hs_runtime_predict(x->has_perf ? &x->perf : NULL, x->probe_t0, x->probe_k, c->w[w].slowdown, batch);
}

static int drv_compute(hs_rt_core *c, int w, int batch) {
  crd *s = R(c);
  hs_rt_worker *x = &c->w[w];
  cmsg m = {.kind = C_COMPUTE, .batch = batch, .tag = x->cur_tag, .slowdown = x->slowdown};
  s->w[w].ahead = s->w[w].outstanding;
  s->w[w].step_start = now_of(s);
  return send_cmd(s, w, &m, NULL);
}

static int drv_local_update(hs_rt_core *c, int w) {
  cmsg m = {.kind = C_LOCAL, .lr = c->w[w].lr};
  return send_cmd(R(c), w, &m, NULL);
}

static int unlisted_compressor(crd *s, const hs_comm_opts *o) {
  return cfail(s, HS_EUNSUPPORTED, "policy %s: compressor %s is not in hetsim's list (pol_compress.h): the ranks "
               "cannot name it to each other", s->cfg->policy->name, o->compressor->name);
}

static int sync_from0(crd *s, int w, int join);

/* Every all-reduce has worker 0 among its participants (every active worker's, after a leave a
 * subset): rank 0's replica, which the run evaluates, is the global model, and the all-reduces
 * complete in issue order. A worker that left keeps its replica of when it left and computes no
 * more. */
static int drv_allreduce(hs_rt_core *c, const int *ws, int n, const double *weights, const hs_comm_opts *o) {
  crd *s = R(c);
  const char *name = s->cfg->policy->name;
  if (s->off)
    return cfail(s, HS_EUNSUPPORTED, "policy %s: all-reduce in a run with a parameter-server rank: not supported yet "
                 "in the multi-process runtime (start one process per worker, without --server-rank)", name);
  int has0 = 0;
  for (int i = 0; i < n; i++) has0 |= ws[i] == 0;
  if (!has0)
    return cfail(s, HS_EUNSUPPORTED, "policy %s: an all-reduce without worker 0 is not supported by the multi-process "
                 "real runtime (worker 0's replica is the model the run evaluates)", name);
  char *seen = calloc((size_t)s->n, 1);
  size_t bytes = (size_t)n * (sizeof(double) + sizeof(int32_t));
  char *pl = malloc(bytes);
  if (!seen || !pl) {
    free(seen);
    free(pl);
    return cfail(s, HS_ENOMEM, "out of memory for an all-reduce");
  }
  double *wts = (double *)pl;
  int32_t rk[HS_RANK_MAX_WORLD];
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    if (seen[ws[i]]++) rc = cfail(s, HS_ERUNTIME, "policy %s: worker %d twice in one all-reduce", name, ws[i]);
    rk[i] = ws[i];
  }
  free(seen);
  if (rc) {
    free(pl);
    return rc;
  }
  hs_rt_core_weights(c, ws, n, weights, wts);
  memcpy(pl + (size_t)n * sizeof(double), rk, (size_t)n * sizeof(int32_t));
  cop *op = op_new(s, HS_OP_ALLREDUCE, o, n);
  if (!op) {
    free(pl);
    return HS_ENOMEM;
  }
  op->seq = ++s->seq;
  int snapshot = snapshot_due(s, op->seq);
  cmsg m = {.kind = C_ALLREDUCE, .what = (int32_t)o->what, .n = n, .op = op->id, .lr = c->w[ws[0]].lr,
            .len = (int32_t)bytes, .compressor = compressor_id(o), .ratio = o->ratio};
  if (m.compressor < 0) rc = unlisted_compressor(s, o);
  for (int i = 0; i < n && !rc; i++) {
    m.snapshot = ws[i] == 0 && snapshot;
    rc = send_cmd(s, ws[i], &m, pl);
  }
  free(pl);
  /* A participant whose replica is behind (it missed all-reduces: a joiner) adds the update to
   * another model than worker 0's: it takes worker 0's replica after this all-reduce. */
  for (int i = 0; i < n && !rc; i++) {
    if (s->w[ws[i]].rv != op->seq - 1) {
      s->w[ws[i]].stale_op = op->id;
      rc = sync_from0(s, ws[i], 0);
    }
    s->w[ws[i]].rv = op->seq;
  }
  return rc;
}

/* Worker w takes rank 0's model: the server's (a pull the policy does not see), or, without a
 * server rank, worker 0's replica (C_GIVE to worker 0, a pull to w), each command queued behind
 * what the two ranks already have, so that w holds the model of every operation issued so far.
 * join: w joins once it has it (sync_done). */
static int sync_from0(crd *s, int w, int join) {
  hs_comm_opts none = {0};
  cop *op = op_new(s, OP_SYNC, &none, 2);
  if (!op) return HS_ENOMEM;
  op->worker = w;
  op->join = join;
  op->version = s->seq; /* without a server: worker 0's replica then (the server's is reported) */
  int rc;
  if (s->off) {
    cmsg sm = {.kind = S_PULL, .op = op->id, .peer = w + s->off};
    rc = send_srv(s, &sm);
  } else {
    cmsg gm = {.kind = C_GIVE, .op = op->id, .peer = w};
    rc = send_cmd(s, 0, &gm, NULL);
  }
  cmsg m = {.kind = C_PULL, .op = op->id};
  if (!rc) rc = send_cmd(s, w, &m, NULL);
  if (!rc) s->w[w].rv = s->seq;
  return rc;
}

/* A join event: the next worker of the numbering (its rank has waited since the start) enters
 * the core, joining, at the global learning rate, and takes rank 0's model; it joins the
 * policy's groups once it has it (sync_done), as the simulator's joiner does once it has
 * fetched the model. */
static int drv_join(hs_rt_core *c, const hs_event_spec *e) {
  crd *s = R(c);
  int w = hs_rt_core_add_joiner(c, e, s->n);
  return w < 0 ? w : sync_from0(s, w, 1);
}

static int no_server(crd *s, const char *what) {
  return cfail(s, HS_EUNSUPPORTED, "policy %s: %s: a parameter-server policy needs a server rank: start one process "
               "more than the workers and add --server-rank (rank 0 is then the server)", s->cfg->policy->name, what);
}

/* The server lane of real_run.c, on rank 0's server thread: the worker sends, the server takes
 * it in the order the policy issued its operations. */
static int drv_push(hs_rt_core *c, int w, const hs_comm_opts *o) {
  crd *s = R(c);
  if (!s->off) return no_server(s, "push");
  cop *op = op_new(s, HS_OP_PUSH, o, 2);
  if (!op) return HS_ENOMEM;
  hs_rt_worker *x = &c->w[w];
  op->worker = w;
  op->version = x->version;
  op->step = hs_rt_core_record_step(c, w);
  if (op->ps_mode == HS_PS_APPLY) op->seq = ++s->seq;
  cmsg m = {.kind = C_PUSH, .what = (int32_t)o->what, .op = op->id, .compressor = compressor_id(o),
            .ratio = o->ratio};
  if (m.compressor < 0) return unlisted_compressor(s, o);
  cmsg sm = {.kind = S_PUSH, .what = (int32_t)o->what, .op = op->id, .peer = w + s->off, .ps_mode = op->ps_mode,
             .lr = x->lr, .weight = o->weight > 0 ? o->weight : 1.0, .batch = x->last_batch > 0 ? x->last_batch : 1,
             .snapshot = op->seq && snapshot_due(s, op->seq)};
  int rc = send_cmd(s, w, &m, NULL);
  return rc ? rc : send_srv(s, &sm);
}

static int drv_pull(hs_rt_core *c, int w, const hs_comm_opts *o) {
  crd *s = R(c);
  if (!s->off) return no_server(s, "pull");
  cop *op = op_new(s, HS_OP_PULL, o, 2);
  if (!op) return HS_ENOMEM;
  op->worker = w;
  cmsg sm = {.kind = S_PULL, .op = op->id, .peer = w + s->off};
  cmsg m = {.kind = C_PULL, .op = op->id};
  int rc = send_srv(s, &sm);
  return rc ? rc : send_cmd(s, w, &m, NULL);
}

static int drv_apply(hs_rt_core *c, const hs_comm_opts *o) {
  crd *s = R(c);
  if (!s->off) return no_server(s, "apply");
  cop *op = op_new(s, HS_OP_APPLY, o, 1);
  if (!op) return HS_ENOMEM;
  op->seq = ++s->seq;
  cmsg sm = {.kind = S_APPLY, .what = (int32_t)o->what, .op = op->id, .lr = s->core.global_lr,
             .snapshot = snapshot_due(s, op->seq)};
  return send_srv(s, &sm);
}

/* The update of operation cur_op is due for an evaluation: rank 0's executor kept its replica
 * at that operation (the command's snapshot flag); it is queued and, as in the threaded
 * runtime, evaluated after the run, where it delays no decision, unless a target needs the
 * answer now or the waiting models grow past 256 MiB (coordinate). */
static int drv_snapshot(hs_rt_core *c, double t) {
  crd *s = R(c);
  snap *got = NULL;
  pthread_mutex_lock(&s->x0->mu);
  for (snap **p = &s->x0->snaps; *p; p = &(*p)->next)
    if ((*p)->op == s->cur_op) {
      got = *p;
      *p = got->next;
      break;
    }
  pthread_mutex_unlock(&s->x0->mu);
  if (!got)
    return cfail(s, HS_ERUNTIME, "internal: rank 0 kept no model for the evaluation at iteration %lld",
                 (long long)c->iterations);
  float *model = got->model;
  free(got);
  return hs_rt_evals_take(&s->evals, model, t, c->iterations, &c->diag);
}

/* Timers and cluster events wait in the coordinator's heap; coordinate fires them. */
static int drv_wake_at(hs_rt_core *c, double t, hs_rt_wake_kind kind, int64_t arg) {
  return hs_rt_core_timer_add(c, &R(c)->timers, t, kind, arg);
}

static const hs_rt_driver ranks_driver = {
    .version = HS_RT_DRIVER_VERSION,
    .name = "multi-process real",
    .compute = drv_compute,
    .local_update = drv_local_update,
    .allreduce = drv_allreduce,
    .push = drv_push,
    .pull = drv_pull,
    .apply = drv_apply,
    .snapshot = drv_snapshot,
    .wake_at = drv_wake_at,
    .now = drv_now,
    .predict = drv_predict,
    .set_lr = NULL, /* the core keeps the global learning rate (core.global_lr) */
    .slowdown = hs_rt_core_slowdown_compute_only,
    .join = drv_join,
    .caps = HS_REAL_RANKS_CAPS,
};

/* --- handling reports ----------------------------------------------------------------------- */

/* The global model holds the update of op: the core counts the iteration (the replicas all
 * hold it: the last participant of an all-reduce reported, or the server applied). */
static void on_iteration(crd *s, const cop *op) {
  s->cur_op = op->id;
  if (settle(s, hs_rt_core_update(&s->core, now_of(s)))) return;
  if (hs_rt_evals_online(&s->evals)) hs_rt_evals_drain(&s->evals, &s->core, NULL);
}

static cop **find_op(crd *s, uint64_t id) {
  cop **pp = &s->ops;
  while (*pp && (*pp)->id != id) pp = &(*pp)->next;
  return pp;
}

static void deliver(crd *s, hs_comm_kind kind, int w, double start, int stale, uint64_t tag) {
  settle(s, hs_rt_core_comm_done(&s->core, kind, w, start, now_of(s), stale, tag));
}

/* One reference of op is done; the last frees it. */
static void op_release(crd *s, cop *op) {
  if (--op->left > 0) return;
  cop **pp = find_op(s, op->id);
  if (*pp) *pp = op->next;
  free(op);
}

/* A pull is done when both its ends have reported, in either order: the worker holds the model
 * and the server said which version it sent. Only then is the policy told, so that the worker's
 * version it reads, and the next step's record, are the version pulled. */
static void pull_done(crd *s, const cop *op) {
  s->core.w[op->worker].version = op->version;
  deliver(s, HS_OP_PULL, op->worker, op->start, 0, op->tag);
}

/* Both ends of a sync have reported: the worker holds rank 0's model (of version op->version),
 * and a joiner joins (unless it left meanwhile). */
static void sync_done(crd *s, const cop *op) {
  int w = op->worker;
  if (op->join) {
    if (!s->core.w[w].joining) return;
    if (settle(s, hs_rt_core_joined(&s->core, w, now_of(s)))) return;
  }
  s->core.w[w].version = op->version;
}

/* A report of the parameter server (rank 0's server thread). */
static void handle_server(crd *s, const cmsg *m) {
  if (s->srv_outstanding < 1) {
    cfail(s, HS_ERUNTIME, "the parameter server sent an unexpected report");
    return;
  }
  s->srv_outstanding--;
  cop *op = *find_op(s, m->op);
  if (!op) {
    cfail(s, HS_ERUNTIME, "the parameter server reported operation %llu, which is not in flight",
          (unsigned long long)m->op);
    return;
  }
  if (op->kind == HS_OP_PUSH) {
    int stale = 0;
    if (op->ps_mode == HS_PS_APPLY) {
      stale = (int)(s->core.version - op->version);
      on_iteration(s, op);
    }
    hs_rt_core_record_push(&s->core, op->worker, op->step, now_of(s), stale);
    deliver(s, HS_OP_PUSH, op->worker, op->start, stale, op->tag);
  } else if (op->kind == HS_OP_PULL) {
    op->version = s->core.version; /* the server sent the model after every update reported before */
    op->got_server = 1;
    if (op->got_worker) pull_done(s, op);
  } else if (op->kind == HS_OP_APPLY) {
    on_iteration(s, op);
    deliver(s, HS_OP_APPLY, -1, op->start, 0, op->tag);
  } else if (op->kind == OP_SYNC) {
    op->version = s->core.version;
    op->got_server = 1;
    if (op->got_worker) sync_done(s, op);
  }
  op_release(s, op);
}

/* A report of rank `chan`: worker chan - off, or with a server rank, the server at 0. */
static void handle(crd *s, int chan, const cmsg *m, const char *payload) {
  if (m->kind == R_ERROR) {
    if (s->cfg->stop && *s->cfg->stop) { /* a signal for the whole job, seen by a wait first */
      s->interrupted = 1;
      finish(s);
      return;
    }
    cfail(s, m->code < 0 ? m->code : HS_ERUNTIME, "%s", payload ? payload : "a worker failed");
    return;
  }
  if (s->off && chan == 0) {
    if (m->kind != R_SERVER) cfail(s, HS_ERUNTIME, "the parameter server sent an unexpected report (%d)", m->kind);
    else handle_server(s, m);
    return;
  }
  int w = chan - s->off;
  hs_rt_worker *x = &s->core.w[w];
  if (m->worker != w || s->w[w].outstanding < 1) {
    cfail(s, HS_ERUNTIME, "worker %d (rank %d) sent an unexpected report (%d)", w, chan, m->kind);
    return;
  }
  s->w[w].outstanding--;
  double now = now_of(s);
  if (s->w[w].ahead > 0 && --s->w[w].ahead == 0) s->w[w].step_start = now; /* its step starts */
  if (m->kind == R_COMPUTE) {
    double start = now - m->dur;
    if (settle(s, hs_rt_core_record_open(&s->core, w, m->batch, start))) return;
    hs_rt_core_record_end(&s->core, w, now, m->loss);
    settle(s, hs_rt_core_compute_done(&s->core, w, m->batch, start, now, m->loss));
    return;
  }
  if (m->kind == R_LOCAL) return;
  cop *op = *find_op(s, m->op);
  if (!op) {
    cfail(s, HS_ERUNTIME, "worker %d reported operation %llu, which is not in flight", w, (unsigned long long)m->op);
    return;
  }
  if (op->kind == OP_SYNC) {
    /* Worker 0 gave its replica, or the worker took it (its communication). */
    if (m->kind == R_GIVE && w == 0 && !s->off) {
      op->got_server = 1;
    } else if (m->kind == R_PULL && w == op->worker) {
      op->got_worker = 1;
      hs_rt_core_record_comm(&s->core, w, m->dur, now);
    } else {
      cfail(s, HS_ERUNTIME, "worker %d (rank %d) sent an unexpected report (%d)", w, chan, m->kind);
      return;
    }
    if (op->got_server && op->got_worker) sync_done(s, op);
    op_release(s, op);
    return;
  }
  hs_rt_core_record_comm(&s->core, w, m->dur, now);
  if (m->kind == R_ALLREDUCE) {
    /* The up-to-date participants' replicas must now be equal (replica_digest). */
    if (s->w[w].stale_op != op->id) {
      if (!op->digested) {
        op->digest = m->loss;
        op->digested = 1;
      } else if (op->digest != m->loss && !(isnan(op->digest) && isnan(m->loss))) {
        cfail(s, HS_ERUNTIME, "internal: after all-reduce %llu worker %d's replica differs from the other "
              "participants' (the multi-process runtime lost an update)", (unsigned long long)op->id, w);
        return;
      }
    }
    x->version = op->seq;
    if (op->left == 1) {
      on_iteration(s, op);
      deliver(s, HS_OP_ALLREDUCE, -1, op->start, 0, op->tag);
    }
  } else if (m->kind == R_PULL) {
    op->got_worker = 1;
    if (op->got_server) pull_done(s, op);
  }
  op_release(s, op);
}

static int all_idle(const crd *s) {
  if (s->timers.n || s->srv_outstanding) return 0;
  for (int i = 0; i < s->n; i++)
    if (s->w[i].outstanding) return 0;
  return 1;
}

/* Sends a heartbeat to every other rank; the first rank it cannot reach, or -1. */
static int beat_all(crd *s) {
  cmsg beat = {.kind = C_BEAT};
  for (int i = 1; i < s->world; i++)
    if (send_msg(s->fds[i], &beat, NULL, s->timeout)) return i;
  return -1;
}

/* Rank 0's side of the heartbeats (beat_interval): beats every other rank when due, and fails
 * the run naming the first rank that has said nothing for --timeout. */
static void beats(crd *s, double *heard, double *sent) {
  double now = hs_real_mono();
  for (int i = 1; i < s->world && !s->core.done; i++)
    if (now - heard[i] > s->timeout) {
      cfail(s, HS_ERUNTIME, "worker %d (rank %d) did not answer on the control channel within %g s (--timeout; its "
            "process stopped or hangs?)", i - s->off, i, s->timeout);
      return;
    }
  if (now - *sent < beat_interval(s->timeout)) return;
  *sent = now;
  int i = beat_all(s);
  if (i > 0)
    cfail(s, HS_ERUNTIME, "cannot reach worker %d (rank %d) over the control channel (its process died?)", i - s->off,
          i);
}

static void coordinate(crd *s) {
  struct pollfd pf[HS_RANK_MAX_WORLD];
  double heard[HS_RANK_MAX_WORLD], sent = 0;
  for (int i = 0; i < s->world; i++) heard[i] = hs_real_mono();
  while (!s->core.done) {
    beats(s, heard, &sent);
    if (s->core.done) break;
    double next;
    settle(s, hs_rt_core_timer_fire(&s->core, &s->timers, &next));
    if (s->core.done) break;
    double t = now_of(s);
    if (s->cfg->max_time > 0 && t >= s->cfg->max_time) {
      finish(s);
      break;
    }
    if (s->cfg->stop && *s->cfg->stop) {
      s->interrupted = 1;
      finish(s);
      break;
    }
    if (all_idle(s)) {
      s->stalled = 1;
      finish(s);
      break;
    }
    double wake = fmin(next - t, 0.05);
    for (int i = 0; i < s->world; i++) pf[i] = (struct pollfd){.fd = s->fds[i], .events = POLLIN};
    int r = poll(pf, (nfds_t)s->world, wake > 0 ? (int)(wake * 1000) + 1 : 0);
    if (r < 0 && errno != EINTR) {
      cfail(s, HS_ERUNTIME, "poll on the control channel: %s", strerror(errno));
      break;
    }
    for (int i = 0; r > 0 && i < s->world && !s->core.done; i++) {
      if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      cmsg m;
      void *pl;
      int rr = recv_msg(s->fds[i], &m, &pl, hs_real_mono() + s->timeout, -1);
      if (rr && s->cfg->stop && *s->cfg->stop) {
        /* A signal for the whole job: the rank went with it; this is an interruption. */
        s->interrupted = 1;
        finish(s);
        break;
      }
      if (rr) {
        cfail(s, HS_ERUNTIME, "worker %d (rank %d): %s", i - s->off, i,
              rr == -2 ? "sent half a message and then nothing (its process hangs?)"
                       : "its process died: its control connection to rank 0 closed");
        break;
      }
      heard[i] = hs_real_mono();
      /* What fell due while the poll slept (a leave, a slowdown, a policy's timer) comes before
       * any decision the report leads to: a worker that left at 0.05 s starts no step at 0.0501. */
      if (m.kind != R_BEAT) {
        settle(s, hs_rt_core_timer_fire(&s->core, &s->timers, &next));
        if (!s->core.done) handle(s, i, &m, pl);
      }
      free(pl);
    }
  }
}

/* What predicts the steps of the worker of rank i, from its READY m (payload pl): the step model
 * its rank loaded from its own --calib for its own device, or the fit of the steps it timed. */
static int take_prediction(crd *s, int i, const cmsg *m, const void *pl) {
  cworker *x = &s->w[i - s->off];
  x->probe_t0 = m->dur;
  x->probe_k = m->loss;
  if (m->len == 0) return 0;
  const hs_perf_model *pm = pl;
  if (m->len != (int32_t)sizeof *pm || (unsigned)pm->form >= HS_PERF_FORMS || pm->n_points < 0 ||
      pm->n_points > HS_PERF_MAX_POINTS || pm->max_batch < 0)
    return cfail(s, HS_EINVAL, "rank %d sent a step model this hetsim cannot read (the same hetsim build on "
                 "every rank?)", i);
  x->perf = *pm;
  x->has_perf = 1;
  return 0;
}

/* Waits for every rank's READY (or its error), bounded. */
static int await_ready(crd *s) {
  int got = 0;
  char *ready = calloc((size_t)s->world, 1);
  if (!ready) return cfail(s, HS_ENOMEM, "out of memory");
  double dl = hs_real_mono() + 2 * s->timeout + 60; /* the data, the nets, the comm's own bounded start-up */
  /* Rank 0 beats from here on, so that a rank done with its start-up holds rank 0 to --timeout
   * (not to this start-up bound) if rank 0 then stops. */
  double sent = -INFINITY, hb = beat_interval(s->timeout);
  struct pollfd pf[HS_RANK_MAX_WORLD];
  int rc = 0;
  while (got < s->world && !rc) {
    double now = hs_real_mono();
    if (now < dl && now - sent >= hb) {
      sent = now;
      int i = beat_all(s);
      if (i > 0) {
        rc = cfail(s, HS_ERUNTIME, "rank %d: its process died during start-up", i);
        break;
      }
    }
    for (int i = 0; i < s->world; i++) pf[i] = (struct pollfd){.fd = s->fds[i], .events = ready[i] ? 0 : POLLIN};
    int ms = (int)((fmin(dl, sent + hb) - now) * 1000) + 1;
    int r = now < dl ? poll(pf, (nfds_t)s->world, ms) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && hs_real_mono() < dl) continue; /* a beat is due */
    if (r <= 0) {
      int missing = -1;
      for (int i = 0; i < s->world && missing < 0; i++)
        if (!ready[i]) missing = i;
      rc = cfail(s, HS_ERUNTIME, "rank %d did not finish its start-up in time", missing);
      break;
    }
    for (int i = 0; i < s->world && !rc; i++) {
      if (ready[i] || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      cmsg m;
      void *pl;
      if (recv_msg(s->fds[i], &m, &pl, hs_real_mono() + s->timeout, -1)) {
        rc = cfail(s, HS_ERUNTIME, "rank %d: its process died during start-up", i);
        break;
      }
      if (m.kind == R_BEAT) {
        free(pl);
        continue;
      }
      if (m.kind == R_ERROR) rc = cfail(s, m.code < 0 ? m.code : HS_ERUNTIME, "%s", pl ? (char *)pl : "start-up failed");
      else if (m.kind != R_READY) rc = cfail(s, HS_ERUNTIME, "rank %d: unexpected message %d at start-up", i, m.kind);
      else if ((int64_t)m.op != s->P)
        rc = cfail(s, HS_EINVAL, "rank %d's model has %lld parameters, rank 0's %lld (same --model everywhere?)", i,
                   (long long)m.op, (long long)s->P);
      else {
        ready[i] = 1;
        got++;
        if (i >= s->off) rc = take_prediction(s, i, &m, pl);
      }
      free(pl);
    }
  }
  free(ready);
  return rc;
}

/* Writes the records of finished steps (write: the run did not fail) and fills the result by
 * the core's rule (rt_core.h): a step in progress at the end (started: every command before it
 * reported) counts as busy from its start; its record is opened for that and not written.
 * Returns the first error of a write; the result is filled either way. */
static int fill_result(crd *s, hs_real_result *res, int write) {
  int n = s->core.n; /* the workers that joined: not those whose join was still to come */
  res->n_workers = n;
  res->workers = calloc((size_t)n, sizeof *res->workers);
  int fitted = 0; /* a worker predicted by a fit (a rank without --calib) */
  for (int i = 0; i < n; i++) fitted |= !s->w[i].has_perf;
  if (fitted) res->fits = calloc((size_t)n, sizeof *res->fits);
  if (!res->workers || (fitted && !res->fits)) return cfail(s, HS_ENOMEM, "out of memory");
  for (int i = 0; res->fits && i < n; i++) res->fits[i] = (hs_real_fit){s->w[i].probe_t0, s->w[i].probe_k};
  int64_t steps = 0;
  int rc = 0;
  for (int i = 0; i < n; i++) {
    hs_rt_worker *x = &s->core.w[i];
    if (write && !rc) rc = flush_record(s, i);
    if (x->computing && s->w[i].ahead == 0) {
      x->rec_open = 0; /* the previous step's, written above (or not, after a failure) */
      hs_rt_core_record_open(&s->core, i, x->last_batch, s->w[i].step_start);
    }
    steps += x->steps;
  }
  hs_rt_core_summary(&s->core, steps, &res->summary, res->workers);
  return rc;
}

/* n_start: the workers at the start; n: every worker, the joiners too (each has its rank). */
static int check_config(const hs_real_config *cfg, const hs_real_launch *l, int n_start, int n, hs_diag *d) {
  int rc = hs_real_check(cfg, n_start, l->rank == 0, d); /* what the threads check too */
  if (rc) return rc;
  char joiners[64] = "";
  if (n > n_start) snprintf(joiners, sizeof joiners, " (%d of them joining later)", n - n_start);
  if (l->world != n && l->world != n + 1)
    return hs_diag_set(d, HS_EINVAL, "world-size mismatch: the launcher started %d processes but the run has %d workers%s "
                       "(one process per worker, plus one for a parameter-server rank)", l->world, n, joiners);
  if (l->world > HS_RANK_MAX_WORLD) return hs_diag_set(d, HS_EINVAL, "%d ranks: at most %d", l->world, HS_RANK_MAX_WORLD);
  if ((rc = hs_real_rank_check_events(cfg->cluster, l->world == n + 1, d))) return rc;
  return hs_runtime_check_caps(cfg->policy, cfg->params, cfg->cluster, HS_REAL_RANKS_CAPS, "multi-process real", d);
}

int hs_real_rank_check_events(const hs_cluster_spec *spec, int server, hs_diag *d) {
  for (int i = 0; spec && !server && i < spec->n_events; i++) {
    const hs_event_spec *e = &spec->events[i];
    if (e->kind == HS_EVENT_LEAVE && e->worker == 0)
      return hs_diag_set(d, HS_EUNSUPPORTED, "%s:%d:%d: worker 0 leaves: without --server-rank, worker 0's rank holds "
                         "the model the run evaluates (and relays the cpu backend's all-reduces), so it stays to the "
                         "end of a multi-process run; let another worker leave", spec->path, e->pos.line, e->pos.col);
  }
  return 0;
}

/* Ranks other than 0: connect, run this rank's executor until rank 0 says stop. */
int hs_real_rank_report(const hs_real_launch *l, double timeout_s, int code, const char *msg) {
  if (l->rank <= 0) return -1;
  int fds[HS_RANK_MAX_WORLD];
  double timeout = hs_real_timeout(timeout_s);
  hs_diag d = {0};
  /* Rank 0 may have failed the same way (the same machine, the same files): then nobody
   * listens, and this rank gives up after a short wait instead of the whole bound. */
  if (hs_rank_star_open("control channel", l->master_addr, l->master_port + 1, l->rank, l->world,
                        fmin(timeout, HS_REAL_RANK_REPORT_WAIT_S), NULL, fds, &d))
    return -1;
  char text[sizeof d.msg + 32];
  snprintf(text, sizeof text, "rank %d: %s", l->rank, msg);
  cmsg m = {.kind = R_ERROR, .code = code < 0 ? code : HS_ERUNTIME, .len = (int32_t)strlen(text)};
  int rc = send_msg(fds[0], &m, text, timeout);
  /* Close only once rank 0 has it: at its stop, or when it closes (its beats meanwhile). */
  double dl = hs_real_mono() + timeout;
  for (int stop = 0; !rc && !stop;) {
    cmsg r;
    void *pl;
    if (recv_msg(fds[0], &r, &pl, dl, -1)) break;
    stop = r.kind == C_STOP;
    free(pl);
  }
  hs_rank_star_close(fds, l->world);
  return rc ? -1 : 0;
}

static int run_leaf(const hs_real_config *cfg, const hs_real_launch *l, int n, int n_start, hs_diag *d) {
  int fds[HS_RANK_MAX_WORLD];
  double timeout = hs_real_timeout(cfg->timeout_s);
  int rc = hs_rank_star_open("control channel", l->master_addr, l->master_port + 1, l->rank, l->world, timeout, NULL,
                             fds, d);
  if (rc) return rc;
  exec e;
  if (exec_init(&e, cfg, l, l->rank, n, n_start, l->world - n, fds[0])) {
    rc = hs_diag_set(d, HS_ERUNTIME, "rank %d: cannot start its control thread", l->rank);
  } else {
    exec_run(&e);
    rc = e.rc;
    if (rc && d) *d = e.diag;
  }
  /* Close the socket first: the reader then ends even if rank 0 never said stop. */
  shutdown(fds[0], SHUT_RDWR);
  exec_fini(&e);
  hs_rank_star_close(fds, l->world);
  return rc;
}

static int run_root(crd *s, const hs_real_launch *l, int *fds, int pair[2]) {
  const hs_real_config *cfg = s->cfg;
  hs_rt_core *c = &s->core; /* hs_rt_core_init: by hs_real_rank_run */
  hs_rt_core_job job;
  hs_real_job(cfg, &job);
  hs_rt_core_set_job(c, &job);
  int rc = hs_rank_star_open("control channel", l->master_addr, l->master_port + 1, 0, s->world, s->timeout, NULL, fds,
                             &c->diag);
  if (rc) return rc;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair))
    return hs_diag_set(&c->diag, HS_ERUNTIME, "socketpair: %s", strerror(errno));
  fds[0] = pair[0];
  s->fds = fds;
  s->w = calloc((size_t)s->n, sizeof *s->w);
  if (!s->w) return hs_diag_set(&c->diag, HS_ENOMEM, "out of memory for %d workers", s->n);
  for (int i = 0; i < s->n; i++) s->w[i].probe_t0 = s->w[i].probe_k = NAN;
  /* The joiners enter the core at their events (drv_join). */
  for (int i = 0; i < s->n_start; i++) {
    int r = hs_rt_core_add_worker(c, cfg->cluster ? cfg->cluster->workers[i].slowdown : 1.0, 1.0, cfg->lr, 0.0);
    if (r < 0) return r;
    c->w[r].active = 1;
  }
  hs_net_options no = hs_real_net_options(cfg->seed, cfg->timeout_s);
  hs_net *probe_net = NULL;
  if ((rc = hs_net_open(&probe_net, cfg->device, cfg->model, &no, &c->diag))) return rc;
  s->P = hs_net_param_count(probe_net);
  if (cfg->test) s->eval_net = probe_net;
  else hs_net_close(probe_net);
  hs_rt_evals_init(&s->evals, s->eval_net, cfg->test, s->P, cfg->target_loss > 0 || cfg->target_accuracy > 0);
  if (exec_init(s->x0, cfg, l, 0, s->n, s->n_start, s->off, pair[1]) ||
      pthread_create(&s->x0->th, NULL, exec_thread, s->x0))
    return hs_diag_set(&c->diag, HS_ERUNTIME, "cannot start rank 0's executor threads");
  s->x0->th_started = 1;
  s->t0 = hs_real_mono();
  if ((rc = await_ready(s))) return rc;
  s->t0 = hs_real_mono();
  /* The core schedules the cluster events (drv_wake_at) and runs the policy's init and start. */
  rc = settle(s, hs_rt_core_open(c));
  if (!rc) rc = settle(s, hs_rt_core_start(c));
  if (!rc && !c->failed) coordinate(s);
  return c->failed ? hs_rt_core_outcome(c) : rc;
}

int hs_real_rank_pins(const hs_real_config *cfg, const hs_real_launch *l, int server, hs_cpus *cpus, int *k) {
  /* The threads' rule (real_run.h), with this machine's ranks for the workers. */
  if (server || l->local_rank < 0 || !hs_real_pins(cfg, l->local_world, cpus)) return 0;
  *k = l->local_rank;
  return 1;
}

int hs_real_rank_run(const hs_real_config *cfg, const hs_real_launch *l, hs_real_result *res, hs_diag *d) {
  memset(res, 0, sizeof *res);
  int n_start = cfg->cluster ? cfg->cluster->n_workers : cfg->n_workers;
  int n = cfg->cluster ? hs_cluster_all_workers(cfg->cluster) : n_start; /* a rank for each joiner too */
  int rc = check_config(cfg, l, n_start, n, d);
  if (rc) return rc;
  if (l->rank != 0) return run_leaf(cfg, l, n, n_start, d);

  crd *s = calloc(1, sizeof *s);
  exec *x0 = calloc(1, sizeof *x0);
  int *fds = malloc(HS_RANK_MAX_WORLD * sizeof *fds);
  if (!s || !x0 || !fds) {
    free(s);
    free(x0);
    free(fds);
    return hs_diag_set(d, HS_ENOMEM, "out of memory");
  }
  for (int i = 0; i < HS_RANK_MAX_WORLD; i++) fds[i] = -1;
  int pair[2] = {-1, -1};
  hs_rt_core_init(&s->core, &ranks_driver);
  s->cfg = cfg;
  s->n = n;
  s->n_start = n_start;
  s->world = l->world;
  s->off = l->world - n;
  s->x0 = x0;
  s->timeout = hs_real_timeout(cfg->timeout_s);
  rc = run_root(s, l, fds, pair);
  if (!s->core.done) finish(s);
  /* Tell every rank to stop (with the outcome), then let worker 0's executor end. */
  cmsg stop = {.kind = C_STOP, .code = rc < 0 ? rc : rc ? HS_ERUNTIME : 0};
  for (int i = 0; i < s->world; i++)
    if (fds[i] >= 0) (void)send_msg(fds[i], &stop, NULL, 1.0);
  if (x0->th_started) pthread_join(x0->th, NULL);
  /* The waiting evaluations, after a failure too (what was due before it), then the final
   * model unless the last update was just evaluated: rank 0's replica (the server's global
   * model, or worker 0's, as every all-reduce covers every worker). */
  int erc = hs_rt_evals_drain(&s->evals, &s->core, x0->th_started && !rc && !s->interrupted ? x0->gm.global : NULL);
  if (!rc) rc = erc;
  int have_workers = s->w && s->core.n >= n_start;
  res->status = s->stalled ? HS_REAL_STALLED : s->interrupted ? HS_REAL_INTERRUPTED : HS_REAL_COMPLETE;
  if ((!rc || s->core.iterations > 0) && have_workers) {
    int frc = fill_result(s, res, !rc);
    if (!rc) rc = frc;
  }
  if (rc && d) {
    *d = s->core.diag;
    if (!d->msg[0]) hs_diag_set(d, rc, "multi-process real run failed (%s)", hs_strerror(rc));
    d->code = rc;
  }
  hs_rt_core_close(&s->core); /* the policy's fini */
  exec_fini(x0);
  while (s->ops) {
    cop *op = s->ops;
    s->ops = op->next;
    free(op);
  }
  hs_rt_evals_clear(&s->evals);
  hs_net_close(s->eval_net);
  hs_rank_star_close(fds, s->world);
  if (pair[1] >= 0) close(pair[1]);
  free(fds);
  free(s->w);
  hs_runtime_timers_free(&s->timers);
  free(s);
  free(x0);
  return rc;
}
