/* TCP star and the cpu per-process comm backend: see real_rank_tcp.h. */
#define _GNU_SOURCE
#include "real/real_rank_tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/core_affinity.h"
#include "real/real_comm.h"

static int ms_until(double deadline) {
  double s = deadline - hs_real_mono();
  return s <= 0 ? 0 : s > 1e6 ? 1000000000 : (int)(s * 1000) + 1;
}

/* Waits until fd is ready for ev, the deadline or an abort: 0, -1, -2, -3 as hs_rank_read. */
static int wait_fd(int fd, short ev, double deadline, int abort_fd) {
  for (;;) {
    struct pollfd pf[2] = {{.fd = fd, .events = ev}, {.fd = abort_fd, .events = POLLIN}};
    int r = poll(pf, abort_fd >= 0 ? 2 : 1, ms_until(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (abort_fd >= 0 && (pf[1].revents & POLLIN)) return -3;
    if (r == 0) return -2;
    if (pf[0].revents & (ev | POLLHUP | POLLERR)) return 0;
  }
}

int hs_rank_write(int fd, const void *p, size_t n, double deadline, int abort_fd) {
  const char *b = p;
  while (n > 0) {
    int w = wait_fd(fd, POLLOUT, deadline, abort_fd);
    if (w) return w;
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

int hs_rank_read(int fd, void *p, size_t n, double deadline, int abort_fd) {
  char *b = p;
  while (n > 0) {
    int w = wait_fd(fd, POLLIN, deadline, abort_fd);
    if (w) return w;
    ssize_t k = recv(fd, b, n, MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

int hs_rank_cancelled(const int *cancel) { return cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED); }

int hs_rank_wait(int fd, short ev, double deadline, const int *cancel) {
  for (;;) {
    if (hs_rank_cancelled(cancel)) return -4;
    double until = cancel ? fmin(deadline, hs_real_mono() + 0.1) : deadline;
    int w = wait_fd(fd, ev, until, -1);
    if (w != -2 || hs_real_mono() >= deadline) return w;
  }
}

typedef struct hello {
  int32_t magic, rank, world, pad;
} hello;
/* "HSR2": the control channel's commands grew a compressor (2026-11-29); a rank of another
 * version is taken for not one of ours. */
#define HELLO_MAGIC 0x48535232

static int resolve(const char *addr, int port, struct addrinfo **out, hs_diag *d, const char *what) {
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
  int e = getaddrinfo(addr, ps, &hints, out);
  if (e) return hs_diag_set(d, HS_EINVAL, "%s: cannot resolve MASTER_ADDR \"%s\": %s", what, addr, gai_strerror(e));
  return 0;
}

static void nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void hs_rank_star_close(int *fds, int world) {
  for (int i = 0; i < world && i < HS_RANK_MAX_WORLD; i++)
    if (fds[i] >= 0) {
      close(fds[i]);
      fds[i] = -1;
    }
}

static int star_root(const char *what, const struct addrinfo *ai, int port, int world, double deadline,
                     const int *cancel, int *fds, hs_diag *d) {
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ls < 0) return hs_diag_set(d, HS_ERUNTIME, "%s: socket: %s", what, strerror(errno));
  int one = 1;
  (void)setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(ls, ai->ai_addr, ai->ai_addrlen) || listen(ls, world)) {
    int e = errno;
    close(ls);
    return hs_diag_set(d, HS_ERUNTIME, "%s: rank 0 cannot listen on port %d: %s (is another run using it? set MASTER_PORT)",
                       what, port, strerror(e));
  }
  int got = 0, rc = 0;
  while (got < world - 1) {
    int w = hs_rank_wait(ls, POLLIN, deadline, cancel);
    if (w == -4) {
      rc = hs_diag_set(d, HS_EINTR, "%s: cancelled while %d of the %d other ranks had connected (the run ended)",
                       what, got, world - 1);
      break;
    }
    if (w) {
      rc = hs_diag_set(d, HS_ERUNTIME, "%s: only %d of the %d other ranks connected to rank 0 in time", what, got,
                       world - 1);
      break;
    }
    int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    nodelay(fd);
    hello h;
    if (hs_rank_read(fd, &h, sizeof h, deadline, -1) || h.magic != HELLO_MAGIC) {
      close(fd); /* not one of ours, or too slow: keep waiting for the real ranks */
      continue;
    }
    if (h.world != world) {
      close(fd);
      rc = hs_diag_set(d, HS_EINVAL, "%s: world-size mismatch: rank %d was started with a world of %d, rank 0 with %d",
                       what, h.rank, h.world, world);
      break;
    }
    if (h.rank < 1 || h.rank >= world || fds[h.rank] >= 0) {
      close(fd);
      rc = hs_diag_set(d, HS_EINVAL, "%s: a second process says it is rank %d (world %d)", what, h.rank, world);
      break;
    }
    fds[h.rank] = fd;
    got++;
  }
  close(ls);
  if (!rc) {
    /* Tell everyone that the world is complete. */
    hello ok = {.magic = HELLO_MAGIC, .rank = 0, .world = world};
    for (int r = 1; r < world && !rc; r++)
      if (hs_rank_write(fds[r], &ok, sizeof ok, deadline, -1))
        rc = hs_diag_set(d, HS_ERUNTIME, "%s: rank %d went away during start-up", what, r);
  }
  return rc;
}

int hs_rank_connect(int fd, const struct sockaddr *addr, socklen_t len, double deadline) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK)) return -1;
  int r = connect(fd, addr, len) ? -1 : 0;
  if (r && errno == EINPROGRESS && !(r = wait_fd(fd, POLLOUT, deadline, -1))) {
    int err = 0;
    socklen_t el = sizeof err;
    r = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) || err ? -1 : 0;
  }
  if (!r && fcntl(fd, F_SETFL, fl)) r = -1;
  return r;
}

