/* fake_nccl: an emulated NCCL 2 for deviceless tests, built as libnccl.so.2 so that hetsim's
 * loader (nn/nn_cudalib.c) opens it through HETSIM_NCCL_PATH. It works across processes (one
 * rank per process, as real/real_nccl.c runs) on top of the emulated CUDA runtime of the process
 * that loads it (fake_cudart.c, whose symbols the test executable exports; gpu_emu.h).
 *
 * What it follows, adversarially, from nccl.h and NCCL's documentation:
 * - Non-blocking communicators (config.blocking = 0): ncclCommInitRankConfig returns
 *   ncclInProgress and the communicator becomes ready later, once every rank has joined; every
 *   operation (ncclAllReduce, ncclSend, ncclRecv, ncclCommFinalize) returns ncclInProgress and a
 *   thread of the communicator enqueues its kernel on the user's stream 1-4 ms LATER, after which
 *   the state (ncclCommGetAsyncError) turns ncclSuccess. "If any NCCL function returns
 *   ncclInProgress, users must query the communicator state until it becomes ncclSuccess before
 *   calling another NCCL function. Before the state becomes ncclSuccess, do not issue CUDA
 *   kernels on streams used by NCCL": both are checked (the stream is held in the runtime,
 *   hs_emu_stream_hold), and a breach is a VIOLATION (message on stderr, abort()).
 * - Kernels: an all-reduce kernel waits on the device until every rank's kernel has arrived, then
 *   writes sum_r scalar_r * in_r (ncclSum: scalar 1; ncclRedOpCreatePreMulSum: each rank's own
 *   scalar, read at creation for ncclScalarHostImmediate, as documented). Send and receive are
 *   blocking for the GPU: a send's kernel ends only once the peer's receive has taken the data;
 *   transfers of an ordered pair match in order, and counts must agree. A kernel whose peers
 *   never come waits for ever on a GPU: here it waits until its communicator is aborted, or the
 *   emulation's bound (hs_emu_bound_s), which is a violation.
 * - ncclCommAbort stops the communicator's kernels (their outputs become NaN: nothing can be
 *   assumed after an abort) and frees it; ncclCommDestroy frees it and, per nccl.h, is
 *   non-blocking only after ncclCommFinalize's state reached ncclSuccess ("then, calling
 *   ncclCommDestroy can locally free the rest of the resources ... without blocking"), so a
 *   destroy without that is a violation (a wait with no bound). A freed communicator keeps its
 *   memory with a poisoned magic: any later call passing it is reported as a use after free.
 * - An operator given to an operation must live until that operation is enqueued: it is read by
 *   the thread that enqueues, after ncclInProgress was returned.
 * - Two ranks of one communicator on the same GPU are refused at set-up ("Duplicate GPU
 *   detected"), as NCCL 2.28 does; a rank's GPU is the device current when it was created, and
 *   an operation's stream and buffers must be of that device.
 * Peers do not learn of each other's abort or death: as with NCCL, noticing a dead peer is the
 * caller's business.
 *
 * Cross-process state: a file per communicator under $HS_EMU_DIR (default /tmp), named in the
 * ncclUniqueId, created and initialised by ncclGetUniqueId and mapped by every rank; it holds a
 * process-shared robust mutex and condition variable, the ranks that joined, finalized or
 * aborted, NSLOT collective slots and one mailbox per ordered pair of ranks. Limits of the
 * emulation: ncclFloat32 only, at most EMU_MAX_RANKS ranks and EMU_MAX_COUNT elements per
 * operation (larger ones answer ncclInvalidArgument), reductions ncclSum and PreMulSum only; in a
 * group (ncclGroupStart/End) operations are enqueued one after the other, not fused.
 *
 * Fault injection: with HS_EMU_NCCL_STALL_SEND set in a process, its send kernels never deliver
 * (a wedged link) and end only when their communicator is aborted; with HS_EMU_NCCL_INIT_FAIL,
 * its ncclCommInitRankConfig fails at once (ncclSystemError, no communicator). */
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/gpu_emu/gpu_emu.h"

#define EMU_VERSION 22803 /* HS_EMU_NCCL_VERSION replaces it (NCCL's numbering: 23007 is 2.30.7) */
#define EMU_MAX_RANKS 4
#define EMU_MAX_COUNT (1 << 18) /* floats per rank and operation (mlp has 203,530 parameters) */
#define NSLOT 4                  /* collectives in flight per communicator */
#define MAX_OPS 64               /* live PreMulSum operators per communicator */
#define MAX_GROUP 256            /* operations in one group */

enum { SEG_MAGIC = 0x4e43434cu, COMM_LIVE = 0x434f4d4du, COMM_DEAD = 0xdeadc0deu };

typedef struct coll_slot {
  uint64_t seq; /* the collective this slot serves (seq % NSLOT is the slot's index) */
  uint32_t arrived, read;
  int64_t count;
  float data[EMU_MAX_RANKS][EMU_MAX_COUNT];
} coll_slot;

typedef struct p2p_box {
  uint64_t sent, taken; /* messages deposited and taken, in order */
  int64_t count;
  float data[EMU_MAX_COUNT];
} p2p_box;

typedef struct seg {
  uint32_t magic;
  int nranks; /* set by the first rank to join */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint32_t joined, finalized, dead, left; /* rank masks; dead: aborted */
  int device[EMU_MAX_RANKS];
  coll_slot coll[NSLOT];
  p2p_box box[EMU_MAX_RANKS][EMU_MAX_RANKS]; /* [from][to] */
} seg;

/* A rank's view of its communicator, shared by the handle and the kernels still on streams. */
typedef struct core {
  seg *s;
  char path[NCCL_UNIQUE_ID_BYTES];
  int rank, nranks, device;
  int aborted;  /* atomic */
  int refs;     /* atomic */
  int inflight; /* atomic: kernels enqueued and not finished */
} core;

