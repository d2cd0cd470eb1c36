/* The cpu communication backend: workers are threads of one process and every buffer is host
 * memory (see real_comm.h for the contract).
 *
 * All-reduce: a rendezvous slot per operation id where each participant leaves its buffer and
 * weight. Once all have arrived, the participants run the two kernels that `hetsim calib`
 * times for this backend (calib/cal_comm.h), concurrently and without the lock: each sums its
 * own 1/N chunk over every buffer (in participant order, so the result does not depend on the
 * order of arrival), then, after all have, copies the other chunks from their owners; nobody
 * leaves before all have copied, and the last to leave frees the slot. Up to
 * HS_CAL_SERIAL_RANKS participants, the last to arrive runs both kernels for all alone (the
 * same sums) while the others sleep until it is done: one wake-up each instead of three.
 * Point-to-point: a mailbox of copied messages matched by (source, destination, tag), so a
 * send never waits. A received message's buffer is kept for a later send instead of freed,
 * and `world` buffers of the largest size (one model each) are allocated and mapped at open
 * (hs_touch_pages): a send that got fresh memory from malloc would pay the kernel's page
 * faults inside the timed operation, 0.3 ms for 0.8 MB here, and glibc returns large blocks
 * to the kernel when they are freed. Every wait for a partner is a condition wait on
 * CLOCK_MONOTONIC bounded by the timeout, and abort wakes them all; the waits between the all-reduce's kernels, once
 * every participant has arrived, wait only for the others' bounded loops and ignore abort (a
 * participant must not leave while another still reads its buffer). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib/cal_comm.h"
#include "core/core_affinity.h"
#include "core/core_deadline.h"
#include "real/real_comm.h"

typedef struct cpu_slot {
  uint64_t op;
  int nranks, arrived, reduced, copied, departed;
  int64_t n;
  float **bufs;              /* the participants' buffers, by index in `ranks` */
  double *wts;
  struct cpu_slot *next;
} cpu_slot;

typedef struct cpu_msg {
  int src, dst;
  uint64_t tag;
  int64_t n, cap; /* floats sent, floats data holds */
  float *data;
  struct cpu_msg *next;
} cpu_msg;

struct hs_real_comm {
  hs_real_comm_config cfg;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int aborted;
  cpu_slot *slots;
  cpu_msg *msgs;
  cpu_msg *spare; /* buffers of received messages, for the next sends */
  int bar_count;
  uint64_t bar_gen;
};

/* Waits on the backend's condition until the deadline; called with mu held. Returns 0 when
 * woken, HS_EINTR after abort, HS_ERUNTIME at the deadline (the caller names what it missed). */
static int wait_until(hs_real_comm *c, const struct timespec *dl) {
  if (c->aborted) return HS_EINTR;
  int e = pthread_cond_timedwait(&c->cv, &c->mu, dl);
  if (c->aborted) return HS_EINTR;
  return e == ETIMEDOUT ? HS_ERUNTIME : 0;
}

/* A message buffer of at least n floats, mapped (NULL when out of memory). */
static cpu_msg *msg_new(int64_t n) {
  cpu_msg *m = calloc(1, sizeof *m);
  if (m) m->data = malloc((size_t)n * sizeof *m->data);
  if (!m || !m->data) {
    free(m);
    return NULL;
  }
  m->cap = n;
  hs_touch_pages(m->data, (size_t)n * sizeof *m->data);
  return m;
}

static void msg_list_free(cpu_msg *m) {
  while (m) {
    cpu_msg *next = m->next;
    free(m->data);
    free(m);
    m = next;
  }
}

static void cpu_close(hs_real_comm *c);

