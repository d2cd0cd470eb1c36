/* The nccl communication backend: one process per GPU (see real_comm.h and real_nccl.h).
 *
 * Start-up: the rank and world size come from mpirun (OMPI_COMM_WORLD_RANK/SIZE) or from
 * torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (hs_real_launch_read).
 *
 * Two tables. hs_real_comm_nccl, the one `--backend nccl` finds, refuses to open
 * (HS_EUNSUPPORTED): the threaded runtime (real_run.c) would call one process's backend for
 * every rank, while this backend owns exactly one rank per process. hs_real_comm_nccl_rank
 * (real_nccl.h) is the working per-process backend that the multi-process runtime
 * (real_rank.h) drives when `hetsim real --backend nccl` runs under mpirun or torchrun;
 * tests/test_gpu_real.c also exercises it with forked processes.
 *
 * Control channel: a TCP star. Rank 0 listens on MASTER_ADDR:MASTER_PORT (mpirun: 127.0.0.1 and
 * 29500 unless set); every other rank connects (retrying until the timeout) and says its rank;
 * rank 0 sends everyone the ncclUniqueId of the world communicator. Afterwards one reader thread
 * per socket receives control messages (rank 0 relays those between other ranks): the unique
 * ids of sub-communicators, the headers of point-to-point transfers, and goodbyes. A socket that
 * closes without a goodbye means its process died: the peer is marked dead (rank 0 tells the
 * others), every wait in progress or to come fails with a message naming the rank, and the NCCL
 * communicators are aborted (ncclCommAbort). A rank whose own run failed (its communicators
 * aborted) says so in place of the goodbye, and its peers treat it as dead at once rather than
 * wait for it until their timeout.
 *
 * NCCL: communicators are created non-blocking (ncclCommInitRankConfig, blocking = 0) and their
 * state polled (ncclCommGetAsyncError) until ready, a dead peer, abort or the deadline, which
 * aborts them. On a non-blocking communicator a call may return ncclInProgress and NCCL then
 * enqueues its kernel from a background thread; NCCL's "Nonblocking group operation" rule is that
 * the communicator must reach ncclSuccess before any CUDA call related to the operation. So
 * every operation first polls the communicator to ncclSuccess (same checks), and only then
 * records its completion event on the backend's stream and polls that event: no wait is
 * unbounded, and no event can complete before the NCCL kernel it is meant to follow has been
 * enqueued. A receive queues its copy to the host only after that, since a copy to pageable
 * memory may block the thread until the stream reaches it. A pre-multiplied sum operator is
 * destroyed only once its collective has been enqueued. An all-reduce first orders the
 * backend's stream after the work of the net that owns the buffer (hs_net_cuda_record_owner),
 * which may still be writing it: an SGD update is asynchronous on the net's stream.
 *
 * Failure: after any failed wait the communicators are aborted (ncclCommAbort frees them) and the
 * reason kept; every later operation returns that reason without touching NCCL again.
 * Teardown of a clean run: ncclCommFinalize on every communicator, their state polled to
 * ncclSuccess within the timeout (a dead peer or the deadline aborts them instead), then
 * ncclCommDestroy, and only then the stream, event and device buffers are freed.
 *
 * All-reduce (device buffers: the net's gradient or parameters): ncclAllReduce in place with a
 * pre-multiplied sum operator (ncclRedOpCreatePreMulSum, the caller's weight as a host scalar),
 * so each rank's buffer is scaled by its weight on the device as part of the reduction. A subset
 * of the ranks (ksync, a worker set without the parameter server, ...) gets its own
 * communicator, created on first use by its members only: the lowest rank of the subset makes a
 * unique id and sends it to the others over the control channel; it is cached by the set. Ranks
 * outside the set take no part at all (no zeros are sent).
 *
 * Point-to-point (host buffers, as the runtime hands the parameter server's traffic over): the
 * sender announces (tag, floats) over the control channel, copies the buffer to a device bounce
 * vector and calls ncclSend; the receiver takes the announcements of that peer in order and
 * posts ncclRecv for each, keeping (host copies of) transfers whose tag it does not want yet, so
 * NCCL's in-order matching per pair and the contract's tag matching agree. A send returns when
 * the transfer is done, i.e. once the receiver has posted its receive (a rendezvous, bounded).
 *
 * Barrier: a one-float all-reduce over the world communicator.
 *
 * Threading: a process has one rank; calls may come from several threads and are serialised on
 * the backend's stream by a mutex; each makes the backend's GPU current on its thread first.
 * NOT RUN ON A GPU YET: this file compiles and links here (no GPU on the machines that wrote
 * it); see docs/gpu.md. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core_buildinfo.h"
#include "core/core_deadline.h"
#include "real/real_comm.h"
#include "real/real_nccl.h"

static int env_int(const char *name, int *out, hs_diag *d) {
  const char *s = getenv(name);
  if (!s) return 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (!*s || *end || v < 0 || v > 1000000)
    return hs_diag_set(d, HS_EINVAL, "environment variable %s: expected a non-negative integer, got \"%s\"", name, s);
  *out = (int)v;
  return 1;
}

/* A launcher's count that only decides pinning: the value of `name`, or -1 when unset or malformed. */
static int env_count(const char *name) {
  const char *s = getenv(name);
  char *end = NULL;
  errno = 0;
  long v = s && *s ? strtol(s, &end, 10) : -1;
  return s && *s && !*end && !errno && v >= 0 && v <= 1 << 20 ? (int)v : -1;
}

/* Where the launch's ranks run (hs_real_launch's local_rank, local_world). */
static void launch_local(hs_real_launch *l) {
  int mpi = !strcmp(l->source, "mpirun");
  l->local_rank = env_count(mpi ? "OMPI_COMM_WORLD_LOCAL_RANK" : "LOCAL_RANK");
  l->local_world = env_count(mpi ? "OMPI_COMM_WORLD_LOCAL_SIZE" : "LOCAL_WORLD_SIZE");
  if (l->local_rank < 0 && l->local_world < 0 && (!strncmp(l->master_addr, "127.", 4) ||
                                                  !strcmp(l->master_addr, "localhost") || !strcmp(l->master_addr, "::1"))) {
    l->local_rank = l->rank;
    l->local_world = l->world;
  }
  if (l->local_rank < 0 || l->local_world < 1 || l->local_rank >= l->local_world) l->local_rank = l->local_world = -1;
}