enum { K_COLL = 0, K_SEND = 1, K_RECV = 2 };

typedef struct kernel {
  int kind;
  core *k;
  uint64_t seq; /* K_COLL: the collective; K_SEND/K_RECV: the message of the pair */
  int peer;
  const float *in;
  float *out;
  int64_t count;
  float scalar;
  const float *dev_scalar; /* ncclScalarDevice: read when the kernel runs */
} kernel;

enum { JOB_JOIN = 0, JOB_OP = 1, JOB_FINALIZE = 2 };

typedef struct job {
  int kind;
  kernel *kn;
  cudaStream_t stream;
  int redop; /* index of the PreMulSum operator to read at enqueue time, or -1 */
  const char *what;
  struct job *next;
} job;

struct ncclComm {
  unsigned magic;
  struct ncclComm *next_all;
  const char *freed_by; /* "ncclCommAbort" or "ncclCommDestroy" */
  int blocking;
  core *k;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  ncclResult_t state;
  int finalize; /* 0 not asked, 1 asked, 2 done */
  int stop;
  job *jobs, *jobs_tail;
  pthread_t proxy;
  int proxy_started;
  uint64_t coll_seq, send_seq[EMU_MAX_RANKS], recv_seq[EMU_MAX_RANKS];
  struct {
    int live;
    float scalar;
    const float *dev_scalar;
  } ops[MAX_OPS];
};

/* Process-wide: every handle ever made (freed ones poisoned, never unmapped), the last error. */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm *all_comms;
static char last_error[512];
static unsigned long id_counter;

/* The version this emulation reports, and whether ranks may share a GPU (NCCL 2.30's
 * NCCL_MULTI_RANK_GPU_ENABLE; earlier versions refuse it). */
static int emu_version(void) {
  const char *v = getenv("HS_EMU_NCCL_VERSION");
  int n = v ? atoi(v) : 0;
  return n >= 20000 ? n : EMU_VERSION;
}

static int multi_rank_gpu(void) {
  const char *e = getenv("NCCL_MULTI_RANK_GPU_ENABLE");
  return emu_version() >= 23000 && e && atoi(e) != 0;
}

static _Thread_local int group_depth;
static _Thread_local int group_n;
static _Thread_local struct {
  struct ncclComm *comm;
  kernel *kn;
  cudaStream_t stream;
  int redop;
  const char *what;
} group_ops[MAX_GROUP];

static void stat_add(long *field) { __atomic_add_fetch(field, 1, __ATOMIC_RELAXED); }

static ncclResult_t set_error(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ncclResult_t set_error(ncclResult_t r, const char *fmt, ...) {
  char buf[sizeof last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&reg_mu);
  memcpy(last_error, buf, sizeof buf);
  pthread_mutex_unlock(&reg_mu);
  fprintf(stderr, "gpu_emu: NCCL WARN (pid %ld): %s\n", (long)getpid(), buf);
  return r;
}

static void deadline_in(struct timespec *t, double s) {
  clock_gettime(CLOCK_MONOTONIC, t);
  long ns = t->tv_nsec + (long)((s - (double)(long)s) * 1e9);
  t->tv_sec += (time_t)s + ns / 1000000000L;
  t->tv_nsec = ns % 1000000000L;
}

static int past(const struct timespec *t) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/* --- the shared segment ------------------------------------------------------------------- */

static void seg_lock(seg *s) {
  if (pthread_mutex_lock(&s->mu) == EOWNERDEAD) pthread_mutex_consistent(&s->mu);
}
static void seg_unlock(seg *s) { pthread_mutex_unlock(&s->mu); }

/* One short wait on the segment (its mutex held). 1 when the caller must stop: its
 * communicator was aborted. Past dl (the emulation's bound) it is a violation: on a GPU, this
 * wait would not end. */
static int seg_wait(core *k, const struct timespec *dl, const char *what) {
  struct timespec t;
  deadline_in(&t, 0.002);
  if (pthread_cond_timedwait(&k->s->cv, &k->s->mu, &t) == EOWNERDEAD) pthread_mutex_consistent(&k->s->mu);
  if (__atomic_load_n(&k->aborted, __ATOMIC_ACQUIRE)) return 1;
  if (past(dl)) {
    uint32_t joined = k->s->joined, dead = k->s->dead;
    seg_unlock(k->s);
    hs_emu_violation("%s on rank %d of %d waited %g s for its peers (joined 0x%x, aborted 0x%x): on a GPU it would "
                     "wait for ever; the caller should have noticed and aborted the communicator",
                     what, k->rank, k->nranks, hs_emu_bound_s(), joined, dead);
  }
  return 0;
}

static void core_unref(core *k) {
  if (__atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL)) return;
  munmap(k->s, sizeof *k->s);
  free(k);
}

/* --- kernels (on the stream's executor) ----------------------------------------------------- */

static void check_live(const void *p, int64_t count, const char *what, const core *k) {
  if (!hs_emu_device_range(p, (size_t)count * sizeof(float), NULL))
    hs_emu_violation("%s kernel on rank %d: buffer %p was freed before the kernel ended", what, k->rank, p);
}

/* An aborted kernel ends some tens of milliseconds after the abort (it has to notice it) and
 * uses its buffer until then, so the buffer must still be live: the caller may free it only once
 * the stream has drained. */
static void wind_down(const float *buf, int64_t count, const char *what, const core *k) {
  hs_emu_jitter(20000, 40000);
  if (!hs_emu_device_range(buf, (size_t)count * sizeof(float), NULL))
    hs_emu_violation("%s kernel on rank %d, aborted: its buffer %p was freed while the kernel still ran (before the "
                     "stream drained)",
                     what, k->rank, (const void *)buf);
}