static int star_leaf(const char *what, const struct addrinfo *ai, const char *addr, int port, int rank, int world,
                     double deadline, const int *cancel, int *fds, hs_diag *d) {
  for (;;) {
    if (hs_rank_cancelled(cancel)) return hs_diag_set(d, HS_EINTR, "%s: rank %d: cancelled (the run ended)", what, rank);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return hs_diag_set(d, HS_ERUNTIME, "%s: socket: %s", what, strerror(errno));
    if (!hs_rank_connect(fd, ai->ai_addr, ai->ai_addrlen, deadline)) {
      nodelay(fd);
      hello h = {.magic = HELLO_MAGIC, .rank = rank, .world = world}, ok;
      int r = hs_rank_write(fd, &h, sizeof h, deadline, -1);
      /* Rank 0's answer comes once every rank has connected. */
      if (!r) r = hs_rank_wait(fd, POLLIN, deadline, cancel);
      if (r == -4) {
        close(fd);
        return hs_diag_set(d, HS_EINTR, "%s: rank %d: cancelled (the run ended)", what, rank);
      }
      if (!r) r = hs_rank_read(fd, &ok, sizeof ok, deadline, -1);
      if (r || ok.magic != HELLO_MAGIC) {
        close(fd);
        if (r == -2) /* connected (the kernel accepts for it) but rank 0 said nothing: stopped, or hangs */
          return hs_diag_set(d, HS_ERUNTIME, "%s: rank %d: rank 0 at %s:%d did not complete the world of %d in "
                             "time (its process stopped or hangs, or another rank never came?)", what, rank, addr,
                             port, world);
        return hs_diag_set(d, HS_ERUNTIME, "%s: rank %d: rank 0 at %s:%d refused the world of %d (see rank 0's message)",
                           what, rank, addr, port, world);
      }
      fds[0] = fd;
      return 0;
    }
    close(fd);
    if (hs_real_mono() >= deadline)
      return hs_diag_set(d, HS_ERUNTIME, "%s: rank %d could not reach rank 0 at %s:%d in time", what, rank, addr, port);
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000000};
    nanosleep(&ts, NULL);
  }
}