static int cpu_open(hs_real_comm **out, const hs_real_comm_config *cfg, hs_diag *d) {
  *out = NULL;
  if (cfg->world < 1 || cfg->n < 1) return hs_diag_set(d, HS_EINVAL, "cpu comm: world %d, %lld floats", cfg->world, (long long)cfg->n);
  hs_real_comm *c = calloc(1, sizeof *c);
  if (!c) return hs_diag_set(d, HS_ENOMEM, "out of memory for the cpu comm backend");
  c->cfg = *cfg;
  c->cfg.device = NULL;
  c->cfg.timeout_s = hs_real_timeout(c->cfg.timeout_s);
  pthread_mutex_init(&c->mu, NULL);
  hs_cond_init_monotonic(&c->cv);
  for (int i = 0; i < cfg->world; i++) {
    cpu_msg *m = msg_new(cfg->n);
    if (!m) {
      cpu_close(c);
      return hs_diag_set(d, HS_ENOMEM, "out of memory for the cpu comm backend's %d message buffers of %lld floats",
                         cfg->world, (long long)cfg->n);
    }
    m->next = c->spare;
    c->spare = m;
  }
  *out = c;
  return 0;
}

static void cpu_close(hs_real_comm *c) {
  if (!c) return;
  while (c->slots) {
    cpu_slot *s = c->slots;
    c->slots = s->next;
    free(s->bufs);
    free(s->wts);
    free(s);
  }
  msg_list_free(c->msgs);
  msg_list_free(c->spare);
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static void unlink_slot(hs_real_comm *c, cpu_slot *s) {
  for (cpu_slot **p = &c->slots; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  free(s->bufs);
  free(s->wts);
  free(s);
}

/* Waits (mu held) until *count reaches target. Once every participant has arrived the others
 * only run the bounded loops below, so this wait needs no deadline and ignores abort: a
 * participant must not leave while the others still read its buffer. */
static void wait_count(hs_real_comm *c, const int *count, int target) {
  while (*count < target) pthread_cond_wait(&c->cv, &c->mu);
}

static void bump(hs_real_comm *c, int *count, int target) {
  if (++*count == target) pthread_cond_broadcast(&c->cv);
}

static int cpu_allreduce(hs_real_comm *c, uint64_t op, int rank, float *buf, int64_t n,
                         const int *ranks, int nranks, const double *weights, hs_diag *d) {
  if (n < 1 || n > c->cfg.n || nranks < 1)
    return hs_diag_set(d, HS_EINVAL, "cpu all-reduce %llu: %lld floats over %d ranks (buffers hold %lld)",
                       (unsigned long long)op, (long long)n, nranks, (long long)c->cfg.n);
  int me = -1;
  for (int i = 0; i < nranks; i++)
    if (ranks[i] == rank) me = i;
  if (me < 0) return hs_diag_set(d, HS_EINVAL, "cpu all-reduce %llu: rank %d is not a participant", (unsigned long long)op, rank);
  struct timespec dl;
  hs_deadline_in(&dl, c->cfg.timeout_s);
  pthread_mutex_lock(&c->mu);
  cpu_slot *s = c->slots;
  while (s && s->op != op) s = s->next;
  if (!s) {
    s = calloc(1, sizeof *s);
    if (s) {
      s->bufs = calloc((size_t)nranks, sizeof *s->bufs);
      s->wts = calloc((size_t)nranks, sizeof *s->wts);
    }
    if (!s || !s->bufs || !s->wts) {
      if (s) free(s->bufs), free(s->wts), free(s);
      pthread_mutex_unlock(&c->mu);
      return hs_diag_set(d, HS_ENOMEM, "out of memory for an all-reduce over %d ranks", nranks);
    }
    s->op = op;
    s->nranks = nranks;
    s->n = n;
    s->next = c->slots;
    c->slots = s;
  }
  if (s->n != n || s->nranks != nranks || s->bufs[me]) {
    pthread_mutex_unlock(&c->mu);
    return hs_diag_set(d, HS_EINVAL, "cpu all-reduce %llu: rank %d disagrees with the others on the size or joined twice",
                       (unsigned long long)op, rank);
  }
  s->bufs[me] = buf;
  s->wts[me] = weights ? weights[me] : 1.0;
  bump(c, &s->arrived, nranks);
  int last = s->arrived == nranks, rc = 0;
  while (s->arrived < nranks && !rc) rc = wait_until(c, &dl);
  if (s->arrived < nranks) {
    /* Gave up before everyone came: withdraw the buffer; nobody has read it. */
    int arrived = s->arrived;
    s->bufs[me] = NULL;
    if (--s->arrived == 0) unlink_slot(c, s);
    pthread_mutex_unlock(&c->mu);
    if (rc == HS_EINTR) return hs_diag_set(d, rc, "cpu all-reduce %llu: aborted", (unsigned long long)op);
    return hs_diag_set(d, HS_ERUNTIME, "cpu all-reduce %llu: rank %d waited %.3g s and only %d of %d participants arrived",
                       (unsigned long long)op, rank, c->cfg.timeout_s, arrived, nranks);
  }
  if (nranks <= HS_CAL_SERIAL_RANKS) {
    /* Few participants: the last to arrive runs both kernels for all while the others wait
     * (cal_comm.h says why). */
    if (last) {
      pthread_mutex_unlock(&c->mu);
      hs_cal_reduce_all(s->bufs, s->wts, nranks, n);
      pthread_mutex_lock(&c->mu);
      s->copied = nranks;
      pthread_cond_broadcast(&c->cv);
    }
    wait_count(c, &s->copied, nranks);
    if (++s->departed == nranks) unlink_slot(c, s);
    pthread_mutex_unlock(&c->mu);
    return 0;
  }
  pthread_mutex_unlock(&c->mu);
  /* Reduce-scatter: participant `me` owns chunk `me` and sums it over every buffer, in
   * participant order (so the result does not depend on the order of arrival). */
  hs_cal_reduce_chunk(s->bufs, s->wts, nranks, me, n);
  pthread_mutex_lock(&c->mu);
  bump(c, &s->reduced, nranks);
  wait_count(c, &s->reduced, nranks);
  pthread_mutex_unlock(&c->mu);
  /* All-gather: copy the other participants' reduced chunks. */
  hs_cal_gather_chunks(s->bufs, nranks, me, n);
  pthread_mutex_lock(&c->mu);
  bump(c, &s->copied, nranks);
  wait_count(c, &s->copied, nranks);
  if (++s->departed == nranks) unlink_slot(c, s);
  pthread_mutex_unlock(&c->mu);
  return 0;
}

static int cpu_send(hs_real_comm *c, int rank, int peer, uint64_t tag, const float *buf, int64_t n,
                    hs_diag *d) {
  if (peer < 0 || peer >= c->cfg.world || n < 1)
    return hs_diag_set(d, HS_EINVAL, "cpu send from %d to %d of %lld floats: no such peer", rank, peer, (long long)n);
  /* A spare buffer that holds n floats, else a new one of at least the largest size. */
  pthread_mutex_lock(&c->mu);
  cpu_msg **p = &c->spare;
  while (*p && (*p)->cap < n) p = &(*p)->next;
  cpu_msg *m = *p;
  if (m) *p = m->next;
  pthread_mutex_unlock(&c->mu);
  if (!m && !(m = msg_new(n > c->cfg.n ? n : c->cfg.n)))
    return hs_diag_set(d, HS_ENOMEM, "out of memory for a message of %lld floats", (long long)n);
  memcpy(m->data, buf, (size_t)n * sizeof *buf);
  m->src = rank;
  m->dst = peer;
  m->tag = tag;
  m->n = n;
  m->next = NULL;
  pthread_mutex_lock(&c->mu);
  int aborted = c->aborted;
  /* Appended at the tail, so messages between one pair arrive in the order sent. */
  cpu_msg **q = aborted ? &c->spare : &c->msgs;
  while (*q) q = &(*q)->next;
  *q = m;
  if (!aborted) pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  if (aborted) return hs_diag_set(d, HS_EINTR, "cpu send from %d to %d: aborted", rank, peer);
  return 0;
}

static int cpu_recv(hs_real_comm *c, int rank, int peer, uint64_t tag, float *buf, int64_t n,
                    hs_diag *d) {
  struct timespec dl;
  hs_deadline_in(&dl, c->cfg.timeout_s);
  pthread_mutex_lock(&c->mu);
  cpu_msg *m = NULL;
  int rc = 0;
  for (;;) {
    cpu_msg **p = &c->msgs;
    while (*p && !((*p)->src == peer && (*p)->dst == rank && (*p)->tag == tag)) p = &(*p)->next;
    if (*p) {
      m = *p;
      *p = m->next;
      break;
    }
    if ((rc = wait_until(c, &dl))) break;
  }
  pthread_mutex_unlock(&c->mu);
  if (!m) {
    if (rc == HS_EINTR) return hs_diag_set(d, rc, "cpu recv on %d from %d: aborted", rank, peer);
    return hs_diag_set(d, HS_ERUNTIME, "cpu recv on rank %d: nothing from rank %d (tag %llu) within %.3g s",
                       rank, peer, (unsigned long long)tag, c->cfg.timeout_s);
  }
  if (m->n != n) rc = hs_diag_set(d, HS_ERUNTIME, "cpu recv on rank %d: %lld floats from rank %d, expected %lld",
                                  rank, (long long)m->n, peer, (long long)n);
  else memcpy(buf, m->data, (size_t)n * sizeof *buf);
  pthread_mutex_lock(&c->mu);
  m->next = c->spare;
  c->spare = m;
  pthread_mutex_unlock(&c->mu);
  return rc;
}

static int cpu_barrier(hs_real_comm *c, int rank, hs_diag *d) {
  struct timespec dl;
  hs_deadline_in(&dl, c->cfg.timeout_s);
  pthread_mutex_lock(&c->mu);
  uint64_t gen = c->bar_gen;
  int rc = 0;
  if (++c->bar_count == c->cfg.world) {
    c->bar_count = 0;
    c->bar_gen++;
    pthread_cond_broadcast(&c->cv);
  }
  while (gen == c->bar_gen && !rc) rc = wait_until(c, &dl);
  int arrived = c->bar_count;
  pthread_mutex_unlock(&c->mu);
  if (rc == HS_EINTR) return hs_diag_set(d, rc, "cpu barrier on rank %d: aborted", rank);
  if (rc) return hs_diag_set(d, rc, "cpu barrier on rank %d: %d of %d ranks arrived within %.3g s",
                             rank, arrived, c->cfg.world, c->cfg.timeout_s);
  return 0;
}

static void cpu_abort(hs_real_comm *c) {
  pthread_mutex_lock(&c->mu);
  c->aborted = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

const hs_real_comm_ops hs_real_comm_cpu = {
    .version = HS_REAL_COMM_VERSION,
    .name = "cpu",
    .description = "workers are threads on the nn cpu backend; reductions in host memory",
    .device_buffers = 0,
    .open = cpu_open,
    .close = cpu_close,
    .allreduce = cpu_allreduce,
    .send = cpu_send,
    .recv = cpu_recv,
    .barrier = cpu_barrier,
    .abort = cpu_abort,
    /* Three on an all-reduce's critical path: the worker thread that finished its compute
     * first is woken to join the all-reduce, the participant that arrived first is woken once
     * the last has reduced for both (cpu_allreduce above), and the thread that did not deliver
     * the result is woken for its next step. One on a server message: the server's lane
     * woken for a push, or the worker woken by the reply to its pull. */
    .handoffs_per_allreduce = 3,
    .handoffs_per_message = 1,
};

static const hs_real_comm_ops *const backends[] = {&hs_real_comm_cpu, &hs_real_comm_local,
                                                   &hs_real_comm_nccl, NULL};

const hs_real_comm_ops *hs_real_comm_find(const char *name, hs_diag *d) {
  for (int i = 0; backends[i]; i++)
    if (!strcmp(backends[i]->name, name)) return backends[i];
  hs_diag_set(d, HS_EINVAL, "--backend: unknown backend \"%s\"; valid: cpu, local, nccl", name);
  return NULL;
}