/* An aborted kernel leaves its output undefined: NaN here. */
static void poison(float *out, int64_t count, const char *what, const core *k) {
  wind_down(out, count, what, k);
  for (int64_t i = 0; i < count; i++) out[i] = NAN;
}

static void coll_kernel(kernel *kn) {
  core *k = kn->k;
  seg *s = k->s;
  check_live(kn->in, kn->count, "ncclAllReduce", k);
  check_live(kn->out, kn->count, "ncclAllReduce", k);
  float scalar = kn->dev_scalar ? *kn->dev_scalar : kn->scalar;
  coll_slot *sl = &s->coll[kn->seq % NSLOT];
  uint32_t all = (1u << k->nranks) - 1, me = 1u << k->rank;
  struct timespec dl;
  deadline_in(&dl, hs_emu_bound_s());
  int stop = 0;
  seg_lock(s);
  while (!stop && sl->seq != kn->seq) stop = seg_wait(k, &dl, "ncclAllReduce");
  if (!stop) {
    for (int64_t i = 0; i < kn->count; i++) sl->data[k->rank][i] = scalar * kn->in[i];
    if (!sl->arrived) sl->count = kn->count;
    sl->arrived |= me;
    pthread_cond_broadcast(&s->cv);
    /* A rank that aborted never completes a collective: its peers' kernels wait on. */
    while (!stop && (sl->arrived != all || s->dead)) stop = seg_wait(k, &dl, "ncclAllReduce");
  }
  if (!stop) {
    if (sl->count != kn->count) {
      int64_t other = sl->count;
      seg_unlock(s);
      hs_emu_violation("ncclAllReduce on rank %d: %lld elements, a peer gave %lld", k->rank, (long long)kn->count,
                       (long long)other);
    }
    for (int64_t i = 0; i < kn->count; i++) {
      float sum = 0;
      for (int r = 0; r < k->nranks; r++) sum += sl->data[r][i];
      kn->out[i] = sum;
    }
    sl->read |= me;
    if (sl->read == all) {
      sl->seq += NSLOT;
      sl->arrived = sl->read = 0;
      pthread_cond_broadcast(&s->cv);
    }
  }
  seg_unlock(s);
  if (stop) poison(kn->out, kn->count, "ncclAllReduce", k);
  else stat_add(&hs_emu_nccl_stats_get()->kernels);
}

static void send_kernel(kernel *kn) {
  core *k = kn->k;
  seg *s = k->s;
  check_live(kn->in, kn->count, "ncclSend", k);
  p2p_box *b = &s->box[k->rank][kn->peer];
  uint32_t pair = 1u << k->rank | 1u << kn->peer;
  struct timespec dl;
  deadline_in(&dl, hs_emu_bound_s());
  int stop = 0;
  seg_lock(s);
  /* Fault injection: a send that never moves (a wedged link), until its communicator is aborted. */
  if (getenv("HS_EMU_NCCL_STALL_SEND"))
    while (!stop) stop = seg_wait(k, &dl, "ncclSend (stalled by HS_EMU_NCCL_STALL_SEND)");
  while (!stop && (b->sent != kn->seq || b->taken != kn->seq || (s->dead & pair))) stop = seg_wait(k, &dl, "ncclSend");
  if (!stop) {
    memcpy(b->data, kn->in, (size_t)kn->count * sizeof(float));
    b->count = kn->count;
    b->sent = kn->seq + 1;
    pthread_cond_broadcast(&s->cv);
    /* Blocking for the GPU: done once the receiver has the data. */
    while (!stop && b->taken != kn->seq + 1) stop = seg_wait(k, &dl, "ncclSend");
  }
  seg_unlock(s);
  if (stop) wind_down(kn->in, kn->count, "ncclSend", k);
  else stat_add(&hs_emu_nccl_stats_get()->kernels);
}

static void recv_kernel(kernel *kn) {
  core *k = kn->k;
  seg *s = k->s;
  check_live(kn->out, kn->count, "ncclRecv", k);
  p2p_box *b = &s->box[kn->peer][k->rank];
  uint32_t pair = 1u << k->rank | 1u << kn->peer;
  struct timespec dl;
  deadline_in(&dl, hs_emu_bound_s());
  int stop = 0;
  seg_lock(s);
  while (!stop && (b->sent != kn->seq + 1 || (s->dead & pair))) stop = seg_wait(k, &dl, "ncclRecv");
  if (!stop) {
    if (b->count != kn->count) {
      int64_t sent = b->count;
      seg_unlock(s);
      hs_emu_violation("ncclRecv on rank %d from rank %d: %lld elements asked, %lld sent (NCCL needs the same count)",
                       k->rank, kn->peer, (long long)kn->count, (long long)sent);
    }
    memcpy(kn->out, b->data, (size_t)kn->count * sizeof(float));
    b->taken = kn->seq + 1;
    pthread_cond_broadcast(&s->cv);
  }
  seg_unlock(s);
  if (stop) poison(kn->out, kn->count, "ncclRecv", k);
  else stat_add(&hs_emu_nccl_stats_get()->kernels);
}

static void kernel_main(void *p) {
  kernel *kn = p;
  core *k = kn->k;
  if (kn->kind == K_COLL) coll_kernel(kn);
  else if (kn->kind == K_SEND) send_kernel(kn);
  else recv_kernel(kn);
  __atomic_sub_fetch(&k->inflight, 1, __ATOMIC_ACQ_REL);
  free(kn);
  core_unref(k);
}

/* --- the communicator's thread -------------------------------------------------------------- */

/* The error a job ended with becomes the communicator's state (mu held). */
static void comm_fail(struct ncclComm *c, ncclResult_t r) {
  if (c->state == ncclSuccess || c->state == ncclInProgress) c->state = r;
}