int hs_rank_star_open(const char *what, const char *addr, int port, int rank, int world, double timeout_s,
                      const int *cancel, int *fds, hs_diag *d) {
  for (int i = 0; i < HS_RANK_MAX_WORLD; i++) fds[i] = -1;
  if (world < 1 || world > HS_RANK_MAX_WORLD || rank < 0 || rank >= world)
    return hs_diag_set(d, HS_EINVAL, "%s: rank %d of a world of %d (at most %d ranks)", what, rank, world,
                       HS_RANK_MAX_WORLD);
  if (world == 1) return 0;
  struct addrinfo *ai = NULL;
  int rc = resolve(addr, port, &ai, d, what);
  if (rc) return rc;
  double deadline = hs_real_mono() + hs_real_timeout(timeout_s);
  rc = rank == 0 ? star_root(what, ai, port, world, deadline, cancel, fds, d)
                 : star_leaf(what, ai, addr, port, rank, world, deadline, cancel, fds, d);
  freeaddrinfo(ai);
  if (rc) hs_rank_star_close(fds, world);
  return rc;
}

/* --- the cpu per-process comm ----------------------------------------------------------- */

struct hs_real_comm {
  int rank, world;
  int64_t n;
  double timeout_s;
  int fds[HS_RANK_MAX_WORLD];
  int abort_pipe[2];
  float *tmp; /* n floats: a participant's buffer at the root */
};

/* One frame ahead of every payload. */
typedef struct tframe {
  uint64_t id; /* all-reduce op, or p2p tag */
  int64_t n;
  int32_t kind, src;
} tframe;
enum { TF_REDUCE = 1, TF_SUM = 2, TF_P2P = 3, TF_BARRIER = 4 };

static int io_fail(hs_real_comm *c, int w, const char *what, int peer, hs_diag *d) {
  if (w == -3) return hs_diag_set(d, HS_EINTR, "cpu %s on rank %d: aborted", what, c->rank);
  if (w == -2)
    return hs_diag_set(d, HS_ERUNTIME, "cpu %s on rank %d: rank %d did not answer within %g s", what, c->rank, peer,
                       c->timeout_s);
  return hs_diag_set(d, HS_ERUNTIME, "cpu %s on rank %d: rank %d closed its connection (its process died?)", what,
                     c->rank, peer);
}

/* Moves one frame (and with buf, n floats after it) to or from peer. */
static int xfer(hs_real_comm *c, int out, int peer, tframe *f, float *buf, int64_t n, double dl, const char *what,
                hs_diag *d) {
  int fd = c->fds[c->rank == 0 ? peer : 0];
  int w = !f ? 0 : out ? hs_rank_write(fd, f, sizeof *f, dl, c->abort_pipe[0]) : hs_rank_read(fd, f, sizeof *f, dl, c->abort_pipe[0]);
  if (!w && buf && n > 0)
    w = out ? hs_rank_write(fd, buf, (size_t)n * sizeof *buf, dl, c->abort_pipe[0])
            : hs_rank_read(fd, buf, (size_t)n * sizeof *buf, dl, c->abort_pipe[0]);
  return w ? io_fail(c, w, what, peer, d) : 0;
}

static void tcp_close(hs_real_comm *c) {
  if (!c) return;
  hs_rank_star_close(c->fds, c->world);
  if (c->abort_pipe[0] >= 0) close(c->abort_pipe[0]);
  if (c->abort_pipe[1] >= 0) close(c->abort_pipe[1]);
  free(c->tmp);
  free(c);
}

static int tcp_open(hs_real_comm **out, const hs_real_comm_config *cfg, hs_diag *d) {
  *out = NULL;
  hs_real_launch l;
  int rc = hs_real_launch_read(&l, cfg->world, d);
  if (rc) return rc;
  if (!strcmp(l.source, "none"))
    return hs_diag_set(d, HS_EINVAL, "multi-process cpu backend: start one process per rank with mpirun, or set RANK, "
                       "WORLD_SIZE, MASTER_ADDR and MASTER_PORT as torchrun does");
  if (cfg->n < 1) return hs_diag_set(d, HS_EINVAL, "cpu comm: buffers of %lld floats", (long long)cfg->n);
  hs_real_comm *c = calloc(1, sizeof *c);
  if (!c) return hs_diag_set(d, HS_ENOMEM, "out of memory for the cpu comm");
  c->rank = l.rank;
  c->world = l.world;
  c->n = cfg->n;
  c->timeout_s = hs_real_timeout(cfg->timeout_s);
  c->abort_pipe[0] = c->abort_pipe[1] = -1;
  for (int i = 0; i < HS_RANK_MAX_WORLD; i++) c->fds[i] = -1;
  if (pipe2(c->abort_pipe, O_CLOEXEC | O_NONBLOCK)) {
    tcp_close(c);
    return hs_diag_set(d, HS_ERUNTIME, "cpu comm: pipe: %s", strerror(errno));
  }
  if (c->rank == 0 && !(c->tmp = malloc((size_t)cfg->n * sizeof *c->tmp))) {
    tcp_close(c);
    return hs_diag_set(d, HS_ENOMEM, "out of memory for the cpu comm's buffer of %lld floats", (long long)cfg->n);
  }
  if (c->tmp) hs_touch_pages(c->tmp, (size_t)cfg->n * sizeof *c->tmp);
  if ((rc = hs_rank_star_open("cpu comm", l.master_addr, l.master_port, c->rank, c->world, c->timeout_s, cfg->cancel,
                              c->fds, d))) {
    tcp_close(c);
    return rc;
  }
  *out = c;
  return 0;
}