int hs_real_launch_read(hs_real_launch *l, int expect_world, hs_diag *d) {
  memset(l, 0, sizeof *l);
  l->rank = l->world = -1;
  l->local_rank = l->local_world = -1;
  l->source = "none";
  int r = -1, w = -1, got_r, got_w;
  if ((got_r = env_int("OMPI_COMM_WORLD_RANK", &r, d)) < 0) return got_r;
  if ((got_w = env_int("OMPI_COMM_WORLD_SIZE", &w, d)) < 0) return got_w;
  if (got_r || got_w) {
    l->source = "mpirun";
  } else {
    if ((got_r = env_int("RANK", &r, d)) < 0) return got_r;
    if ((got_w = env_int("WORLD_SIZE", &w, d)) < 0) return got_w;
    if (!got_r && !got_w) return 0;
    l->source = "torchrun";
  }
  const char *rn = !strcmp(l->source, "mpirun") ? "OMPI_COMM_WORLD_RANK" : "RANK";
  const char *wn = !strcmp(l->source, "mpirun") ? "OMPI_COMM_WORLD_SIZE" : "WORLD_SIZE";
  if (!got_r || !got_w) return hs_diag_set(d, HS_EINVAL, "%s is set but %s is not", got_r ? rn : wn, got_r ? wn : rn);
  if (w < 1 || r >= w) return hs_diag_set(d, HS_EINVAL, "%s=%d is not below %s=%d", rn, r, wn, w);
  if (expect_world > 0 && w != expect_world)
    return hs_diag_set(d, HS_EINVAL, "world-size mismatch: %s=%d but the run needs %d processes (one per worker, "
                       "those that join later included, plus one with a server rank)",
                       wn, w, expect_world);
  l->rank = r;
  l->world = w;
  const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  if (!strcmp(l->source, "torchrun") && (!addr || !port))
    return hs_diag_set(d, HS_EINVAL, "RANK and WORLD_SIZE are set but %s is not (torchrun sets MASTER_ADDR and MASTER_PORT)",
                       !addr ? "MASTER_ADDR" : "MASTER_PORT");
  snprintf(l->master_addr, sizeof l->master_addr, "%s", addr ? addr : "127.0.0.1");
  int p = 29500;
  if (port) {
    char *end;
    long v = strtol(port, &end, 10);
    if (!*port || *end || v < 1 || v > 65535)
      return hs_diag_set(d, HS_EINVAL, "MASTER_PORT: expected a port number, got \"%s\"", port);
    p = (int)v;
  }
  /* torchrun's agent (torch >= 2 with its default rendezvous) hosts its own store on MASTER_PORT
   * and says so to its workers; hetsim's channels then take the two ports after it. */
  const char *agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
  l->agent_store = !strcmp(l->source, "torchrun") && agent && !strcmp(agent, "True");
  if (l->agent_store && p > 65533)
    return hs_diag_set(d, HS_EINVAL, "MASTER_PORT=%d: torchrun's store holds it, and hetsim needs the two ports after it", p);
  l->master_port = p + l->agent_store;
  launch_local(l);
  return 0;
}

/* --- the registry's table: refuses until the runtime runs one worker per process ---------- */

static int refuse_open(hs_real_comm **out, const hs_real_comm_config *cfg, hs_diag *d) {
  (void)cfg;
  *out = NULL;
  return hs_diag_set(d, HS_EUNSUPPORTED, "--backend nccl in a single process: not supported yet; nccl runs one process per "
                     "GPU: start hetsim real under mpirun (mpirun -np N hetsim real ...) or with RANK, WORLD_SIZE, "
                     "MASTER_ADDR and MASTER_PORT set as torchrun does; in one process use --backend cpu or local");
}
static void refuse_close(hs_real_comm *c) { (void)c; }
static int refuse_allreduce(hs_real_comm *c, uint64_t op, int rank, float *buf, int64_t n,
                            const int *ranks, int nranks, const double *weights, hs_diag *d) {
  (void)c, (void)op, (void)rank, (void)buf, (void)n, (void)ranks, (void)nranks, (void)weights;
  return hs_diag_set(d, HS_EUNSUPPORTED, "nccl: not supported yet");
}
static int refuse_send(hs_real_comm *c, int rank, int peer, uint64_t tag, const float *buf, int64_t n,
                       hs_diag *d) {
  (void)c, (void)rank, (void)peer, (void)tag, (void)buf, (void)n;
  return hs_diag_set(d, HS_EUNSUPPORTED, "nccl: not supported yet");
}
static int refuse_recv(hs_real_comm *c, int rank, int peer, uint64_t tag, float *buf, int64_t n,
                       hs_diag *d) {
  (void)c, (void)rank, (void)peer, (void)tag, (void)buf, (void)n;
  return hs_diag_set(d, HS_EUNSUPPORTED, "nccl: not supported yet");
}
static int refuse_barrier(hs_real_comm *c, int rank, hs_diag *d) {
  (void)c, (void)rank;
  return hs_diag_set(d, HS_EUNSUPPORTED, "nccl: not supported yet");
}
static void refuse_abort(hs_real_comm *c) { (void)c; }

const hs_real_comm_ops hs_real_comm_nccl = {
    .version = HS_REAL_COMM_VERSION,
    .name = "nccl",
    .description = "one process per GPU over NCCL (start under mpirun or torchrun; not run on a GPU yet)",
    .device_buffers = 1,
    .open = refuse_open,
    .close = refuse_close,
    .allreduce = refuse_allreduce,
    .send = refuse_send,
    .recv = refuse_recv,
    .barrier = refuse_barrier,
    .abort = refuse_abort,
};

/* --- the per-process backend ----------------------------------------------------------------- */

#if HETSIM_HAVE_CUDA && HETSIM_HAVE_NCCL

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "nn/nn_cuda.h"
#include "nn/nn_cudalib.h"
#include "real/real_rank_tcp.h"
#include "real/real_worker.h"

#define NC_MAX_WORLD 64

/* MSG_DEAD: rank n is gone (tag 1: it failed and left, 0: its connection dropped); MSG_FAILED:
 * the sender's own run failed and it is leaving (a goodbye after which it is gone). */
enum { MSG_HELLO = 1, MSG_UID = 2, MSG_SUBUID = 3, MSG_P2P = 4, MSG_DEAD = 5, MSG_BYE = 6, MSG_FAILED = 7 };

/* One frame on the wire, followed by len payload bytes (at most sizeof(ncclUniqueId)). Both ends
 * are this same program on hosts of one byte order; fields are fixed-size. */
typedef struct nc_frame {
  int32_t src, dst, kind, len;
  uint64_t tag;  /* P2P: the transfer's tag */
  int64_t n;     /* P2P: floats; DEAD: the dead rank */
  uint64_t mask; /* SUBUID: the subset */
} nc_frame;

typedef struct nc_msg {
  nc_frame f;
  unsigned char data[sizeof(ncclUniqueId)];
  float *parked; /* a P2P transfer received before it was asked for */
  struct nc_msg *next;
} nc_msg;

typedef struct nc_sub {
  uint64_t mask;
  ncclComm_t comm;
  struct nc_sub *next;
} nc_sub;

typedef struct nc_reader {
  hs_real_comm *c;
  int peer;
  pthread_t th;
  int started;
} nc_reader;

struct hs_real_comm {
  hs_real_comm_config cfg;
  char device[64];
  int ordinal; /* the GPU, whose primary context the stream, event and communicators are of */
  int rank, world;
  const hs_nccl_api *nccl;
  int sock[NC_MAX_WORLD];          /* rank 0: one per peer; others: sock[0] */
  pthread_mutex_t wmu[NC_MAX_WORLD]; /* one writer at a time per socket */
  nc_reader readers[NC_MAX_WORLD];
  pthread_mutex_t mu; /* the inbox, the flags, the sub-communicator cache */
  pthread_cond_t cv;
  pthread_mutex_t gpu; /* the stream and the communicators: one operation at a time */
  nc_msg *inbox;
  int aborted, closing, dead_rank, comms_aborted;
  char dead_why[256];
  int fail_code;       /* why the communicators were aborted (gpu held): returned by every */
  char fail_msg[1024]; /* later operation */
  ncclComm_t world_comm;
  nc_sub *subs;
  cudaStream_t stream;
  cudaEvent_t ev;
  float *bounce; /* cfg.n floats of device memory */
  float *one;    /* one float, for the barrier */
};