static ncclResult_t join(struct ncclComm *c) {
  core *k = c->k;
  int fd = open(k->path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return set_error(ncclInvalidArgument, "unique id %.60s: %s (not made by ncclGetUniqueId?)", k->path, strerror(errno));
  seg *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (s == MAP_FAILED) return set_error(ncclSystemError, "mmap %s: %s", k->path, strerror(errno));
  if (__atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) != SEG_MAGIC) {
    munmap(s, sizeof *s);
    return set_error(ncclInvalidArgument, "unique id %.60s: not made by ncclGetUniqueId", k->path);
  }
  k->s = s;
  uint32_t all = (1u << k->nranks) - 1, me = 1u << k->rank;
  struct timespec dl;
  deadline_in(&dl, hs_emu_bound_s());
  ncclResult_t r = ncclSuccess;
  seg_lock(s);
  if (!s->nranks) s->nranks = k->nranks;
  if (s->nranks != k->nranks) r = set_error(ncclInvalidArgument, "rank %d says %d ranks, a peer %d", k->rank, k->nranks, s->nranks);
  else if (s->joined & me) r = set_error(ncclInvalidUsage, "rank %d joined the communicator twice", k->rank);
  if (r == ncclSuccess) {
    s->device[k->rank] = k->device;
    s->joined |= me;
    pthread_cond_broadcast(&s->cv);
    int stop = 0;
    while (!stop && s->joined != all) stop = seg_wait(k, &dl, "ncclCommInitRankConfig");
    if (stop) r = set_error(ncclInvalidUsage, "communicator set-up aborted");
    for (int i = 0; r == ncclSuccess && i < k->nranks; i++)
      for (int j = i + 1; r == ncclSuccess && j < k->nranks; j++)
        if (s->device[i] == s->device[j])
          if (!multi_rank_gpu())
            r = emu_version() < 23000
                    ? set_error(ncclInvalidUsage, "Duplicate GPU detected : rank %d and rank %d both on CUDA device %d",
                                i, j, s->device[i])
                    : set_error(ncclInvalidUsage, "Multiple Ranks are using the same GPU/Partition. Set "
                                "NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.");
  }
  seg_unlock(s);
  if (r == ncclSuccess) hs_emu_jitter(200, 2000);
  return r;
}

static void release_job(job *j) {
  if (j->kind == JOB_OP) {
    hs_emu_stream_hold(j->stream, -1, j->what);
    free(j->kn);
  }
  free(j);
}

/* Puts an operation's kernel on its stream (c->mu held): the operator it was given is read now. */
static ncclResult_t enqueue_kernel(struct ncclComm *c, kernel *kn, cudaStream_t stream, int redop, const char *what) {
  if (redop >= 0) {
    if (!c->ops[redop].live)
      hs_emu_violation("%s on rank %d: its PreMulSum operator was destroyed (ncclRedOpDestroy) before NCCL enqueued "
                       "the operation, which it does after returning ncclInProgress",
                       what, c->k->rank);
    kn->scalar = c->ops[redop].scalar;
    kn->dev_scalar = c->ops[redop].dev_scalar;
  }
  kn->k = c->k;
  __atomic_add_fetch(&c->k->refs, 1, __ATOMIC_ACQ_REL);
  __atomic_add_fetch(&c->k->inflight, 1, __ATOMIC_ACQ_REL);
  if (hs_emu_stream_submit(stream, kernel_main, kn) != cudaSuccess) {
    __atomic_sub_fetch(&c->k->inflight, 1, __ATOMIC_ACQ_REL);
    __atomic_sub_fetch(&c->k->refs, 1, __ATOMIC_ACQ_REL);
    free(kn);
    return set_error(ncclUnhandledCudaError, "%s: the stream is not a live stream", what);
  }
  return ncclSuccess;
}

static ncclResult_t finalize_wait(struct ncclComm *c) {
  core *k = c->k;
  uint32_t all = (1u << k->nranks) - 1, me = 1u << k->rank;
  struct timespec dl;
  deadline_in(&dl, hs_emu_bound_s());
  /* Flush: every kernel of this rank done first. */
  while (__atomic_load_n(&k->inflight, __ATOMIC_ACQUIRE) > 0) {
    if (__atomic_load_n(&k->aborted, __ATOMIC_ACQUIRE)) return ncclSuccess;
    if (past(&dl))
      hs_emu_violation("ncclCommFinalize on rank %d: its kernels did not end within %g s", k->rank, hs_emu_bound_s());
    nanosleep(&(struct timespec){0, 500000}, NULL);
  }
  int stop = 0;
  seg_lock(k->s);
  k->s->finalized |= me;
  pthread_cond_broadcast(&k->s->cv);
  while (!stop && k->s->finalized != all) stop = seg_wait(k, &dl, "ncclCommFinalize");
  seg_unlock(k->s);
  if (!stop) hs_emu_jitter(200, 2000);
  return ncclSuccess;
}

static void run_job(struct ncclComm *c, job *j) {
  if (j->kind == JOB_JOIN) {
    ncclResult_t r = join(c);
    pthread_mutex_lock(&c->mu);
    if (r != ncclSuccess) comm_fail(c, r);
    else stat_add(&hs_emu_nccl_stats_get()->ready);
    pthread_mutex_unlock(&c->mu);
    free(j);
  } else if (j->kind == JOB_OP) {
    hs_emu_jitter(1000, 4000);
    pthread_mutex_lock(&c->mu);
    if (!c->stop && c->state == ncclInProgress) {
      ncclResult_t r = enqueue_kernel(c, j->kn, j->stream, j->redop, j->what);
      j->kn = NULL;
      if (r != ncclSuccess) comm_fail(c, r);
      else stat_add(&hs_emu_nccl_stats_get()->deferred);
    }
    pthread_mutex_unlock(&c->mu);
    release_job(j);
  } else {
    finalize_wait(c);
    pthread_mutex_lock(&c->mu);
    if (!c->stop) {
      c->finalize = 2;
      stat_add(&hs_emu_nccl_stats_get()->finalized);
    }
    pthread_mutex_unlock(&c->mu);
    free(j);
  }
}