static int check_rank(const hs_real_comm *c, int rank, const char *what, hs_diag *d) {
  if (rank == c->rank) return 0;
  return hs_diag_set(d, HS_EINVAL, "cpu %s: called for rank %d in the process of rank %d (one rank per process)", what,
                     rank, c->rank);
}

static int tcp_allreduce(hs_real_comm *c, uint64_t op, int rank, float *buf, int64_t n, const int *ranks, int nranks,
                         const double *weights, hs_diag *d) {
  int rc = check_rank(c, rank, "all-reduce", d);
  if (rc) return rc;
  if (n < 1 || n > c->n || nranks < 1 || !buf)
    return hs_diag_set(d, HS_EINVAL, "cpu all-reduce %llu: %lld floats over %d ranks (buffers hold %lld)",
                       (unsigned long long)op, (long long)n, nranks, (long long)c->n);
  int me = -1, root = -1;
  for (int i = 0; i < nranks; i++) {
    if (ranks[i] < 0 || ranks[i] >= c->world)
      return hs_diag_set(d, HS_EINVAL, "cpu all-reduce %llu: rank %d is not below the world size %d",
                         (unsigned long long)op, ranks[i], c->world);
    if (ranks[i] == rank) me = i;
    if (ranks[i] == 0) root = i;
  }
  if (me < 0) return hs_diag_set(d, HS_EINVAL, "cpu all-reduce %llu: rank %d is not a participant", (unsigned long long)op, rank);
  if (root < 0)
    return hs_diag_set(d, HS_EUNSUPPORTED, "cpu all-reduce %llu: an all-reduce without rank 0 is not supported yet by "
                       "the multi-process cpu backend", (unsigned long long)op);
  double dl = hs_real_mono() + c->timeout_s;
  if (rank != 0) {
    tframe f = {.id = op, .n = n, .kind = TF_REDUCE, .src = rank};
    if ((rc = xfer(c, 1, 0, &f, buf, n, dl, "all-reduce", d))) return rc;
    tframe g;
    if ((rc = xfer(c, 0, 0, &g, NULL, 0, dl, "all-reduce", d))) return rc;
    if (g.kind != TF_SUM || g.id != op || g.n != n)
      return hs_diag_set(d, HS_ERUNTIME, "cpu all-reduce %llu on rank %d: rank 0 answered operation %llu of %lld floats",
                         (unsigned long long)op, rank, (unsigned long long)g.id, (long long)g.n);
    return xfer(c, 0, 0, NULL, buf, n, dl, "all-reduce", d);
  }
  float w0 = weights ? (float)weights[me] : 1.0f;
  for (int64_t i = 0; i < n; i++) buf[i] *= w0;
  for (int k = 0; k < nranks; k++) {
    int r = ranks[k];
    if (r == 0) continue;
    tframe f;
    if ((rc = xfer(c, 0, r, &f, NULL, 0, dl, "all-reduce", d))) return rc;
    if (f.kind != TF_REDUCE || f.id != op || f.n != n)
      return hs_diag_set(d, HS_ERUNTIME, "cpu all-reduce %llu on rank 0: rank %d sent operation %llu of %lld floats",
                         (unsigned long long)op, r, (unsigned long long)f.id, (long long)f.n);
    if ((rc = xfer(c, 0, r, NULL, c->tmp, n, dl, "all-reduce", d))) return rc;
    float wr = weights ? (float)weights[k] : 1.0f;
    for (int64_t i = 0; i < n; i++) buf[i] += wr * c->tmp[i];
  }
  for (int k = 0; k < nranks; k++) {
    int r = ranks[k];
    if (r == 0) continue;
    tframe g = {.id = op, .n = n, .kind = TF_SUM, .src = 0};
    if ((rc = xfer(c, 1, r, &g, buf, n, dl, "all-reduce", d))) return rc;
  }
  return 0;
}