static int ms_left(const struct timespec *dl) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double s = (double)(dl->tv_sec - now.tv_sec) + 1e-9 * (double)(dl->tv_nsec - now.tv_nsec);
  return s <= 0 ? 0 : s > 1e6 ? 1000000000 : (int)(s * 1000) + 1;
}

static int write_all(int fd, const void *p, size_t n) {
  const char *b = p;
  while (n > 0) {
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Reads n bytes; with a deadline (dl not NULL) gives up at it. 0, or -1 on EOF, error or time. */
static int read_all(int fd, void *p, size_t n, const struct timespec *dl) {
  char *b = p;
  while (n > 0) {
    if (dl) {
      struct pollfd pf = {.fd = fd, .events = POLLIN};
      int r = poll(&pf, 1, ms_left(dl));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return -1;
    }
    ssize_t k = recv(fd, b, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

/* The socket that reaches rank `to` (rank 0 relays for the others). */
static int route(const hs_real_comm *c, int to) { return c->rank == 0 ? to : 0; }

static int send_frame(hs_real_comm *c, int via, const nc_frame *f, const void *data) {
  if (via < 0 || via >= c->world || c->sock[via] < 0) return -1;
  pthread_mutex_lock(&c->wmu[via]);
  int rc = write_all(c->sock[via], f, sizeof *f);
  if (!rc && f->len > 0) rc = write_all(c->sock[via], data, (size_t)f->len);
  pthread_mutex_unlock(&c->wmu[via]);
  return rc;
}

static void mark_dead(hs_real_comm *c, int rank, const char *why) {
  pthread_mutex_lock(&c->mu);
  if (c->dead_rank < 0) {
    c->dead_rank = rank;
    snprintf(c->dead_why, sizeof c->dead_why, "%s", why);
  }
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* The peer at the other end of a reader's socket is gone (failed: it said its run failed;
 * else its connection dropped): marked dead unless this rank is closing itself, and rank 0 tells
 * the others. */
static void peer_gone(hs_real_comm *c, int peer, int failed) {
  pthread_mutex_lock(&c->mu);
  int closing = c->closing;
  pthread_mutex_unlock(&c->mu);
  if (closing) return;
  char why[128];
  if (failed) snprintf(why, sizeof why, "rank %d failed and left the run", peer);
  else snprintf(why, sizeof why, "rank %d closed its control connection without saying goodbye (its process died?)", peer);
  mark_dead(c, peer, why);
  if (c->rank == 0) {
    nc_frame f = {.src = 0, .kind = MSG_DEAD, .n = peer, .tag = (uint64_t)failed};
    for (int i = 1; i < c->world; i++)
      if (i != peer) {
        f.dst = i;
        (void)send_frame(c, i, &f, NULL);
      }
  }
}

static void *reader_main(void *p) {
  nc_reader *r = p;
  hs_real_comm *c = r->c;
  int fd = c->sock[r->peer];
  for (;;) {
    nc_msg *m = calloc(1, sizeof *m);
    if (!m) {
      mark_dead(c, c->rank, "out of memory in the control channel");
      break;
    }
    if (read_all(fd, &m->f, sizeof m->f, NULL) || m->f.len < 0 || m->f.len > (int)sizeof m->data ||
        (m->f.len > 0 && read_all(fd, m->data, (size_t)m->f.len, NULL))) {
      free(m);
      peer_gone(c, r->peer, 0);
      break;
    }
    if (m->f.dst != c->rank) { /* rank 0 relays */
      (void)send_frame(c, route(c, m->f.dst), &m->f, m->data);
      free(m);
      continue;
    }
    if (m->f.kind == MSG_DEAD) {
      char why[128];
      if (m->f.tag) snprintf(why, sizeof why, "rank %lld failed and left the run (rank 0 says)", (long long)m->f.n);
      else snprintf(why, sizeof why, "rank %lld's process died (rank 0 lost its control connection)", (long long)m->f.n);
      mark_dead(c, (int)m->f.n, why);
      free(m);
      continue;
    }
    if (m->f.kind == MSG_BYE || m->f.kind == MSG_FAILED) {
      int failed = m->f.kind == MSG_FAILED;
      free(m);
      if (failed) peer_gone(c, r->peer, 1);
      break; /* the peer has left; its EOF is expected */
    }
    pthread_mutex_lock(&c->mu);
    nc_msg **q = &c->inbox;
    while (*q) q = &(*q)->next;
    *q = m;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
  }
  return NULL;
}

/* Why waiting must stop now (mu held): HS_EINTR after abort, HS_ERUNTIME for a dead peer. */
static int stop_reason(hs_real_comm *c, const char *what, hs_diag *d) {
  if (c->aborted) return hs_diag_set(d, HS_EINTR, "nccl %s on rank %d: aborted", what, c->rank);
  if (c->dead_rank >= 0) return hs_diag_set(d, HS_ERUNTIME, "nccl %s on rank %d: %s", what, c->rank, c->dead_why);
  return 0;
}

/* Takes the first inbox message matching (kind, src, and for SUBUID the mask), waiting until
 * the deadline. src < 0 matches any source. */
static nc_msg *take_msg(hs_real_comm *c, int kind, int src, uint64_t mask, const struct timespec *dl,
                        const char *what, hs_diag *d) {
  pthread_mutex_lock(&c->mu);
  for (;;) {
    for (nc_msg **p = &c->inbox; *p; p = &(*p)->next) {
      nc_msg *m = *p;
      if (m->f.kind == kind && (src < 0 || m->f.src == src) && !m->parked &&
          (kind != MSG_SUBUID || m->f.mask == mask)) {
        *p = m->next;
        pthread_mutex_unlock(&c->mu);
        return m;
      }
    }
    if (stop_reason(c, what, d)) break;
    if (pthread_cond_timedwait(&c->cv, &c->mu, dl) == ETIMEDOUT) {
      hs_diag_set(d, HS_ERUNTIME, "nccl %s on rank %d: nothing from rank %d within %.3g s", what, c->rank, src,
                  c->cfg.timeout_s);
      break;
    }
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

/* Aborts every communicator (gpu held) and keeps `why` (a failed operation's diagnostic) for
 * the operations that come later. ncclCommAbort frees a communicator: the handles are cleared so
 * that nothing passes them to NCCL again. */
static void abort_comms(hs_real_comm *c, const hs_diag *why) {
  if (!c->fail_code) {
    c->fail_code = why && why->code ? why->code : HS_ERUNTIME;
    snprintf(c->fail_msg, sizeof c->fail_msg, "%s", why && why->msg[0] ? why->msg : "aborted");
  }
  if (c->comms_aborted) return;
  c->comms_aborted = 1;
  for (nc_sub *s = c->subs; s; s = s->next)
    if (s->comm) {
      (void)c->nccl->ncclCommAbort(s->comm);
      s->comm = NULL;
    }
  if (c->world_comm) {
    (void)c->nccl->ncclCommAbort(c->world_comm);
    c->world_comm = NULL;
  }
}

/* Once the communicators are aborted, the stored failure (gpu held). */
static int after_abort(const hs_real_comm *c, const char *what, hs_diag *d) {
  if (!c->comms_aborted) return 0;
  return hs_diag_set(d, c->fail_code ? c->fail_code : HS_ERUNTIME,
                     "nccl %s on rank %d: the communicators were aborted after an earlier failure: %s", what,
                     c->rank, c->fail_msg);
}

/* Makes the backend's GPU (its primary context) current on the calling thread, which may not be
 * the thread that opened the backend, and whose current context after_owner may have set to a
 * net's green context: the stream, the event and the copies belong to the primary one (gpu held). */
static int bind_gpu(const hs_real_comm *c, const char *what, hs_diag *d) {
  cudaError_t e = cudaSetDevice(c->ordinal);
  if (e == cudaSuccess) return 0;
  (void)cudaGetLastError();
  return hs_diag_set(d, HS_ERUNTIME, "nccl %s on rank %d: cudaSetDevice(%d): %s", what, c->rank, c->ordinal,
                     cudaGetErrorString(e));
}

static int nccl_fail(hs_real_comm *c, ncclResult_t r, ncclComm_t comm, const char *what, hs_diag *d) {
  const char *last = comm ? c->nccl->ncclGetLastError(comm) : NULL;
  return hs_diag_set(d, HS_ERUNTIME, "nccl %s on rank %d: %s%s%s", what, c->rank, c->nccl->ncclGetErrorString(r),
                     last && *last ? ": " : "", last && *last ? last : "");
}

/* What poll waits for. */
enum { WAIT_READY = 0, WAIT_EVENT = 1 };

/* Polls until the communicator's state is ncclSuccess (WAIT_READY: an operation just issued on
 * it has been enqueued, or it finished initialising) and, for WAIT_EVENT, until the event
 * recorded after the operation's work is done too; the deadline, a dead peer and abort are the
 * ways out, and every way out but success aborts the communicators. Called with gpu held. */
static int poll_comm(hs_real_comm *c, ncclComm_t comm, int what_for, const struct timespec *dl, const char *what,
                     hs_diag *d) {
  for (;;) {
    ncclResult_t st = ncclSuccess;
    ncclResult_t r = c->nccl->ncclCommGetAsyncError(comm, &st);
    if (r != ncclSuccess || (st != ncclSuccess && st != ncclInProgress)) {
      int rc = nccl_fail(c, r != ncclSuccess ? r : st, comm, what, d);
      pthread_mutex_lock(&c->mu);
      if (c->dead_rank >= 0) rc = stop_reason(c, what, d); /* say who died, not only what NCCL saw */
      pthread_mutex_unlock(&c->mu);
      abort_comms(c, d);
      return rc;
    }
    if (st == ncclSuccess) {
      if (what_for == WAIT_READY) return 0;
      cudaError_t e = cudaEventQuery(c->ev);
      if (e == cudaSuccess) return 0;
      if (e != cudaErrorNotReady) {
        int rc = hs_diag_set(d, HS_ERUNTIME, "nccl %s on rank %d: %s", what, c->rank, cudaGetErrorString(e));
        abort_comms(c, d);
        return rc;
      }
    }
    pthread_mutex_lock(&c->mu);
    int rc = stop_reason(c, what, d);
    pthread_mutex_unlock(&c->mu);
    if (!rc && hs_deadline_past(dl))
      rc = hs_diag_set(d, HS_ERUNTIME, "nccl %s on rank %d: not %s within %.3g s", what, c->rank,
                       what_for == WAIT_READY ? "enqueued" : "done", c->cfg.timeout_s);
    if (rc) {
      abort_comms(c, d);
      return rc;
    }
    nanosleep(&(struct timespec){0, 100000}, NULL);
  }
}

/* After an NCCL call on comm returned r: a failure, or the poll to ncclSuccess that must come
 * before any CUDA call related to the operation (gpu held). */
static int enqueued(hs_real_comm *c, ncclResult_t r, ncclComm_t comm, const struct timespec *dl, const char *what,
                    hs_diag *d) {
  if (r != ncclSuccess && r != ncclInProgress) {
    int rc = nccl_fail(c, r, comm, what, d);
    abort_comms(c, d);
    return rc;
  }
  return poll_comm(c, comm, WAIT_READY, dl, what, d);
}

/* Records the completion event after everything enqueued on the backend's stream and polls it
 * (gpu held). */
static int completed(hs_real_comm *c, ncclComm_t comm, const struct timespec *dl, const char *what, hs_diag *d) {
  cudaError_t e = cudaEventRecord(c->ev, c->stream);
  if (e != cudaSuccess) {
    int rc = hs_diag_set(d, HS_ERUNTIME, "nccl %s on rank %d: cudaEventRecord: %s", what, c->rank,
                         cudaGetErrorString(e));
    abort_comms(c, d);
    return rc;
  }
  return poll_comm(c, comm, WAIT_EVENT, dl, what, d);
}

/* A communicator of nr ranks, this one being rk, created non-blocking and polled until ready. */
static int comm_init(hs_real_comm *c, ncclComm_t *out, ncclUniqueId id, int nr, int rk,
                     const struct timespec *dl, hs_diag *d) {
  *out = NULL;
  ncclConfig_t conf = NCCL_CONFIG_INITIALIZER;
  conf.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = c->nccl->ncclCommInitRankConfig(&comm, nr, id, rk, &conf);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm) (void)c->nccl->ncclCommAbort(comm);
    return nccl_fail(c, r, NULL, "ncclCommInitRankConfig", d);
  }
  int rc = poll_comm(c, comm, WAIT_READY, dl, "communicator set-up", d);
  if (rc) {
    /* Not in the world or sub-communicator lists yet, so abort_comms did not see it. */
    (void)c->nccl->ncclCommAbort(comm);
    return rc;
  }
  *out = comm;
  return 0;
}

static int device_ordinal(const char *dev, int *ordinal, hs_diag *d) {
  char *end;
  long v = dev && !strncmp(dev, "cuda:", 5) ? strtol(dev + 5, &end, 10) : -1;
  if (v < 0 || v > 1023 || end == dev + 5 || *end)
    return hs_diag_set(d, HS_EINVAL, "--backend nccl: device \"%s\": expected \"cuda:I\" (this process's GPU)",
                       dev ? dev : "");
  *ordinal = (int)v;
  return 0;
}

/* hs_rank_wait for fd readable by dl, or the runtime's giving up on this open
 * (hs_real_comm_config.cancel): 0, -2 the deadline, -4 cancelled, -1 failed. */
static int wait_readable(const hs_real_comm *c, int fd, const struct timespec *dl) {
  return hs_rank_wait(fd, POLLIN, hs_real_mono() + ms_left(dl) / 1000.0, c->cfg.cancel);
}

/* The control channel: rank 0 accepts world-1 connections, the others connect; then rank 0
 * sends the world's unique id. A cancelled open (hs_real_comm_config.cancel) ends with
 * HS_EINTR. */
static int bootstrap(hs_real_comm *c, const hs_real_launch *l, ncclUniqueId *id, const struct timespec *dl,
                     hs_diag *d) {
  char port[16];
  snprintf(port, sizeof port, "%d", l->master_port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  if (c->rank == 0) hints.ai_flags = AI_PASSIVE;
  int g = getaddrinfo(c->rank == 0 ? NULL : l->master_addr, port, &hints, &ai);
  if (g) return hs_diag_set(d, HS_EINVAL, "nccl bootstrap: %s:%s: %s", l->master_addr, port, gai_strerror(g));
  int rc = 0;
  if (c->rank == 0) {
    int ls = -1;
    for (struct addrinfo *a = ai; a && ls < 0; a = a->ai_next) {
      ls = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      int one = 1;
      if (ls >= 0) (void)setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (ls >= 0 && (bind(ls, a->ai_addr, a->ai_addrlen) || listen(ls, NC_MAX_WORLD))) {
        close(ls);
        ls = -1;
      }
    }
    if (ls < 0) rc = hs_diag_set(d, HS_ERUNTIME, "nccl bootstrap: rank 0 cannot listen on port %s: %s", port, strerror(errno));
    for (int got = 1; !rc && got < c->world;) {
      int w = wait_readable(c, ls, dl);
      if (w == -4) {
        rc = hs_diag_set(d, HS_EINTR, "nccl bootstrap: cancelled when rank 0 had heard from %d of %d ranks (the "
                         "run ended)", got, c->world);
        break;
      }
      if (w) {
        rc = hs_diag_set(d, HS_ERUNTIME, "nccl bootstrap: rank 0 heard from %d of %d ranks within %.3g s", got,
                         c->world, c->cfg.timeout_s);
        break;
      }
      int s = accept(ls, NULL, NULL);
      if (s < 0) continue;
      nc_frame f;
      if (read_all(s, &f, sizeof f, dl) || f.kind != MSG_HELLO || f.src < 1 || f.src >= c->world || c->sock[f.src] >= 0) {
        close(s);
        continue;
      }
      c->sock[f.src] = s;
      got++;
    }
    if (ls >= 0) close(ls);
    ncclResult_t r = rc ? ncclSuccess : c->nccl->ncclGetUniqueId(id);
    if (r != ncclSuccess) rc = nccl_fail(c, r, NULL, "ncclGetUniqueId", d);
    for (int i = 1; !rc && i < c->world; i++) {
      nc_frame f = {.src = 0, .dst = i, .kind = MSG_UID, .len = (int32_t)sizeof *id};
      if (send_frame(c, i, &f, id)) rc = hs_diag_set(d, HS_ERUNTIME, "nccl bootstrap: cannot reach rank %d", i);
    }
  } else {
    int s = -1;
    while (s < 0 && !hs_deadline_past(dl) && !hs_rank_cancelled(c->cfg.cancel)) {
      for (struct addrinfo *a = ai; a && s < 0; a = a->ai_next) {
        s = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (s >= 0 && hs_rank_connect(s, a->ai_addr, a->ai_addrlen, hs_real_mono() + ms_left(dl) / 1000.0)) {
          close(s);
          s = -1;
        }
      }
      if (s < 0) nanosleep(&(struct timespec){0, 100000000L}, NULL);
    }
    if (s < 0 && hs_rank_cancelled(c->cfg.cancel)) {
      rc = hs_diag_set(d, HS_EINTR, "nccl bootstrap: rank %d: cancelled before it reached rank 0 (the run ended)",
                       c->rank);
    } else if (s < 0) {
      rc = hs_diag_set(d, HS_ERUNTIME, "nccl bootstrap: rank %d could not reach rank 0 at %s:%s within %.3g s",
                       c->rank, l->master_addr, port, c->cfg.timeout_s);
    } else {
      c->sock[0] = s;
      nc_frame f = {.src = c->rank, .dst = 0, .kind = MSG_HELLO};
      nc_frame u;
      /* Rank 0 sends the unique id once every rank has said hello. */
      int w = send_frame(c, 0, &f, NULL) ? -1 : wait_readable(c, s, dl);
      if (w == -4)
        rc = hs_diag_set(d, HS_EINTR, "nccl bootstrap: rank %d: cancelled while it waited for the unique id (the run "
                         "ended)", c->rank);
      else if (w || read_all(s, &u, sizeof u, dl) || u.kind != MSG_UID || u.len != (int32_t)sizeof *id ||
               read_all(s, id, sizeof *id, dl)) {
        if (hs_deadline_past(dl))
          rc = hs_diag_set(d, HS_ERUNTIME, "nccl bootstrap: rank %d got no unique id from rank 0 within %.3g s",
                           c->rank, c->cfg.timeout_s);
        else /* rank 0 closed the connection, or sent something else: its own message says why */
          rc = hs_diag_set(d, HS_ERUNTIME, "nccl bootstrap: rank 0 closed the connection before it sent rank %d the "
                           "unique id (did rank 0 fail or die?)", c->rank);
      }
    }
  }
  freeaddrinfo(ai);
  for (int i = 0; i < c->world; i++)
    if (c->sock[i] >= 0) {
      int one = 1;
      (void)setsockopt(c->sock[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
  return rc;
}

/* Ends every communicator of a clean run (gpu held): ncclCommFinalize on all of them (each
 * completes only once every member has called it, so all are issued before any is waited for),
 * their state polled to ncclSuccess within the timeout, then ncclCommDestroy. A failure, a dead
 * peer or the deadline aborts them instead. */
static void finalize_comms(hs_real_comm *c) {
  enum { MAX_COMMS = 1024 };
  ncclComm_t comms[MAX_COMMS];
  int n = 0;
  for (nc_sub *s = c->subs; s && n < MAX_COMMS - 1; s = s->next)
    if (s->comm) comms[n++] = s->comm;
  if (c->world_comm) comms[n++] = c->world_comm;
  struct timespec dl;
  hs_deadline_in(&dl, c->cfg.timeout_s);
  hs_diag d = {0};
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    ncclResult_t r = c->nccl->ncclCommFinalize(comms[i]);
    if (r != ncclSuccess && r != ncclInProgress) rc = nccl_fail(c, r, comms[i], "ncclCommFinalize", &d);
  }
  /* poll_comm aborts every communicator itself when one fails. */
  for (int i = 0; i < n && !rc; i++) rc = poll_comm(c, comms[i], WAIT_READY, &dl, "teardown (ncclCommFinalize)", &d);
  if (rc) {
    abort_comms(c, &d);
    return;
  }
  for (nc_sub *s = c->subs; s; s = s->next)
    if (s->comm) {
      (void)c->nccl->ncclCommDestroy(s->comm);
      s->comm = NULL;
    }
  if (c->world_comm) {
    (void)c->nccl->ncclCommDestroy(c->world_comm);
    c->world_comm = NULL;
  }
}

static void rank_close(hs_real_comm *c) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  int clean = !c->aborted && c->dead_rank < 0;
  pthread_mutex_unlock(&c->mu);
  if (c->nccl) {
    /* The control channel stays watched while the communicators finalize: a peer that dies
     * meanwhile ends the wait early. */
    pthread_mutex_lock(&c->gpu);
    if (clean && !c->comms_aborted) finalize_comms(c);
    else abort_comms(c, NULL);
    nc_sub *s = c->subs;
    while (s) {
      nc_sub *nx = s->next;
      free(s);
      s = nx;
    }
    c->subs = NULL;
    pthread_mutex_unlock(&c->gpu);
  }
  pthread_mutex_lock(&c->mu);
  c->closing = 1;
  pthread_mutex_unlock(&c->mu);
  /* The communicators are gone: nothing NCCL enqueued can still use these, once the stream has
   * drained (polled for one timeout: a copy that never ends leaves them to the process's exit
   * rather than hanging close). */
  if (c->stream) (void)cudaSetDevice(c->ordinal);
  int drained = !c->stream || hs_cuda_stream_drained(c->stream, c->cfg.timeout_s);
  if (!drained) hs_cuda_mark_wedged(c->ordinal);
  if (drained && !hs_cuda_device_wedged(c->ordinal)) {
    if (c->ev) (void)cudaEventDestroy(c->ev);
    if (c->stream) (void)cudaStreamDestroy(c->stream);
    if (c->bounce) (void)cudaFree(c->bounce);
    if (c->one) (void)cudaFree(c->one);
  }
  /* Goodbye (or, after a failure, "failed"), then wake the readers. */
  for (int i = 0; i < c->world; i++)
    if (c->sock[i] >= 0) {
      nc_frame f = {.src = c->rank, .dst = i, .kind = clean && !c->comms_aborted ? MSG_BYE : MSG_FAILED};
      (void)send_frame(c, i, &f, NULL);
      shutdown(c->sock[i], SHUT_RDWR);
    }
  for (int i = 0; i < c->world; i++)
    if (c->readers[i].started) pthread_join(c->readers[i].th, NULL);
  for (int i = 0; i < c->world; i++) {
    if (c->sock[i] >= 0) close(c->sock[i]);
    pthread_mutex_destroy(&c->wmu[i]);
  }
  while (c->inbox) {
    nc_msg *m = c->inbox;
    c->inbox = m->next;
    free(m->parked);
    free(m);
  }
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  pthread_mutex_destroy(&c->gpu);
  free(c);
}

static int rank_open(hs_real_comm **out, const hs_real_comm_config *cfg, hs_diag *d) {
  *out = NULL;
  hs_real_launch l;
  int rc = hs_real_launch_read(&l, cfg->world, d);
  if (rc) return rc;
  if (!strcmp(l.source, "none"))
    return hs_diag_set(d, HS_EINVAL, "--backend nccl: start one process per rank with mpirun, or set RANK, WORLD_SIZE, "
                       "MASTER_ADDR and MASTER_PORT as torchrun does");
  if (l.world > NC_MAX_WORLD || cfg->n < 1)
    return hs_diag_set(d, HS_EINVAL, "--backend nccl: %d ranks (at most %d), %lld floats", l.world, NC_MAX_WORLD,
                       (long long)cfg->n);
  int ordinal = -1;
  if ((rc = device_ordinal(cfg->device, &ordinal, d))) return rc;
  hs_diag sub = {0};
  const hs_nccl_api *nccl = hs_nccl_api_get(&sub);
  if (!nccl) return hs_diag_set(d, HS_EUNSUPPORTED, "--backend nccl: %s", sub.msg);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1)
    return hs_diag_set(d, HS_EUNSUPPORTED, "--backend nccl: this machine has no usable GPU");
  if (ordinal >= count)
    return hs_diag_set(d, HS_EINVAL, "--backend nccl: device \"%s\": this machine has %d GPU%s", cfg->device, count,
                       count == 1 ? "" : "s");
  hs_real_comm *c = calloc(1, sizeof *c);
  if (!c) return hs_diag_set(d, HS_ENOMEM, "out of memory for the nccl comm backend");
  c->cfg = *cfg;
  snprintf(c->device, sizeof c->device, "%s", cfg->device);
  c->cfg.device = c->device;
  c->cfg.timeout_s = hs_real_timeout(c->cfg.timeout_s);
  c->ordinal = ordinal;
  c->rank = l.rank;
  c->world = l.world;
  c->dead_rank = -1;
  for (int i = 0; i < NC_MAX_WORLD; i++) c->sock[i] = -1;
  for (int i = 0; i < c->world; i++) pthread_mutex_init(&c->wmu[i], NULL);
  pthread_mutex_init(&c->mu, NULL);
  hs_cond_init_monotonic(&c->cv);
  pthread_mutex_init(&c->gpu, NULL);
  struct timespec dl;
  hs_deadline_in(&dl, c->cfg.timeout_s);
  cudaError_t e = cudaSetDevice(ordinal);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->ev, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaMalloc((void **)&c->bounce, (size_t)cfg->n * sizeof(float));
  if (e == cudaSuccess) e = cudaMalloc((void **)&c->one, sizeof(float));
  /* The barrier all-reduces this float: a defined 0, not whatever the allocation held. */
  if (e == cudaSuccess) e = cudaMemset(c->one, 0, sizeof(float));
  if (e != cudaSuccess) {
    rc = hs_diag_set(d, e == cudaErrorMemoryAllocation ? HS_ENOMEM : HS_ERUNTIME, "--backend nccl: %s: %s", c->device,
                     cudaGetErrorString(e));
    goto fail;
  }
  ncclUniqueId id;
  c->nccl = nccl; /* bootstrap's rank 0 calls ncclGetUniqueId */
  if ((rc = bootstrap(c, &l, &id, &dl, d))) goto fail;
  for (int i = 0; i < c->world; i++)
    if (c->sock[i] >= 0) {
      c->readers[i] = (nc_reader){.c = c, .peer = i};
      if (pthread_create(&c->readers[i].th, NULL, reader_main, &c->readers[i])) {
        rc = hs_diag_set(d, HS_ERUNTIME, "nccl: cannot start a control-channel thread");
        goto fail;
      }
      c->readers[i].started = 1;
    }
  pthread_mutex_lock(&c->gpu);
  rc = comm_init(c, &c->world_comm, id, c->world, c->rank, &dl, d);
  pthread_mutex_unlock(&c->gpu);
  if (rc) goto fail;
  *out = c;
  return 0;
fail:
  /* Marked failed, so that rank_close tells the peers so (MSG_FAILED, which they take as this
   * rank dead at once) instead of a goodbye after which they would wait for its communicator
   * until the timeout. */
  pthread_mutex_lock(&c->gpu);
  abort_comms(c, d);
  pthread_mutex_unlock(&c->gpu);
  rank_close(c);
  return rc;
}

int hs_real_nccl_check(const char *device, hs_diag *d) {
  int ordinal = -1, rc = device_ordinal(device, &ordinal, d);
  if (rc) return rc;
  hs_diag sub = {0};
  if (!hs_nccl_api_get(&sub)) return hs_diag_set(d, HS_EUNSUPPORTED, "--backend nccl: %s", sub.msg);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1)
    return hs_diag_set(d, HS_EUNSUPPORTED, "--backend nccl: this machine has no usable GPU");
  if (ordinal >= count)
    return hs_diag_set(d, HS_EINVAL, "--backend nccl: device \"%s\": bad device index, this machine has %d GPU%s", device,
                       count, count == 1 ? "" : "s");
  return 0;
}

static int check_rank(const hs_real_comm *c, int rank, const char *what, hs_diag *d) {
  if (rank == c->rank) return 0;
  return hs_diag_set(d, HS_EINVAL, "nccl %s: called for rank %d in the process of rank %d (one rank per process)",
                     what, rank, c->rank);
}

/* The communicator of the ranks in mask (gpu held): the world's, a cached one, or a new one
 * whose unique id the subset's lowest rank makes and sends. */
static int sub_comm(hs_real_comm *c, uint64_t mask, ncclComm_t *out, const struct timespec *dl, hs_diag *d) {
  uint64_t all = c->world == 64 ? ~0ULL : ((1ULL << c->world) - 1);
  if (mask == all) {
    *out = c->world_comm;
    return 0;
  }
  for (nc_sub *s = c->subs; s; s = s->next)
    if (s->mask == mask) {
      *out = s->comm;
      return 0;
    }
  int nr = 0, rk = 0, low = -1;
  for (int i = 0; i < c->world; i++)
    if (mask >> i & 1) {
      if (low < 0) low = i;
      if (i < c->rank) rk++;
      nr++;
    }
  ncclUniqueId id;
  if (c->rank == low) {
    ncclResult_t r = c->nccl->ncclGetUniqueId(&id);
    if (r != ncclSuccess) return nccl_fail(c, r, NULL, "ncclGetUniqueId", d);
    for (int i = low + 1; i < c->world; i++)
      if (mask >> i & 1) {
        nc_frame f = {.src = c->rank, .dst = i, .kind = MSG_SUBUID, .len = (int32_t)sizeof id, .mask = mask};
        if (send_frame(c, route(c, i), &f, &id))
          return hs_diag_set(d, HS_ERUNTIME, "nccl: rank %d cannot reach rank %d over the control channel", c->rank, i);
      }
  } else {
    nc_msg *m = take_msg(c, MSG_SUBUID, low, mask, dl, "sub-communicator set-up", d);
    if (!m) return d->code ? d->code : HS_ERUNTIME;
    memcpy(&id, m->data, sizeof id);
    free(m);
  }
  nc_sub *s = calloc(1, sizeof *s);
  if (!s) return hs_diag_set(d, HS_ENOMEM, "out of memory for a sub-communicator");
  int rc = comm_init(c, &s->comm, id, nr, rk, dl, d);
  if (rc) {
    free(s);
    return rc;
  }
  s->mask = mask;
  s->next = c->subs;
  c->subs = s;
  *out = s->comm;
  return 0;
}

/* Orders the backend's stream after everything the net owning buf has enqueued (gpu held): the
 * all-reduce runs on the backend's stream, while the net's SGD update (hs_net_update) and other
 * work run asynchronously on the net's own stream, so without this NCCL could read parameters
 * that an update is still writing. A buffer that belongs to no cuda net (a test's own vector, or
 * a build without cuda nets) is the caller's to have finished writing. */
static int after_owner(hs_real_comm *c, const float *buf, hs_diag *d) {
  void *ev = NULL;
  hs_diag od = {0};
  int orc = hs_net_cuda_record_owner(buf, &ev, &od);
  if (orc == HS_ENOTFOUND || orc == HS_EUNSUPPORTED) return 0;
  if (orc) return hs_diag_set(d, orc, "nccl all-reduce on rank %d: %s", c->rank, od.msg);
  cudaError_t e = cudaStreamWaitEvent(c->stream, (cudaEvent_t)ev, 0);
  (void)cudaEventDestroy((cudaEvent_t)ev); /* the wait has captured it */
  if (e != cudaSuccess)
    return hs_diag_set(d, HS_ERUNTIME, "nccl all-reduce on rank %d: cudaStreamWaitEvent (the net's work): %s", c->rank,
                       cudaGetErrorString(e));
  return 0;
}

static int rank_allreduce(hs_real_comm *c, uint64_t op, int rank, float *buf, int64_t n, const int *ranks,
                          int nranks, const double *weights, hs_diag *d) {
  int rc = check_rank(c, rank, "all-reduce", d);
  if (rc) return rc;
  if (n < 1 || n > c->cfg.n || nranks < 1 || !buf)
    return hs_diag_set(d, HS_EINVAL, "nccl all-reduce %llu: %lld floats over %d ranks (buffers hold %lld)",
                       (unsigned long long)op, (long long)n, nranks, (long long)c->cfg.n);
  uint64_t mask = 0;
  int me = -1;
  for (int i = 0; i < nranks; i++) {
    if (ranks[i] < 0 || ranks[i] >= c->world)
      return hs_diag_set(d, HS_EINVAL, "nccl all-reduce %llu: rank %d is not below the world size %d",
                         (unsigned long long)op, ranks[i], c->world);
    mask |= 1ULL << ranks[i];
    if (ranks[i] == rank) me = i;
  }
  if (me < 0) return hs_diag_set(d, HS_EINVAL, "nccl all-reduce %llu: rank %d is not a participant", (unsigned long long)op, rank);
  float wt = weights ? (float)weights[me] : 1.0f;
  struct timespec dl;
  hs_deadline_in(&dl, c->cfg.timeout_s);
  pthread_mutex_lock(&c->gpu);
  ncclComm_t comm = NULL;
  rc = after_abort(c, "all-reduce", d);
  if (!rc) rc = after_owner(c, buf, d);
  if (!rc) rc = bind_gpu(c, "all-reduce", d);
  if (!rc) rc = sub_comm(c, mask, &comm, &dl, d);
  ncclRedOp_t rop;
  int have_op = 0;
  if (!rc) {
    /* The weight is a host scalar, read while the call (or its enqueueing) runs. */
    rc = enqueued(c, c->nccl->ncclRedOpCreatePreMulSum(&rop, &wt, ncclFloat32, ncclScalarHostImmediate, comm),
                  comm, &dl, "ncclRedOpCreatePreMulSum", d);
    have_op = !rc;
  }
  if (!rc)
    rc = enqueued(c, c->nccl->ncclAllReduce(buf, buf, (size_t)n, ncclFloat32, rop, comm, c->stream), comm, &dl,
                  "all-reduce", d);
  /* An operator may go once the last call given it has returned; on a non-blocking
   * communicator, once that call is enqueued (or failed). Not after an abort freed comm. */
  if (have_op && !c->comms_aborted) (void)c->nccl->ncclRedOpDestroy(rop, comm);
  if (!rc) rc = completed(c, comm, &dl, "all-reduce", d);
  pthread_mutex_unlock(&c->gpu);
  return rc;
}

/* Moves n floats between this rank's bounce vector and peer (send: host -> device -> peer;
 * recv: peer -> device -> host), bounded (gpu held). */
static int p2p(hs_real_comm *c, int send, int peer, float *host, int64_t n, const struct timespec *dl, hs_diag *d) {
  const char *what = send ? "send" : "recv";
  int rc = after_abort(c, what, d);
  if (!rc) rc = bind_gpu(c, what, d);
  if (rc) return rc;
  ncclComm_t comm = c->world_comm;
  /* The host-to-device copy is ordinary stream work ahead of the send: no NCCL state involved. */
  cudaError_t e = send ? cudaMemcpyAsync(c->bounce, host, (size_t)n * sizeof(float), cudaMemcpyHostToDevice, c->stream)
                       : cudaSuccess;
  if (e != cudaSuccess) return hs_diag_set(d, HS_ERUNTIME, "nccl send on rank %d: %s", c->rank, cudaGetErrorString(e));
  rc = enqueued(c, send ? c->nccl->ncclSend(c->bounce, (size_t)n, ncclFloat32, peer, comm, c->stream)
                        : c->nccl->ncclRecv(c->bounce, (size_t)n, ncclFloat32, peer, comm, c->stream),
                comm, dl, what, d);
  if (rc) return rc;
  rc = completed(c, comm, dl, what, d);
  if (rc || send) return rc;
  /* The copy to the host is queued only once the receive is done: a copy from the device to
   * pageable memory (the runtime's host buffers are malloc'd) may block the calling thread until
   * the stream reaches it (cuda_runtime_api.h, "Asynchronous": "For transfers between device
   * memory and pageable host memory, the function might be synchronous with respect to host"),
   * and a receive whose sender died would then hold this thread, with gpu held, beyond every
   * deadline, dead-peer check and abort. Queued after the receive's polled completion, the copy
   * waits for nothing but itself. */
  e = cudaMemcpyAsync(host, c->bounce, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost, c->stream);
  if (e != cudaSuccess) {
    rc = hs_diag_set(d, HS_ERUNTIME, "nccl recv on rank %d: %s", c->rank, cudaGetErrorString(e));
    abort_comms(c, d);
    return rc;
  }
  return completed(c, comm, dl, what, d);
}

static int rank_send(hs_real_comm *c, int rank, int peer, uint64_t tag, const float *buf, int64_t n, hs_diag *d) {
  int rc = check_rank(c, rank, "send", d);
  if (rc) return rc;
  if (peer < 0 || peer >= c->world || peer == rank || n < 1 || n > c->cfg.n)
    return hs_diag_set(d, HS_EINVAL, "nccl send from %d to %d of %lld floats: no such peer or too long", rank, peer,
                       (long long)n);
  struct timespec dl;
  hs_deadline_in(&dl, c->cfg.timeout_s);
  pthread_mutex_lock(&c->gpu);
  /* After an abort, the stored failure, before the peer is told of a transfer that will not
   * come (it would wait for it to the deadline, or to this rank's goodbye). */
  rc = after_abort(c, "send", d);
  nc_frame f = {.src = rank, .dst = peer, .kind = MSG_P2P, .tag = tag, .n = n};
  if (!rc && send_frame(c, route(c, peer), &f, NULL)) {
    pthread_mutex_lock(&c->mu);
    rc = stop_reason(c, "send", d);
    pthread_mutex_unlock(&c->mu);
    if (!rc) rc = hs_diag_set(d, HS_ERUNTIME, "nccl send on rank %d: the control channel to rank %d is closed", rank, peer);
  }
  if (!rc) rc = p2p(c, 1, peer, (float *)buf, n, &dl, d);
  pthread_mutex_unlock(&c->gpu);
  return rc;
}

static int rank_recv(hs_real_comm *c, int rank, int peer, uint64_t tag, float *buf, int64_t n, hs_diag *d) {
  int rc = check_rank(c, rank, "recv", d);
  if (rc) return rc;
  if (peer < 0 || peer >= c->world || peer == rank || n < 1 || n > c->cfg.n)
    return hs_diag_set(d, HS_EINVAL, "nccl recv on %d from %d of %lld floats: no such peer or too long", rank, peer,
                       (long long)n);
  struct timespec dl;
  hs_deadline_in(&dl, c->cfg.timeout_s);
  pthread_mutex_lock(&c->gpu);
  /* After an abort, the stored failure: not a wait for an announcement that may never come. */
  rc = after_abort(c, "recv", d);
  while (!rc) {
    /* A transfer that came in while another was wanted. */
    nc_msg *got = NULL;
    pthread_mutex_lock(&c->mu);
    for (nc_msg **p = &c->inbox; *p; p = &(*p)->next)
      if ((*p)->parked && (*p)->f.src == peer && (*p)->f.tag == tag) {
        got = *p;
        *p = got->next;
        break;
      }
    pthread_mutex_unlock(&c->mu);
    if (got) {
      if (got->f.n != n)
        rc = hs_diag_set(d, HS_ERUNTIME, "nccl recv on rank %d: %lld floats from rank %d, expected %lld", rank,
                         (long long)got->f.n, peer, (long long)n);
      else memcpy(buf, got->parked, (size_t)n * sizeof *buf);
      free(got->parked);
      free(got);
      break;
    }
    nc_msg *m = take_msg(c, MSG_P2P, peer, 0, &dl, "recv", d);
    if (!m) {
      rc = d->code ? d->code : HS_ERUNTIME;
      break;
    }
    if (m->f.n < 1 || m->f.n > c->cfg.n) {
      rc = hs_diag_set(d, HS_ERUNTIME, "nccl recv on rank %d: rank %d announced %lld floats", rank, peer, (long long)m->f.n);
      free(m);
      break;
    }
    if (m->f.tag == tag && m->f.n == n) {
      free(m);
      rc = p2p(c, 0, peer, buf, n, &dl, d);
      break;
    }
    /* Not the one wanted: receive it now (NCCL matches a pair's transfers in order), keep it. */
    m->parked = malloc((size_t)m->f.n * sizeof(float));
    if (!m->parked) {
      free(m);
      rc = hs_diag_set(d, HS_ENOMEM, "out of memory for a transfer of %lld floats", (long long)n);
      break;
    }
    if ((rc = p2p(c, 0, peer, m->parked, m->f.n, &dl, d))) {
      free(m->parked);
      free(m);
      break;
    }
    pthread_mutex_lock(&c->mu);
    m->next = c->inbox;
    c->inbox = m;
    pthread_mutex_unlock(&c->mu);
  }
  pthread_mutex_unlock(&c->gpu);
  return rc;
}

static int rank_barrier(hs_real_comm *c, int rank, hs_diag *d) {
  int rc = check_rank(c, rank, "barrier", d);
  if (rc) return rc;
  struct timespec dl;
  hs_deadline_in(&dl, c->cfg.timeout_s);
  pthread_mutex_lock(&c->gpu);
  rc = after_abort(c, "barrier", d);
  if (!rc) rc = bind_gpu(c, "barrier", d);
  ncclComm_t comm = c->world_comm;
  if (!rc)
    rc = enqueued(c, c->nccl->ncclAllReduce(c->one, c->one, 1, ncclFloat32, ncclSum, comm, c->stream), comm, &dl,
                  "barrier", d);
  if (!rc) rc = completed(c, comm, &dl, "barrier", d);
  pthread_mutex_unlock(&c->gpu);
  return rc;
}

static void rank_abort(hs_real_comm *c) {
  pthread_mutex_lock(&c->mu);
  c->aborted = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

int hs_real_nccl_rank(const hs_real_comm *c) { return c->rank; }

#else /* no NCCL in this build */

static int rank_open(hs_real_comm **out, const hs_real_comm_config *cfg, hs_diag *d) {
  (void)cfg;
  *out = NULL;
  return hs_diag_set(d, HS_EUNSUPPORTED, "--backend nccl: this build has no CUDA or no NCCL headers");
}
#define rank_close refuse_close
#define rank_allreduce refuse_allreduce
#define rank_send refuse_send
#define rank_recv refuse_recv
#define rank_barrier refuse_barrier
#define rank_abort refuse_abort
int hs_real_nccl_rank(const hs_real_comm *c) {
  (void)c;
  return -1;
}
int hs_real_nccl_check(const char *device, hs_diag *d) {
  (void)device;
  return hs_diag_set(d, HS_EUNSUPPORTED, "--backend nccl: this build has no CUDA or no NCCL headers");
}

#endif

const hs_real_comm_ops hs_real_comm_nccl_rank = {
    .version = HS_REAL_COMM_VERSION,
    .name = "nccl",
    .description = "one process per GPU over NCCL, this process's rank only (not run on a GPU yet)",
    .device_buffers = 1,
    .open = rank_open,
    .close = rank_close,
    .allreduce = rank_allreduce,
    .send = rank_send,
    .recv = rank_recv,
    .barrier = rank_barrier,
    .abort = rank_abort,
};