static void *proxy_main(void *p) {
  struct ncclComm *c = p;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    while (!c->jobs && !c->stop) pthread_cond_wait(&c->cv, &c->mu);
    if (c->stop) break;
    job *j = c->jobs;
    c->jobs = j->next;
    if (!c->jobs) c->jobs_tail = NULL;
    pthread_mutex_unlock(&c->mu);
    run_job(c, j);
    pthread_mutex_lock(&c->mu);
    if (!c->jobs && c->state == ncclInProgress) c->state = ncclSuccess;
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

static void push_job(struct ncclComm *c, job *j) {
  pthread_mutex_lock(&c->mu);
  c->state = c->state == ncclSuccess ? ncclInProgress : c->state;
  if (c->jobs_tail) c->jobs_tail->next = j;
  else c->jobs = j;
  c->jobs_tail = j;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* Waits, bounded, for a blocking communicator's jobs. */
static ncclResult_t wait_blocking(struct ncclComm *c, const char *what) {
  struct timespec dl;
  deadline_in(&dl, hs_emu_bound_s());
  pthread_mutex_lock(&c->mu);
  while (c->state == ncclInProgress) {
    if (past(&dl)) {
      pthread_mutex_unlock(&c->mu);
      hs_emu_violation("%s on rank %d: a blocking call that did not return within %g s", what, c->k->rank,
                       hs_emu_bound_s());
    }
    struct timespec t;
    deadline_in(&t, 0.002);
    pthread_cond_timedwait(&c->cv, &c->mu, &t);
  }
  ncclResult_t r = c->state;
  pthread_mutex_unlock(&c->mu);
  return r;
}

/* --- checks shared by the API ------------------------------------------------------------- */

/* The communicator a handle names: NULL for NULL (ncclInvalidArgument for the caller); a freed
 * or unknown handle is a violation. Counts the call. */
static struct ncclComm *comm_of(ncclComm_t comm, const char *api) {
  if (!comm) return NULL;
  pthread_mutex_lock(&reg_mu);
  struct ncclComm *c = all_comms;
  while (c && c != comm) c = c->next_all;
  pthread_mutex_unlock(&reg_mu);
  if (!c) hs_emu_violation("%s: %p is not a communicator", api, (void *)comm);
  if (c->magic == COMM_DEAD)
    hs_emu_violation("%s: communicator %p was freed by %s (use after free)", api, (void *)comm, c->freed_by);
  stat_add(&hs_emu_nccl_stats_get()->calls);
  return c;
}

/* For every call but ncclCommGetAsyncError and ncclCommAbort: not while the state is
 * ncclInProgress; the state's error once it has one. */
static ncclResult_t ready_for(struct ncclComm *c, const char *api) {
  pthread_mutex_lock(&c->mu);
  ncclResult_t st = c->state;
  int fin = c->finalize;
  pthread_mutex_unlock(&c->mu);
  if (st == ncclInProgress)
    hs_emu_violation("%s on rank %d while the communicator's state is ncclInProgress: NCCL's documentation says to "
                     "query ncclCommGetAsyncError until ncclSuccess before calling another NCCL function",
                     api, c->k->rank);
  if (fin && strcmp(api, "ncclCommDestroy") != 0)
    hs_emu_violation("%s on rank %d after ncclCommFinalize", api, c->k->rank);
  return st;
}

static ncclResult_t check_buffer(const struct ncclComm *c, const void *p, size_t count, const char *api,
                                 const char *which) {
  int dev = -1;
  if (!hs_emu_device_range(p, count * sizeof(float), &dev))
    return set_error(ncclInvalidArgument, "%s on rank %d: %s %p is not device memory of %zu bytes", api, c->k->rank,
                     which, p, count * sizeof(float));
  if (dev != c->k->device)
    return set_error(ncclInvalidArgument, "%s on rank %d: %s %p is memory of device %d, the communicator's is %d", api,
                     c->k->rank, which, p, dev, c->k->device);
  return ncclSuccess;
}

static ncclResult_t check_stream(const struct ncclComm *c, cudaStream_t stream, const char *api) {
  int dev = hs_emu_stream_device(stream);
  if (dev < 0) return set_error(ncclInvalidArgument, "%s on rank %d: %p is not a live stream", api, c->k->rank, (void *)stream);
  if (dev != c->k->device)
    return set_error(ncclInvalidArgument, "%s on rank %d: a stream of device %d, the communicator's is %d", api,
                     c->k->rank, dev, c->k->device);
  return ncclSuccess;
}

/* Issues an operation: in a group, kept for ncclGroupEnd; on a non-blocking communicator, held
 * on the stream and enqueued later by the communicator's thread (ncclInProgress); on a blocking
 * one, enqueued now. */
static ncclResult_t issue(struct ncclComm *c, kernel *kn, cudaStream_t stream, int redop, const char *what) {
  if (group_depth > 0) {
    if (group_n == MAX_GROUP) {
      free(kn);
      return set_error(ncclInvalidUsage, "more than %d operations in a group", MAX_GROUP);
    }
    if (!c->blocking) hs_emu_stream_hold(stream, +1, what);
    group_ops[group_n].comm = c;
    group_ops[group_n].kn = kn;
    group_ops[group_n].stream = stream;
    group_ops[group_n].redop = redop;
    group_ops[group_n].what = what;
    group_n++;
    return ncclSuccess;
  }
  if (c->blocking) {
    pthread_mutex_lock(&c->mu);
    ncclResult_t r = enqueue_kernel(c, kn, stream, redop, what);
    pthread_mutex_unlock(&c->mu);
    return r;
  }
  job *j = calloc(1, sizeof *j);
  if (!j) {
    free(kn);
    return set_error(ncclSystemError, "out of memory");
  }
  *j = (job){.kind = JOB_OP, .kn = kn, .stream = stream, .redop = redop, .what = what};
  hs_emu_stream_hold(stream, +1, what);
  push_job(c, j);
  return ncclInProgress;
}

/* --- the API ------------------------------------------------------------------------------ */

ncclResult_t ncclGetVersion(int *version) {
  if (!version) return ncclInvalidArgument;
  *version = emu_version();
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

/* The comm argument is unused, as documented (it may be NULL). */
const char *ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return last_error;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  if (!uniqueId) return set_error(ncclInvalidArgument, "ncclGetUniqueId: NULL");
  const char *dir = getenv("HS_EMU_DIR");
  char path[NCCL_UNIQUE_ID_BYTES];
  /* The file of a communicator whose ranks were killed stays behind, and process ids come back:
   * the clock is in the name, and a name taken is passed over. */
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 64; tries++) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int n = snprintf(path, sizeof path, "%s/nccl-%ld-%lu-%llx", dir && *dir ? dir : "/tmp", (long)getpid(),
                     __atomic_add_fetch(&id_counter, 1, __ATOMIC_RELAXED),
                     (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    if (n < 0 || (size_t)n >= sizeof path) return set_error(ncclSystemError, "HS_EMU_DIR is too long for a unique id");
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) return set_error(ncclSystemError, "%s: %s", path, strerror(errno));
  if (ftruncate(fd, (off_t)sizeof(seg))) {
    close(fd);
    return set_error(ncclSystemError, "%s: %s", path, strerror(errno));
  }
  seg *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (s == MAP_FAILED) return set_error(ncclSystemError, "mmap %s: %s", path, strerror(errno));
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&s->mu, &ma);
  pthread_mutexattr_destroy(&ma);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cv, &ca);
  pthread_condattr_destroy(&ca);
  for (int i = 0; i < NSLOT; i++) s->coll[i].seq = (uint64_t)i;
  __atomic_store_n(&s->magic, SEG_MAGIC, __ATOMIC_RELEASE);
  munmap(s, sizeof *s);
  memset(uniqueId, 0, sizeof *uniqueId);
  memcpy(uniqueId->internal, path, strlen(path));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config) {
  if (!comm) return set_error(ncclInvalidArgument, "ncclCommInitRankConfig: comm is NULL");
  *comm = NULL;
  if (nranks < 1 || nranks > EMU_MAX_RANKS)
    return set_error(ncclInvalidArgument, "nranks %d: the emulation has 1 to %d ranks", nranks, EMU_MAX_RANKS);
  if (rank < 0 || rank >= nranks) return set_error(ncclInvalidArgument, "rank %d is not below nranks %d", rank, nranks);
  if (config && (config->magic != 0xcafebeef || config->size != sizeof(ncclConfig_t)))
    return set_error(ncclInvalidArgument, "config was not initialised with NCCL_CONFIG_INITIALIZER");
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    (void)cudaGetLastError();
    return set_error(ncclUnhandledCudaError, "no CUDA device");
  }
  /* Fault injection: the set-up fails at once, as a system error does before anything is queued. */
  if (getenv("HS_EMU_NCCL_INIT_FAIL")) return set_error(ncclSystemError, "set-up failed (HS_EMU_NCCL_INIT_FAIL)");
  struct ncclComm *c = calloc(1, sizeof *c);
  core *k = calloc(1, sizeof *k);
  job *j = calloc(1, sizeof *j);
  if (!c || !k || !j) {
    free(c), free(k), free(j);
    return set_error(ncclSystemError, "out of memory");
  }
  memcpy(k->path, commId.internal, sizeof k->path);
  k->path[sizeof k->path - 1] = '\0';
  k->rank = rank;
  k->nranks = nranks;
  k->device = hs_emu_current_device();
  k->refs = 1;
  c->magic = COMM_LIVE;
  c->k = k;
  c->blocking = !config || config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
  c->state = ncclInProgress;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  j->kind = JOB_JOIN;
  c->jobs = c->jobs_tail = j;
  if (pthread_create(&c->proxy, NULL, proxy_main, c)) {
    free(c), free(k), free(j);
    return set_error(ncclSystemError, "cannot start the communicator's thread");
  }
  c->proxy_started = 1;
  pthread_mutex_lock(&reg_mu);
  c->next_all = all_comms;
  all_comms = c;
  pthread_mutex_unlock(&reg_mu);
  stat_add(&hs_emu_nccl_stats_get()->created);
  *comm = c;
  if (!c->blocking) return ncclInProgress;
  return wait_blocking(c, "ncclCommInitRankConfig");
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