static int p2p_check(hs_real_comm *c, int rank, int peer, int64_t n, const char *what, hs_diag *d) {
  int rc = check_rank(c, rank, what, d);
  if (rc) return rc;
  if (peer < 0 || peer >= c->world || peer == rank || n < 1 || n > c->n)
    return hs_diag_set(d, HS_EINVAL, "cpu %s between %d and %d of %lld floats: no such peer or too long", what, rank,
                       peer, (long long)n);
  if (rank != 0 && peer != 0)
    return hs_diag_set(d, HS_EUNSUPPORTED, "cpu %s between ranks %d and %d: only transfers to and from rank 0 are "
                       "supported yet by the multi-process cpu backend", what, rank, peer);
  return 0;
}

static int tcp_send(hs_real_comm *c, int rank, int peer, uint64_t tag, const float *buf, int64_t n, hs_diag *d) {
  int rc = p2p_check(c, rank, peer, n, "send", d);
  if (rc) return rc;
  tframe f = {.id = tag, .n = n, .kind = TF_P2P, .src = rank};
  return xfer(c, 1, peer, &f, (float *)buf, n, hs_real_mono() + c->timeout_s, "send", d);
}

static int tcp_recv(hs_real_comm *c, int rank, int peer, uint64_t tag, float *buf, int64_t n, hs_diag *d) {
  int rc = p2p_check(c, rank, peer, n, "recv", d);
  if (rc) return rc;
  double dl = hs_real_mono() + c->timeout_s;
  tframe f;
  if ((rc = xfer(c, 0, peer, &f, NULL, 0, dl, "recv", d))) return rc;
  if (f.kind != TF_P2P || f.id != tag || f.n != n)
    return hs_diag_set(d, HS_ERUNTIME, "cpu recv on rank %d: rank %d sent tag %llu of %lld floats, expected tag %llu of %lld",
                       rank, peer, (unsigned long long)f.id, (long long)f.n, (unsigned long long)tag, (long long)n);
  return xfer(c, 0, peer, NULL, buf, n, dl, "recv", d);
}

static int tcp_barrier(hs_real_comm *c, int rank, hs_diag *d) {
  int rc = check_rank(c, rank, "barrier", d);
  if (rc) return rc;
  double dl = hs_real_mono() + c->timeout_s;
  tframe f = {.kind = TF_BARRIER, .src = rank};
  if (rank != 0) {
    if ((rc = xfer(c, 1, 0, &f, NULL, 0, dl, "barrier", d))) return rc;
    return xfer(c, 0, 0, &f, NULL, 0, dl, "barrier", d);
  }
  for (int r = 1; r < c->world && !rc; r++) rc = xfer(c, 0, r, &f, NULL, 0, dl, "barrier", d);
  for (int r = 1; r < c->world && !rc; r++) rc = xfer(c, 1, r, &f, NULL, 0, dl, "barrier", d);
  return rc;
}

static void tcp_abort(hs_real_comm *c) {
  char b = 1;
  if (c->abort_pipe[1] >= 0) (void)!write(c->abort_pipe[1], &b, 1);
}

const hs_real_comm_ops hs_real_comm_tcp_rank = {
    .version = HS_REAL_COMM_VERSION,
    .name = "cpu",
    .description = "one process per rank on the cpu, host buffers over TCP (reduction at rank 0)",
    .device_buffers = 0,
    .open = tcp_open,
    .close = tcp_close,
    .allreduce = tcp_allreduce,
    .send = tcp_send,
    .recv = tcp_recv,
    .barrier = tcp_barrier,
    .abort = tcp_abort,
};