/* One process, several GPUs: every rank's set-up is started, then all are awaited. The devlist is
 * checked as NCCL's init.cc does: every entry a device of the machine, and no device twice unless
 * several ranks may share a GPU (NCCL 2.30 and NCCL_MULTI_RANK_GPU_ENABLE=1). */
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
  int count = 0;
  if (!comms || ndev < 1 || ndev > EMU_MAX_RANKS || cudaGetDeviceCount(&count) != cudaSuccess)
    return set_error(ncclInvalidArgument, "ncclCommInitAll: %d devices", ndev);
  for (int i = 0; i < ndev; i++) {
    int dev = devlist ? devlist[i] : i;
    if (dev < 0 || dev >= count) return set_error(ncclInvalidArgument, "Invalid device %d (totalnDev=%d)", dev, count);
    for (int j = 0; devlist && j < i; j++)
      if (devlist[j] == dev && !multi_rank_gpu())
        return set_error(ncclInvalidUsage, "ncclCommInitAll: device %d twice in the device list", dev);
  }
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return r;
  int before = hs_emu_current_device();
  ncclConfig_t conf = NCCL_CONFIG_INITIALIZER;
  conf.blocking = 0;
  for (int i = 0; i < ndev && (r == ncclSuccess || r == ncclInProgress); i++) {
    if (cudaSetDevice(devlist ? devlist[i] : i) != cudaSuccess) r = ncclInvalidArgument;
    else r = ncclCommInitRankConfig(&comms[i], ndev, id, i, &conf);
  }
  (void)cudaSetDevice(before);
  for (int i = 0; i < ndev && (r == ncclSuccess || r == ncclInProgress); i++)
    r = wait_blocking(comms[i], "ncclCommInitAll");
  for (int i = 0; i < ndev && r == ncclSuccess; i++) comms[i]->blocking = 1;
  return r;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  struct ncclComm *c = comm_of(comm, "ncclCommGetAsyncError");
  if (!c || !asyncError) return set_error(ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
  pthread_mutex_lock(&c->mu);
  *asyncError = c->state;
  pthread_mutex_unlock(&c->mu);
  return ncclSuccess;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  struct ncclComm *c = comm_of(comm, "ncclRedOpCreatePreMulSum");
  if (!c || !op || !scalar) return set_error(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: NULL argument");
  ncclResult_t st = ready_for(c, "ncclRedOpCreatePreMulSum");
  if (st != ncclSuccess) return st;
  if (datatype != ncclFloat32) return set_error(ncclInvalidArgument, "the emulation has ncclFloat32 only");
  if (residence == ncclScalarDevice && !hs_emu_device_range(scalar, sizeof(float), NULL))
    return set_error(ncclInvalidArgument, "ncclScalarDevice: %p is not device memory", scalar);
  pthread_mutex_lock(&c->mu);
  int i = 0;
  while (i < MAX_OPS && c->ops[i].live) i++;
  if (i < MAX_OPS) {
    c->ops[i].live = 1;
    c->ops[i].dev_scalar = residence == ncclScalarDevice ? scalar : NULL;
    c->ops[i].scalar = residence == ncclScalarDevice ? 0 : *(const float *)scalar; /* read now, as documented */
  }
  pthread_mutex_unlock(&c->mu);
  if (i == MAX_OPS) return set_error(ncclInvalidUsage, "more than %d live operators (a leak of ncclRedOpDestroy?)", MAX_OPS);
  *op = (ncclRedOp_t)(ncclNumOps + i);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  struct ncclComm *c = comm_of(comm, "ncclRedOpDestroy");
  if (!c) return set_error(ncclInvalidArgument, "ncclRedOpDestroy: NULL communicator");
  ncclResult_t st = ready_for(c, "ncclRedOpDestroy");
  if (st != ncclSuccess) return st;
  int i = (int)op - (int)ncclNumOps;
  pthread_mutex_lock(&c->mu);
  int ok = i >= 0 && i < MAX_OPS && c->ops[i].live;
  if (ok) c->ops[i].live = 0;
  pthread_mutex_unlock(&c->mu);
  if (!ok) hs_emu_violation("ncclRedOpDestroy(%d) on rank %d: not a live operator of this communicator", (int)op, c->k->rank);
  return ncclSuccess;
}

static kernel *kernel_new(int kind, const void *in, void *out, size_t count, int peer, uint64_t seq) {
  kernel *kn = calloc(1, sizeof *kn);
  if (!kn) return NULL;
  kn->kind = kind;
  kn->in = in;
  kn->out = out;
  kn->count = (int64_t)count;
  kn->peer = peer;
  kn->seq = seq;
  kn->scalar = 1;
  return kn;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  struct ncclComm *c = comm_of(comm, "ncclAllReduce");
  if (!c) return set_error(ncclInvalidArgument, "ncclAllReduce: NULL communicator");
  ncclResult_t r = ready_for(c, "ncclAllReduce");
  if (r != ncclSuccess) return r;
  if (datatype != ncclFloat32) return set_error(ncclInvalidArgument, "the emulation has ncclFloat32 only");
  if (count == 0) return ncclSuccess;
  if (count > EMU_MAX_COUNT) return set_error(ncclInvalidArgument, "the emulation has at most %d elements", EMU_MAX_COUNT);
  int redop = -1;
  if ((int)op >= (int)ncclNumOps) {
    redop = (int)op - (int)ncclNumOps;
    pthread_mutex_lock(&c->mu);
    int live = redop < MAX_OPS && c->ops[redop].live;
    pthread_mutex_unlock(&c->mu);
    if (!live) hs_emu_violation("ncclAllReduce on rank %d: operator %d is not live on this communicator", c->k->rank, (int)op);
  } else if (op != ncclSum) {
    return set_error(ncclInvalidArgument, "the emulation reduces with ncclSum and PreMulSum only");
  }
  if ((r = check_stream(c, stream, "ncclAllReduce")) != ncclSuccess ||
      (r = check_buffer(c, sendbuff, count, "ncclAllReduce", "sendbuff")) != ncclSuccess ||
      (r = check_buffer(c, recvbuff, count, "ncclAllReduce", "recvbuff")) != ncclSuccess)
    return r;
  kernel *kn = kernel_new(K_COLL, sendbuff, recvbuff, count, -1, c->coll_seq++);
  if (!kn) return set_error(ncclSystemError, "out of memory");
  return issue(c, kn, stream, redop, "ncclAllReduce");
}

static ncclResult_t p2p(int send, const void *in, void *out, size_t count, ncclDataType_t datatype, int peer,
                        ncclComm_t comm, cudaStream_t stream) {
  const char *api = send ? "ncclSend" : "ncclRecv";
  struct ncclComm *c = comm_of(comm, api);
  if (!c) return set_error(ncclInvalidArgument, "%s: NULL communicator", api);
  ncclResult_t r = ready_for(c, api);
  if (r != ncclSuccess) return r;
  if (datatype != ncclFloat32) return set_error(ncclInvalidArgument, "the emulation has ncclFloat32 only");
  if (peer < 0 || peer >= c->k->nranks || peer == c->k->rank)
    return set_error(ncclInvalidArgument, "%s on rank %d: peer %d", api, c->k->rank, peer);
  if (count == 0) return ncclSuccess;
  if (count > EMU_MAX_COUNT) return set_error(ncclInvalidArgument, "the emulation has at most %d elements", EMU_MAX_COUNT);
  if ((r = check_stream(c, stream, api)) != ncclSuccess ||
      (r = check_buffer(c, send ? in : out, count, api, send ? "sendbuff" : "recvbuff")) != ncclSuccess)
    return r;
  uint64_t seq = send ? c->send_seq[peer]++ : c->recv_seq[peer]++;
  kernel *kn = kernel_new(send ? K_SEND : K_RECV, in, out, count, peer, seq);
  if (!kn) return set_error(ncclSystemError, "out of memory");
  return issue(c, kn, stream, -1, api);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return p2p(1, sendbuff, NULL, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return p2p(0, NULL, recvbuff, count, datatype, peer, comm, stream);
}

/* nccl.h declares these two without a prototype ("()") in C, so their definitions have none
 * before them. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
ncclResult_t ncclGroupStart(void) {
  group_depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (group_depth < 1) return set_error(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group_depth > 0) return ncclSuccess;
  ncclResult_t r = ncclSuccess;
  int n = group_n;
  group_n = 0;
  for (int i = 0; i < n; i++) {
    struct ncclComm *c = group_ops[i].comm;
    if (c->blocking) {
      pthread_mutex_lock(&c->mu);
      ncclResult_t e = enqueue_kernel(c, group_ops[i].kn, group_ops[i].stream, group_ops[i].redop, group_ops[i].what);
      pthread_mutex_unlock(&c->mu);
      if (e != ncclSuccess && r == ncclSuccess) r = e;
      continue;
    }
    job *j = calloc(1, sizeof *j);
    if (!j) hs_emu_violation("out of memory");
    *j = (job){.kind = JOB_OP, .kn = group_ops[i].kn, .stream = group_ops[i].stream, .redop = group_ops[i].redop,
               .what = group_ops[i].what};
    push_job(c, j); /* the stream was held when the operation was issued */
    if (r == ncclSuccess) r = ncclInProgress;
  }
  return r;
}
#pragma GCC diagnostic pop

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  struct ncclComm *c = comm_of(comm, "ncclCommFinalize");
  if (!c) return set_error(ncclInvalidArgument, "ncclCommFinalize: NULL communicator");
  ncclResult_t st = ready_for(c, "ncclCommFinalize");
  if (st != ncclSuccess) return st;
  job *j = calloc(1, sizeof *j);
  if (!j) return set_error(ncclSystemError, "out of memory");
  j->kind = JOB_FINALIZE;
  pthread_mutex_lock(&c->mu);
  c->finalize = 1;
  pthread_mutex_unlock(&c->mu);
  push_job(c, j);
  return c->blocking ? wait_blocking(c, "ncclCommFinalize") : ncclInProgress;
}

/* Ends the communicator's thread and frees the handle (poisoned, kept for the checks). */
static void comm_free(struct ncclComm *c, const char *by) {
  pthread_mutex_lock(&c->mu);
  c->stop = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  if (c->proxy_started) pthread_join(c->proxy, NULL);
  while (c->jobs) {
    job *j = c->jobs;
    c->jobs = j->next;
    release_job(j);
  }
  core *k = c->k;
  if (k->s) {
    uint32_t all = (1u << k->nranks) - 1;
    seg_lock(k->s);
    if (!strcmp(by, "ncclCommAbort")) k->s->dead |= 1u << k->rank;
    k->s->left |= 1u << k->rank;
    int last = k->s->left == all;
    pthread_cond_broadcast(&k->s->cv);
    seg_unlock(k->s);
    if (last) unlink(k->path);
  }
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  c->freed_by = by;
  c->magic = COMM_DEAD;
  c->k = NULL;
  if (k->s) core_unref(k);
  else free(k);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  struct ncclComm *c = comm_of(comm, "ncclCommDestroy");
  if (!c) return set_error(ncclInvalidArgument, "ncclCommDestroy: NULL communicator");
  ncclResult_t st = ready_for(c, "ncclCommDestroy");
  pthread_mutex_lock(&c->mu);
  int fin = c->finalize;
  pthread_mutex_unlock(&c->mu);
  /* A blocking communicator may be destroyed without a finalize (NCCL's own examples do): the
   * destroy then finalizes it, waiting for its work, which must have ended, or the wait has no
   * bound. A non-blocking one is hetsim's bounded kind: finalized and polled first. */
  int busy = __atomic_load_n(&c->k->inflight, __ATOMIC_ACQUIRE) > 0;
  if (st == ncclSuccess && fin != 2 && (!c->blocking || busy))
    hs_emu_violation("ncclCommDestroy on rank %d of a communicator whose ncclCommFinalize %s: nccl.h makes "
                     "ncclCommDestroy non-blocking only once the finalize's state is ncclSuccess; before that it may "
                     "wait for every peer without bound",
                     c->k->rank, fin ? "has not reached ncclSuccess" : busy ? "was never called, with work in flight"
                                                                            : "was never called");
  stat_add(&hs_emu_nccl_stats_get()->destroyed);
  comm_free(c, "ncclCommDestroy");
  return ncclSuccess;
}

/* Stops the communicator's kernels (they end within a few ms, their outputs NaN) and frees it. */
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  struct ncclComm *c = comm_of(comm, "ncclCommAbort");
  if (!c) return ncclSuccess;
  stat_add(&hs_emu_nccl_stats_get()->aborted);
  pthread_mutex_lock(&c->mu);
  __atomic_store_n(&c->k->aborted, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&c->mu);
  comm_free(c, "ncclCommAbort");
  return ncclSuccess;
}
