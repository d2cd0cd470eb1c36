/* fake_cudart: an emulated CUDA runtime for deviceless tests (see gpu_emu.h for what it
 * promises). It defines the runtime API functions that the code under test calls, with the
 * declarations of the real <cuda_runtime_api.h>, so that code compiles unchanged against it.
 *
 * Model. One process-wide lock (mu) and condition variable (cv) guard every stream, event,
 * capture, graph and allocation: the emulation is about ordering, not speed. A stream is a FIFO
 * of operations with two counters, enq (operations enqueued) and done (operations finished); its
 * executor thread runs the head once every dependency (stream, ticket) of it is met (that
 * stream's done has reached the ticket), after a random delay. An event records (stream,
 * ticket); cudaEventQuery compares the ticket with done, and the mark that completes it stamps
 * the event's time (cudaEventElapsedTime). cudaStreamWaitEvent enqueues an empty operation that
 * depends on the event's (stream, ticket). The legacy default stream of each device synchronises
 * with the device's blocking streams (created without cudaStreamNonBlocking) through the same
 * dependencies, as the programming guide describes.
 *
 * Device memory: each device holds HS_EMU_DEVICE_MEM bytes (default 8 GiB); cudaMalloc beyond
 * what is free answers cudaErrorMemoryAllocation before any host memory is taken.
 *
 * Stream capture and graphs (programming guide, "Creating a Graph Using Stream Capture"; the
 * runtime's cudaStreamBeginCapture and cudaThreadExchangeStreamCaptureMode). Work put on a
 * capturing stream (library and kernel work from hs_emu_stream_submit_owned, cudaMemsetAsync,
 * cudaMemcpyAsync between device buffers, cudaLaunchHostFunc, cudaGraphLaunch) is recorded into
 * the capture instead of run; cudaEventRecord marks the event as captured, and
 * cudaStreamWaitEvent of an event captured in the same sequence adds nothing (a capture is one
 * stream: it is in order already). cudaStreamEndCapture turns the record into a graph,
 * cudaGraphInstantiate copies it into an executable graph, and each cudaGraphLaunch enqueues the
 * recorded work in order on the launch stream, after the previous launch of the same executable
 * graph. Recorded work owned by a library is shared by the capture, the graph, the executable
 * graphs and the launches in flight (a reference count): the library's release runs once, when
 * the last of them is gone. A recorded copy or memset checks its device memory again when it
 * runs. The rules, adversarially:
 * - synchronising or querying a capturing stream or a captured event is an error
 *   (cudaErrorStreamCaptureUnsupported, cudaErrorCapturedEvent) that invalidates the capture;
 *   using the legacy stream while a blocking stream of its device captures is
 *   cudaErrorStreamCaptureImplicit, and cudaDeviceSynchronize during any capture on the device
 *   is cudaErrorStreamCaptureUnsupported, both invalidating;
 * - a potentially unsafe call (cudaMalloc, cudaFree, cudaMemcpy, cudaMemset, cudaDeviceSynchronize,
 *   and synchronising or querying any stream or event) from a thread whose capture mode forbids it
 *   is cudaErrorStreamCaptureUnsupported and invalidates the captures that forbid it;
 * - a copy with a host end, a wait on an event not captured in the sequence
 *   (cudaErrorStreamCaptureIsolation) or captured in another one (cudaErrorStreamCaptureMerge)
 *   fail and invalidate; work on an invalidated capture answers
 *   cudaErrorStreamCaptureInvalidated, and so does cudaStreamEndCapture, with no graph;
 * - what the emulation does not model (a second stream joining a capture through an event,
 *   external event waits, captures of cudaStreamPerThread, work of hs_emu_stream_submit) stops the
 *   test with a message rather than being approximated.
 *
 * Handles are never freed: a destroyed stream, event, graph or executable graph keeps its memory
 * with a poisoned magic, so that a later use is reported (the documentation calls it undefined
 * behaviour) rather than read from freed memory. The process ends with its executors idle; they
 * are detached. */
#include "tests/gpu_emu/gpu_emu.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EMU_MAX_DEVICES 16
#define EMU_DEVICE_MEM_DEFAULT ((size_t)8 << 30) /* bytes per device without HS_EMU_DEVICE_MEM */

enum {
  STREAM_LIVE = 0x5354524du,
  STREAM_DEAD = 0xdead5354u,
  EVENT_LIVE = 0x45564e54u,
  EVENT_DEAD = 0xdead4556u,
  GRAPH_LIVE = 0x47525048u,
  GRAPH_DEAD = 0xdead4752u,
  EXEC_LIVE = 0x47455845u,
  EXEC_DEAD = 0xdead4745u,
};

typedef struct emu_dep {
  struct CUstream_st *s;
  uint64_t ticket; /* met once s->done >= ticket */
} emu_dep;

enum { OP_MARK = 0, OP_FN = 1, OP_COPY = 2, OP_MEMSET = 3 };

/* Work that may run more than once (hs_emu_stream_submit_owned, and host functions recorded in a
 * capture): shared by every operation, capture and graph that may still run it. */
typedef struct emu_work {
  void (*fn)(void *);
  void *arg;
  void (*release)(void *); /* NULL: nothing to release */
  long refs;               /* __atomic */
} emu_work;

typedef struct emu_op {
  int kind;
  void (*fn)(void *); /* OP_FN without work */
  void *arg;
  emu_work *work; /* OP_FN: a reference, dropped once it ran */
  void *dst;      /* OP_COPY, OP_MEMSET */
  const void *src;
  size_t n;
  int value;            /* OP_MEMSET: the byte */
  int dst_dev, src_dev; /* which ends are device memory, checked when the copy runs */
  void *staged;         /* a copy of pageable memory taken at the call (freed after) */
  struct CUevent_st *ev; /* OP_MARK of cudaEventRecord: stamps ev's time if still its latest record */
  uint64_t ev_gen;
  emu_dep *deps;
  int ndeps;
  struct emu_op *next;
} emu_op;

/* One recorded operation of a capture or graph. */
typedef struct emu_node {
  int kind; /* OP_FN, OP_COPY (device to device), OP_MEMSET */
  emu_work *work;
  void *dst;
  const void *src;
  size_t n;
  int value;
} emu_node;

typedef struct emu_nodes {
  emu_node *v;
  size_t n, cap;
} emu_nodes;

typedef struct emu_capture {
  uint64_t id; /* unique in the process, never 0 */
  pthread_t thread;
  enum cudaStreamCaptureMode mode;
  int invalid;
  emu_nodes nodes;
} emu_capture;

struct CUstream_st {
  unsigned magic;
  int device;
  int nonblocking; /* cudaStreamNonBlocking: no implicit synchronisation with the legacy stream */
  int legacy;      /* the device's legacy default stream */
  int destroyed;
  uint64_t enq, done;
  emu_op *head, *tail;
  int held;           /* operations a library will enqueue later (hs_emu_stream_hold) */
  const char *holder; /* who holds them */
  emu_capture *cap;   /* the capture under way, or NULL */
  struct CUstream_st *next_all;
};

struct CUevent_st {
  unsigned magic;
  int device;
  unsigned flags;
  int recorded;
  struct CUstream_st *s;
  uint64_t ticket;
  uint64_t gen;    /* records so far (outside captures) */
  double t;        /* s: when the latest record's mark ran (CLOCK_MONOTONIC) */
  uint64_t cap_id; /* last recorded in this capture sequence; 0: not captured */
  struct CUevent_st *next_all;
};

struct CUgraph_st {
  unsigned magic;
  emu_nodes nodes;
  struct CUgraph_st *next_all;
};

struct CUgraphExec_st {
  unsigned magic;
  emu_nodes nodes;
  struct CUstream_st *last_s; /* the previous launch ends with (last_s, last_ticket) */
  uint64_t last_ticket;
  struct CUgraphExec_st *next_all;
};

typedef struct emu_alloc {
  char *base;
  size_t n;       /* bytes asked for */
  size_t charged; /* bytes counted against the device (n rounded up to 256) */
  int device;
  int live;
} emu_alloc;

/* The runtime's state is process-wide, as the real runtime's is. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static pthread_once_t cv_once = PTHREAD_ONCE_INIT;
static struct CUstream_st *all_streams;
static struct CUstream_st *legacy_streams[EMU_MAX_DEVICES];
static struct CUevent_st *all_events;
static struct CUgraph_st *all_graphs;
static struct CUgraphExec_st *all_execs;
static emu_alloc *allocs;
static size_t nallocs, cap_allocs;
static size_t live_bytes[EMU_MAX_DEVICES];
static uint64_t capture_ids;
static hs_emu_nccl_stats stats;

static _Thread_local int cur_dev;
static _Thread_local cudaError_t last_error = cudaSuccess;
static _Thread_local uint64_t rng_state;
static _Thread_local enum cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

static void cv_init(void) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&cv, &a);
  pthread_condattr_destroy(&a);
}

static void lock(void) {
  pthread_once(&cv_once, cv_init);
  pthread_mutex_lock(&mu);
}
static void unlock(void) { pthread_mutex_unlock(&mu); }

void hs_emu_violation(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "gpu_emu: VIOLATION (pid %ld): ", (long)getpid());
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  fflush(stderr);
  abort();
}

/* What the emulation does not model stops the test too, saying so, rather than being
 * approximated. */
__attribute__((noreturn)) static void not_modelled(const char *what) {
  hs_emu_violation("not modelled by the emulation: %s", what);
}

double hs_emu_bound_s(void) {
  const char *s = getenv("HS_EMU_BOUND_S");
  double v = s ? strtod(s, NULL) : 0;
  return v > 0 ? v : 20;
}

static uint64_t rng_next(void) {
  if (!rng_state) {
    static unsigned long threads;
    unsigned long k = __atomic_add_fetch(&threads, 1, __ATOMIC_RELAXED);
    const char *seed = getenv("HS_EMU_SEED");
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t base = seed ? strtoull(seed, NULL, 10) : (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    rng_state = (base + 0x9e3779b97f4a7c15ULL * k) | 1;
  }
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

void hs_emu_jitter(unsigned min_us, unsigned max_us) {
  unsigned us = min_us + (max_us > min_us ? (unsigned)(rng_next() % (max_us - min_us + 1)) : 0);
  if (us) nanosleep(&(struct timespec){us / 1000000, (long)(us % 1000000) * 1000}, NULL);
}

hs_emu_nccl_stats *hs_emu_nccl_stats_get(void) { return &stats; }

static int device_count(void) {
  const char *s = getenv("HS_EMU_GPUS");
  long v = s ? strtol(s, NULL, 10) : 1;
  return v < 0 ? 0 : v > EMU_MAX_DEVICES ? EMU_MAX_DEVICES : (int)v;
}

/* Bytes of memory each emulated device has (HS_EMU_DEVICE_MEM). */
static size_t device_mem_limit(void) {
  const char *s = getenv("HS_EMU_DEVICE_MEM");
  if (!s || !*s) return EMU_DEVICE_MEM_DEFAULT;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || v == 0 || s[0] == '-' || v > SIZE_MAX)
    hs_emu_violation("HS_EMU_DEVICE_MEM=\"%s\": expected a positive number of bytes", s);
  return (size_t)v;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int hs_emu_current_device(void) { return cur_dev; }

static cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

void hs_emu_set_last_error(cudaError_t e) { last_error = e; }

/* --- allocations (mu held) ------------------------------------------------------------------ */

static const emu_alloc *find_alloc(const void *p, size_t bytes) {
  const char *c = p;
  for (size_t i = 0; i < nallocs; i++) {
    const emu_alloc *a = &allocs[i];
    if (a->live && c >= a->base && c < a->base + a->n) return bytes <= (size_t)(a->base + a->n - c) ? a : NULL;
  }
  return NULL;
}

static int is_device_ptr(const void *p) { return find_alloc(p, 1) != NULL; }

int hs_emu_device_range(const void *p, size_t bytes, int *device) {
  lock();
  const emu_alloc *a = find_alloc(p, bytes ? bytes : 1);
  if (a && device) *device = a->device;
  unlock();
  return a != NULL;
}

/* --- recorded work -------------------------------------------------------------------------- */

static emu_work *work_new(void (*fn)(void *), void *arg, void (*release)(void *)) {
  emu_work *w = malloc(sizeof *w);
  if (!w) hs_emu_violation("out of memory");
  *w = (emu_work){.fn = fn, .arg = arg, .release = release, .refs = 1};
  return w;
}

static void work_ref(emu_work *w) { __atomic_add_fetch(&w->refs, 1, __ATOMIC_RELAXED); }

/* Drops a reference; the last one runs the owner's release. Never with mu held: release is a
 * library's code, which may call the runtime. */
static void work_unref(emu_work *w) {
  if (__atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
  if (w->release) w->release(w->arg);
  free(w);
}

static void nodes_push(emu_nodes *l, emu_node node) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    emu_node *v = realloc(l->v, cap * sizeof *v);
    if (!v) hs_emu_violation("out of memory");
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = node;
}

/* Appends copies of from's nodes to *to, sharing their work. */
static void nodes_append(emu_nodes *to, const emu_nodes *from) {
  for (size_t i = 0; i < from->n; i++) {
    if (from->v[i].work) work_ref(from->v[i].work);
    nodes_push(to, from->v[i]);
  }
}

/* Drops what *l holds (mu not held: see work_unref). */
static void nodes_drop(emu_nodes *l) {
  for (size_t i = 0; i < l->n; i++)
    if (l->v[i].work) work_unref(l->v[i].work);
  free(l->v);
  *l = (emu_nodes){0};
}

/* --- streams (mu held) ---------------------------------------------------------------------- */

static void *executor(void *p);

static struct CUstream_st *stream_new(int device, int nonblocking, int legacy) {
  struct CUstream_st *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->magic = STREAM_LIVE;
  s->device = device;
  s->nonblocking = nonblocking;
  s->legacy = legacy;
  pthread_t th;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&th, &at, executor, s);
  pthread_attr_destroy(&at);
  if (rc) {
    free(s);
    return NULL;
  }
  s->next_all = all_streams;
  all_streams = s;
  return s;
}

static struct CUstream_st *legacy_stream(int device) {
  if (!legacy_streams[device]) legacy_streams[device] = stream_new(device, 0, 1);
  if (!legacy_streams[device]) hs_emu_violation("cannot start the legacy stream's executor thread");
  return legacy_streams[device];
}

static int special(cudaStream_t s) { return s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread; }

/* The stream a handle names, the default streams included; a violation for a handle that is not
 * a stream or was destroyed (mu held). */
static struct CUstream_st *stream_of(cudaStream_t s, const char *api) {
  if (special(s)) return legacy_stream(cur_dev);
  for (struct CUstream_st *t = all_streams; t; t = t->next_all)
    if (t == s) {
      if (t->magic == STREAM_DEAD) hs_emu_violation("%s: stream %p used after cudaStreamDestroy", api, (void *)s);
      return t;
    }
  hs_emu_violation("%s: %p is not a stream", api, (void *)s);
}

/* The live stream a handle names, or NULL (mu held). */
static struct CUstream_st *live_stream(cudaStream_t s) {
  if (special(s)) return legacy_stream(cur_dev);
  for (struct CUstream_st *t = all_streams; t; t = t->next_all)
    if (t == s && t->magic == STREAM_LIVE) return t;
  return NULL;
}

static void check_not_held(const struct CUstream_st *s, const char *api) {
  if (s->held)
    hs_emu_violation("%s on stream %p while %s still has %d operation%s to enqueue on it (ncclInProgress): NCCL's "
                     "documentation forbids CUDA calls on its streams until the communicator's state is ncclSuccess, "
                     "and this call would not follow that work",
                     api, (void *)s, s->holder ? s->holder : "a library", s->held, s->held == 1 ? "" : "s");
}

static struct CUevent_st *event_of(cudaEvent_t e, const char *api) {
  for (struct CUevent_st *t = all_events; t; t = t->next_all)
    if (t == e) {
      if (t->magic == EVENT_DEAD) hs_emu_violation("%s: event %p used after cudaEventDestroy", api, (void *)e);
      return t;
    }
  hs_emu_violation("%s: %p is not an event", api, (void *)e);
}

/* --- capture rules (mu held) ---------------------------------------------------------------- */

/* The capture sequence with this id while it is under way, or NULL once it ended. */
static emu_capture *capture_by_id(uint64_t id) {
  for (struct CUstream_st *t = all_streams; t; t = t->next_all)
    if (t->cap && t->cap->id == id) return t->cap;
  return NULL;
}

/* cudaThreadExchangeStreamCaptureMode: "If the local thread has an ongoing capture sequence not
 * initiated with cudaStreamCaptureModeRelaxed, it is prohibited from potentially unsafe API
 * calls", and in the (default) Global mode so is a thread while "any other thread has a
 * concurrent capture sequence initiated with cudaStreamCaptureModeGlobal". Invalidates the
 * captures that forbid the call ("When an invalid operation is attempted during stream capture,
 * any associated capture graphs are invalidated", programming guide, "Invalidation"). */
static cudaError_t unsafe_call(void) {
  if (thread_mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  pthread_t self = pthread_self();
  int hit = 0;
  for (struct CUstream_st *t = all_streams; t; t = t->next_all) {
    emu_capture *c = t->cap;
    if (!c || c->mode == cudaStreamCaptureModeRelaxed) continue;
    if (pthread_equal(c->thread, self) ||
        (thread_mode == cudaStreamCaptureModeGlobal && c->mode == cudaStreamCaptureModeGlobal)) {
      c->invalid = 1;
      hit = 1;
    }
  }
  return hit ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}

/* "When any stream in the same context is being captured, and it was not created with
 * cudaStreamNonBlocking, any attempted use of the legacy stream is invalid" (programming guide,
 * "Prohibited and Unhandled Operations"): cudaErrorStreamCaptureImplicit, invalidating. */
static cudaError_t legacy_conflict(const struct CUstream_st *s) {
  if (!s->legacy) return cudaSuccess;
  int hit = 0;
  for (struct CUstream_st *t = all_streams; t; t = t->next_all)
    if (t->cap && !t->legacy && !t->nonblocking && t->device == s->device) {
      t->cap->invalid = 1;
      hit = 1;
    }
  return hit ? cudaErrorStreamCaptureImplicit : cudaSuccess;
}

/* For work put on s: cudaSuccess with *cap the capture to record it in (NULL: enqueue it), or why
 * it may not be put there. */
static cudaError_t work_gate(struct CUstream_st *s, emu_capture **cap) {
  *cap = NULL;
  if (s->cap) {
    if (s->cap->invalid) return cudaErrorStreamCaptureInvalidated;
    *cap = s->cap;
    return cudaSuccess;
  }
  return legacy_conflict(s);
}

/* For a query of or a wait for s: "It is invalid to synchronize or query the execution status of
 * a stream which is being captured"; otherwise the legacy stream's and the thread's rules. */
static cudaError_t sync_gate(struct CUstream_st *s) {
  if (s->cap) {
    if (s->cap->invalid) return cudaErrorStreamCaptureInvalidated;
    s->cap->invalid = 1;
    return cudaErrorStreamCaptureUnsupported;
  }
  cudaError_t e = legacy_conflict(s);
  return e != cudaSuccess ? e : unsafe_call();
}

/* For a query of or a wait for e: an event last recorded in a capture sequence represents no
 * work scheduled for execution (cudaErrorCapturedEvent, "The operation is not permitted on an
 * event which was last recorded in a capturing stream"), even after the sequence ended. */
static cudaError_t event_gate(struct CUevent_st *e) {
  if (e->cap_id) {
    emu_capture *c = capture_by_id(e->cap_id);
    if (c && c->invalid) return cudaErrorStreamCaptureInvalidated;
    if (c) c->invalid = 1;
    return cudaErrorCapturedEvent;
  }
  return unsafe_call();
}

int hs_emu_thread_capturing(void) {
  lock();
  pthread_t self = pthread_self();
  int hit = 0;
  for (struct CUstream_st *t = all_streams; t && !hit; t = t->next_all)
    hit = t->cap && t->cap->mode != cudaStreamCaptureModeRelaxed && pthread_equal(t->cap->thread, self);
  unlock();
  return hit;
}

/* --- execution ------------------------------------------------------------------------------ */

static void add_dep(emu_op *op, struct CUstream_st *s, uint64_t ticket) {
  if (ticket == 0 || s->done >= ticket) return;
  emu_dep *d = realloc(op->deps, (size_t)(op->ndeps + 1) * sizeof *d);
  if (!d) hs_emu_violation("out of memory");
  op->deps = d;
  op->deps[op->ndeps++] = (emu_dep){.s = s, .ticket = ticket};
}

static emu_op *op_new(int kind) {
  emu_op *op = calloc(1, sizeof *op);
  if (!op) hs_emu_violation("out of memory");
  op->kind = kind;
  return op;
}

/* Frees an operation that was never enqueued (mu may be held: it holds no work). */
static void op_discard(emu_op *op) {
  free(op->deps);
  free(op->staged);
  free(op);
}

/* The operation that runs a recorded node once more. */
static emu_op *op_of_node(const emu_node *node) {
  emu_op *op = op_new(node->kind);
  op->work = node->work;
  if (op->work) work_ref(op->work);
  op->dst = node->dst;
  op->src = node->src;
  op->n = node->n;
  op->value = node->value;
  op->dst_dev = 1;
  op->src_dev = node->kind == OP_COPY;
  return op;
}

/* Appends op to s with the legacy stream's implicit dependencies; returns its ticket. */
static uint64_t enqueue(struct CUstream_st *s, emu_op *op) {
  if (s->legacy) {
    for (struct CUstream_st *t = all_streams; t; t = t->next_all)
      if (t != s && !t->legacy && !t->nonblocking && t->device == s->device) add_dep(op, t, t->enq);
  } else if (!s->nonblocking) {
    struct CUstream_st *l = legacy_stream(s->device);
    add_dep(op, l, l->enq);
  }
  if (s->tail) s->tail->next = op;
  else s->head = op;
  s->tail = op;
  s->enq++;
  pthread_cond_broadcast(&cv);
  return s->enq;
}

static int deps_met(const emu_op *op) {
  for (int i = 0; i < op->ndeps; i++)
    if (op->deps[i].s->done < op->deps[i].ticket) return 0;
  return 1;
}

static void run_copy(emu_op *op) {
  lock();
  int ok_dst = !op->dst_dev || find_alloc(op->dst, op->n);
  int ok_src = op->staged || !op->src_dev || find_alloc(op->src, op->n);
  unlock();
  if (!ok_dst || !ok_src)
    hs_emu_violation("a copy of %zu bytes from %p to %p ran after its device memory was freed", op->n, op->src, op->dst);
  memcpy(op->dst, op->staged ? op->staged : op->src, op->n);
}

static void run_memset(emu_op *op) {
  lock();
  int ok = find_alloc(op->dst, op->n) != NULL;
  unlock();
  if (!ok) hs_emu_violation("a memset of %zu bytes at %p ran after its device memory was freed", op->n, op->dst);
  memset(op->dst, op->value, op->n);
}

static void *executor(void *p) {
  struct CUstream_st *s = p;
  lock();
  for (;;) {
    while (!s->head && !s->destroyed) pthread_cond_wait(&cv, &mu);
    if (!s->head) break;
    emu_op *op = s->head;
    while (!deps_met(op)) pthread_cond_wait(&cv, &mu);
    unlock();
    hs_emu_jitter(0, 300);
    if (op->kind == OP_FN && op->work) op->work->fn(op->work->arg);
    else if (op->kind == OP_FN) op->fn(op->arg);
    else if (op->kind == OP_COPY) run_copy(op);
    else if (op->kind == OP_MEMSET) run_memset(op);
    if (op->work) work_unref(op->work);
    lock();
    if (op->ev && op->ev->gen == op->ev_gen) op->ev->t = now_s();
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    s->done++;
    op_discard(op);
    pthread_cond_broadcast(&cv);
  }
  unlock();
  return NULL;
}

/* Waits until s has finished ticket (mu held), bounded: what a real GPU would wait for without
 * end is a violation past the bound. */
static void wait_ticket(struct CUstream_st *s, uint64_t ticket, const char *api) {
  double bound = hs_emu_bound_s();
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += (time_t)bound;
  while (s->done < ticket) {
    if (pthread_cond_timedwait(&cv, &mu, &dl) == ETIMEDOUT && s->done < ticket)
      hs_emu_violation("%s waited %g s for work on stream %p that did not end: on a GPU this call would never "
                       "return",
                       api, bound, (void *)s);
  }
}

int hs_emu_stream_device(cudaStream_t s) {
  lock();
  int dev = -1;
  if (special(s)) dev = cur_dev;
  else
    for (struct CUstream_st *t = all_streams; t; t = t->next_all)
      if (t == s && t->magic == STREAM_LIVE) dev = t->device;
  unlock();
  return dev;
}

cudaError_t hs_emu_stream_submit(cudaStream_t s, void (*fn)(void *), void *arg) {
  lock();
  struct CUstream_st *t = live_stream(s);
  if (!t) {
    unlock();
    return cudaErrorInvalidResourceHandle;
  }
  if (t->cap) not_modelled("hs_emu_stream_submit (the emulated NCCL's kernels) on a capturing stream");
  cudaError_t e = legacy_conflict(t);
  if (e == cudaSuccess) {
    emu_op *op = op_new(OP_FN);
    op->fn = fn;
    op->arg = arg;
    enqueue(t, op);
  }
  unlock();
  return e;
}

cudaError_t hs_emu_stream_submit_owned(cudaStream_t s, void (*fn)(void *), void *arg, void (*release)(void *)) {
  lock();
  struct CUstream_st *t = live_stream(s);
  cudaError_t e = cudaErrorInvalidResourceHandle;
  if (t) {
    check_not_held(t, "a library's or kernel's work");
    emu_capture *cap;
    e = work_gate(t, &cap);
    if (e == cudaSuccess && cap) {
      nodes_push(&cap->nodes, (emu_node){.kind = OP_FN, .work = work_new(fn, arg, release)});
    } else if (e == cudaSuccess) {
      emu_op *op = op_new(OP_FN);
      op->work = work_new(fn, arg, release);
      enqueue(t, op);
    }
  }
  unlock();
  if (e != cudaSuccess && release) release(arg);
  return e;
}

void hs_emu_stream_hold(cudaStream_t s, int delta, const char *who) {
  lock();
  struct CUstream_st *t = stream_of(s, who);
  t->held += delta;
  if (t->held < 0) hs_emu_violation("%s: released more held operations than it held on stream %p", who, (void *)s);
  t->holder = who;
  unlock();
}

/* --- the runtime API ------------------------------------------------------------------------ */

void *hs_emu_driver_sym(const char *name) {
  void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return NULL;
  void *sym = dlsym(h, name);
  dlclose(h); /* the loader's handle keeps the library loaded */
  return sym;
}

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion) {
  if (!runtimeVersion) return fail(cudaErrorInvalidValue);
  *runtimeVersion = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (!count) return fail(cudaErrorInvalidValue);
  *count = device_count();
  return *count ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
  int n = device_count();
  if (n == 0) return fail(cudaErrorNoDevice);
  if (device < 0 || device >= n) return fail(cudaErrorInvalidDevice);
  cur_dev = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  if (!device) return fail(cudaErrorInvalidValue);
  *device = cur_dev;
  return cudaSuccess;
}

/* An H100 SXM5 80GB (compute capability 9.0, 132 SMs, 1980 MHz, HBM3 at 2619 MHz on 5120 bits).
 * Attributes not listed answer cudaErrorInvalidValue, so that a caller of one is noticed: add it
 * here with the device's value. */
static const struct {
  enum cudaDeviceAttr attr;
  int value;
} device_attrs[] = {
    {cudaDevAttrMaxThreadsPerBlock, 1024},
    {cudaDevAttrMaxBlockDimX, 1024},
    {cudaDevAttrMaxBlockDimY, 1024},
    {cudaDevAttrMaxBlockDimZ, 64},
    {cudaDevAttrMaxGridDimX, 2147483647},
    {cudaDevAttrMaxGridDimY, 65535},
    {cudaDevAttrMaxGridDimZ, 65535},
    {cudaDevAttrMaxSharedMemoryPerBlock, 49152},
    {cudaDevAttrTotalConstantMemory, 65536},
    {cudaDevAttrWarpSize, 32},
    {cudaDevAttrMaxRegistersPerBlock, 65536},
    {cudaDevAttrClockRate, 1980000},
    {cudaDevAttrMultiProcessorCount, 132},
    {cudaDevAttrKernelExecTimeout, 0},
    {cudaDevAttrIntegrated, 0},
    {cudaDevAttrCanMapHostMemory, 1},
    {cudaDevAttrComputeMode, cudaComputeModeDefault},
    {cudaDevAttrConcurrentKernels, 1},
    {cudaDevAttrEccEnabled, 1},
    {cudaDevAttrMemoryClockRate, 2619000},
    {cudaDevAttrGlobalMemoryBusWidth, 5120},
    {cudaDevAttrL2CacheSize, 50 << 20},
    {cudaDevAttrMaxThreadsPerMultiProcessor, 2048},
    {cudaDevAttrUnifiedAddressing, 1},
    {cudaDevAttrComputeCapabilityMajor, 9},
    {cudaDevAttrComputeCapabilityMinor, 0},
    {cudaDevAttrStreamPrioritiesSupported, 1},
    {cudaDevAttrMaxSharedMemoryPerMultiprocessor, 228 << 10},
    {cudaDevAttrMaxRegistersPerMultiprocessor, 65536},
    {cudaDevAttrManagedMemory, 1},
    {cudaDevAttrIsMultiGpuBoard, 0},
    {cudaDevAttrConcurrentManagedAccess, 1},
    {cudaDevAttrCooperativeLaunch, 1},
    {cudaDevAttrMaxSharedMemoryPerBlockOptin, 227 << 10},
    {cudaDevAttrMaxBlocksPerMultiprocessor, 32},
    {cudaDevAttrReservedSharedMemoryPerBlock, 1024},
    {cudaDevAttrMemoryPoolsSupported, 1},
    {cudaDevAttrClusterLaunch, 1},
};

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
  if (!value) return fail(cudaErrorInvalidValue);
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  for (size_t i = 0; i < sizeof device_attrs / sizeof device_attrs[0]; i++)
    if (device_attrs[i].attr == attr) {
      *value = device_attrs[i].value;
      return cudaSuccess;
    }
  return fail(cudaErrorInvalidValue);
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

/* Every code the emulation returns, with the real runtime's name and text. */
static const struct {
  cudaError_t e;
  const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge",
     "operation would result in a merge of separate capture sequences"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
     "dependency created on uncaptured work in another stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another thread"},
};

const char *cudaGetErrorString(cudaError_t error) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].e == error) return errors[i].text;
  return "unrecognized error code";
}

const char *cudaGetErrorName(cudaError_t error) {
  for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].e == error) return errors[i].name;
  return "cudaErrorUnknown";
}

/* Device memory is counted against the device's HS_EMU_DEVICE_MEM before any host memory is
 * taken, so that a request no GPU could hold (or one whose size would overflow) fails as on a
 * GPU, with cudaErrorMemoryAllocation. */
cudaError_t cudaMalloc(void **devPtr, size_t size) {
  if (!devPtr) return fail(cudaErrorInvalidValue);
  *devPtr = NULL;
  size_t limit = device_mem_limit();
  lock();
  cudaError_t e = unsafe_call();
  if (e != cudaSuccess) {
    unlock();
    return fail(e);
  }
  if (size == 0) {
    unlock();
    return cudaSuccess;
  }
  int dev = cur_dev;
  size_t free_bytes = limit > live_bytes[dev] ? limit - live_bytes[dev] : 0;
  if (size > free_bytes || size > SIZE_MAX - 255 || (size + 255) / 256 * 256 > free_bytes) {
    unlock();
    return fail(cudaErrorMemoryAllocation);
  }
  size_t rounded = (size + 255) / 256 * 256;
  live_bytes[dev] += rounded;
  unlock();
  char *p = aligned_alloc(256, rounded);
  if (p) memset(p, 0xff, rounded); /* device memory is not initialised: NaN floats */
  lock();
  if (p && nallocs == cap_allocs) {
    size_t cap = cap_allocs ? 2 * cap_allocs : 64;
    emu_alloc *a = realloc(allocs, cap * sizeof *a);
    if (a) {
      allocs = a;
      cap_allocs = cap;
    } else {
      free(p);
      p = NULL;
    }
  }
  if (!p) {
    live_bytes[dev] -= rounded;
    unlock();
    return fail(cudaErrorMemoryAllocation);
  }
  allocs[nallocs++] = (emu_alloc){.base = p, .n = size, .charged = rounded, .device = dev, .live = 1};
  unlock();
  *devPtr = p;
  return cudaSuccess;
}

/* Waits for the work of every stream of the allocation's device first (bounded, as every wait
 * here): "Managing memory allocations using cudaMalloc and cudaFree causes the GPU to synchronize
 * across all executing CUDA streams" (programming guide, "Stream-Ordered Memory Allocator").
 * So a free while a kernel that never ends is queued (an NCCL collective whose peer is gone,
 * not aborted) is a violation: on a GPU it would not return. Work enqueued later that uses the
 * memory is reported when it runs. */
cudaError_t cudaFree(void *devPtr) {
  if (!devPtr) return cudaSuccess;
  lock();
  cudaError_t e = unsafe_call();
  if (e != cudaSuccess) {
    unlock();
    return fail(e);
  }
  const emu_alloc *a = find_alloc(devPtr, 1);
  if (a) {
    int dev = a->device;
    for (struct CUstream_st *t = all_streams; t; t = t->next_all)
      if (t->device == dev) wait_ticket(t, t->enq, "cudaFree"); /* destroyed ones still drain */
  }
  emu_alloc *hit = NULL;
  int freed_before = 0;
  for (size_t i = 0; i < nallocs; i++)
    if (allocs[i].base == devPtr) {
      if (allocs[i].live) hit = &allocs[i];
      else freed_before = 1;
    }
  if (!hit)
    hs_emu_violation("cudaFree(%p): %s", devPtr,
                     freed_before ? "freed twice" : "not a pointer that cudaMalloc returned (host memory?)");
  hit->live = 0;
  live_bytes[hit->device] -= hit->charged;
  unlock();
  free(devPtr);
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
  if (!pStream || (flags != cudaStreamDefault && flags != cudaStreamNonBlocking)) return fail(cudaErrorInvalidValue);
  if (device_count() == 0) return fail(cudaErrorNoDevice);
  lock();
  struct CUstream_st *s = stream_new(cur_dev, flags == cudaStreamNonBlocking, 0);
  unlock();
  if (!s) return fail(cudaErrorMemoryAllocation);
  *pStream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream) { return cudaStreamCreateWithFlags(pStream, cudaStreamDefault); }

/* Returns at once; the executor finishes the stream's work, then ends. A capturing stream is not
 * destroyed: its capture must be ended first (cudaStreamIsCapturing: "The capture sequence must
 * be terminated with cudaStreamEndCapture on the stream where it was initiated in order to
 * continue using stream"). */
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (special(stream)) return fail(cudaErrorInvalidResourceHandle);
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaStreamDestroy");
  check_not_held(s, "cudaStreamDestroy");
  if (s->cap) {
    s->cap->invalid = 1;
    unlock();
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  s->magic = STREAM_DEAD;
  s->destroyed = 1;
  pthread_cond_broadcast(&cv);
  unlock();
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaStreamQuery");
  check_not_held(s, "cudaStreamQuery");
  cudaError_t e = sync_gate(s);
  if (e != cudaSuccess) {
    unlock();
    return fail(e);
  }
  int idle = s->done == s->enq;
  unlock();
  return idle ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaStreamSynchronize");
  check_not_held(s, "cudaStreamSynchronize");
  cudaError_t e = sync_gate(s);
  if (e == cudaSuccess) wait_ticket(s, s->enq, "cudaStreamSynchronize");
  unlock();
  return e == cudaSuccess ? e : fail(e);
}

/* "It is also invalid to query the execution status of or synchronize a broader handle which
 * encompasses an active stream capture, such as a device or context handle when any associated
 * stream is in capture mode" (programming guide): in any mode, from any thread. */
cudaError_t cudaDeviceSynchronize(void) {
  lock();
  int dev = cur_dev;
  int capturing = 0;
  for (struct CUstream_st *s = all_streams; s; s = s->next_all)
    if (s->cap && s->device == dev) {
      s->cap->invalid = 1;
      capturing = 1;
    }
  cudaError_t e = capturing ? cudaErrorStreamCaptureUnsupported : unsafe_call();
  /* Not a check of held work: another thread's device-wide wait is no call related to NCCL's
   * operation (it waits for what is enqueued, as on a GPU). */
  if (e == cudaSuccess)
    for (struct CUstream_st *s = all_streams; s; s = s->next_all)
      if (s->device == dev) wait_ticket(s, s->enq, "cudaDeviceSynchronize");
  unlock();
  return e == cudaSuccess ? e : fail(e);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  if (!event || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess)))
    return fail(cudaErrorInvalidValue);
  struct CUevent_st *e = calloc(1, sizeof *e);
  if (!e) return fail(cudaErrorMemoryAllocation);
  e->magic = EVENT_LIVE;
  e->device = cur_dev;
  e->flags = flags;
  lock();
  e->next_all = all_events;
  all_events = e;
  unlock();
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }

/* Returns at once, even while the event's work is pending (as documented). */
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  lock();
  struct CUevent_st *e = event_of(event, "cudaEventDestroy");
  e->magic = EVENT_DEAD;
  unlock();
  return cudaSuccess;
}

/* Captures the work enqueued on stream so far; the event and the stream must be of one device
 * (programming guide, "Stream and Event Behavior"). On a capturing stream the event becomes a
 * captured event, for waits of the same capture sequence; launches of the graph do not record it
 * (only cudaEventRecordExternal would make an event record node). */
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  lock();
  struct CUevent_st *e = event_of(event, "cudaEventRecord");
  struct CUstream_st *s = stream_of(stream, "cudaEventRecord");
  check_not_held(s, "cudaEventRecord");
  if (e->device != s->device) {
    unlock();
    return fail(cudaErrorInvalidResourceHandle);
  }
  emu_capture *cap;
  cudaError_t err = work_gate(s, &cap);
  if (err == cudaSuccess && cap) {
    e->cap_id = cap->id;
    e->recorded = 1;
  } else if (err == cudaSuccess) {
    emu_op *op = op_new(OP_MARK);
    op->ev = e;
    op->ev_gen = ++e->gen;
    e->s = s;
    e->ticket = enqueue(s, op);
    e->recorded = 1;
    e->cap_id = 0;
  }
  unlock();
  return err == cudaSuccess ? err : fail(err);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  lock();
  struct CUevent_st *e = event_of(event, "cudaEventQuery");
  cudaError_t err = event_gate(e);
  int done = err != cudaSuccess || !e->recorded || e->s->done >= e->ticket;
  unlock();
  if (err != cudaSuccess) return fail(err);
  return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  lock();
  struct CUevent_st *e = event_of(event, "cudaEventSynchronize");
  cudaError_t err = event_gate(e);
  if (err == cudaSuccess && e->recorded) wait_ticket(e->s, e->ticket, "cudaEventSynchronize");
  unlock();
  return err == cudaSuccess ? err : fail(err);
}

/* As documented: cudaErrorInvalidResourceHandle when either event was never recorded or was made
 * with cudaEventDisableTiming, cudaErrorNotReady while either has not completed. */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return fail(cudaErrorInvalidValue);
  if (!start || !end) return fail(cudaErrorInvalidResourceHandle);
  lock();
  struct CUevent_st *a = event_of(start, "cudaEventElapsedTime");
  struct CUevent_st *b = event_of(end, "cudaEventElapsedTime");
  cudaError_t err = cudaSuccess;
  if ((a->flags | b->flags) & cudaEventDisableTiming) err = cudaErrorInvalidResourceHandle;
  else if (!a->recorded || !b->recorded) err = cudaErrorInvalidResourceHandle;
  else if (a->cap_id || b->cap_id) err = cudaErrorCapturedEvent;
  else if (a->s->done < a->ticket || b->s->done < b->ticket) err = cudaErrorNotReady;
  else *ms = (float)((b->t - a->t) * 1e3);
  unlock();
  return err == cudaSuccess ? err : fail(err);
}

/* In a capture, a wait on an event captured in the same sequence adds nothing (the sequence is
 * one stream, in order); a wait on any other recorded event breaks the capture's isolation
 * (programming guide: "It is invalid to merge two separate capture graphs by waiting on a
 * captured event from a stream which is being captured and is associated with a different
 * capture graph than the event. It is invalid to wait on a non-captured event from a stream which
 * is being captured without specifying the cudaEventWaitExternal flag"). */
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  if (flags & ~(unsigned)cudaEventWaitExternal) return fail(cudaErrorInvalidValue);
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaStreamWaitEvent");
  struct CUevent_st *e = event_of(event, "cudaStreamWaitEvent");
  check_not_held(s, "cudaStreamWaitEvent");
  emu_capture *ecap = e->cap_id ? capture_by_id(e->cap_id) : NULL;
  cudaError_t err = cudaSuccess;
  if (s->cap) {
    if (s->cap->invalid) err = cudaErrorStreamCaptureInvalidated;
    else if (flags & cudaEventWaitExternal) not_modelled("cudaStreamWaitEvent with cudaEventWaitExternal");
    else if (e->cap_id == s->cap->id) err = cudaSuccess;
    else if (ecap) err = cudaErrorStreamCaptureMerge;
    else if (e->cap_id) err = cudaErrorCapturedEvent;
    else if (e->recorded) err = cudaErrorStreamCaptureIsolation;
    if (err != cudaSuccess && err != cudaErrorStreamCaptureInvalidated) {
      s->cap->invalid = 1;
      if (ecap) ecap->invalid = 1;
    }
  } else {
    /* CU_EVENT_WAIT_EXTERNAL: "This flag is invalid outside of stream capture" (cuda.h). */
    if (flags & cudaEventWaitExternal) err = cudaErrorInvalidValue;
    else if (ecap)
      not_modelled("a stream that is not capturing waits on an event of a capture under way (it would join the "
                   "capture)");
    else if (e->cap_id) err = cudaErrorCapturedEvent;
    else err = legacy_conflict(s);
    if (err == cudaSuccess && e->recorded) {
      emu_op *op = op_new(OP_MARK);
      add_dep(op, e->s, e->ticket);
      enqueue(s, op);
    }
  }
  unlock();
  return err == cudaSuccess ? err : fail(err);
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData) {
  if (!fn) return fail(cudaErrorInvalidValue);
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaLaunchHostFunc");
  check_not_held(s, "cudaLaunchHostFunc");
  emu_capture *cap;
  cudaError_t e = work_gate(s, &cap);
  if (e == cudaSuccess && cap) {
    nodes_push(&cap->nodes, (emu_node){.kind = OP_FN, .work = work_new(fn, userData, NULL)});
  } else if (e == cudaSuccess) {
    emu_op *op = op_new(OP_FN);
    op->fn = fn;
    op->arg = userData;
    enqueue(s, op);
  }
  unlock();
  return e == cudaSuccess ? e : fail(e);
}

/* Checks the ends of a copy against the registry (mu held): device ends must be device memory
 * of n bytes, host ends must not be device memory (a kind that contradicts the pointers is a
 * bug on a GPU, even where it happens to work). */
static emu_op *copy_op(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, const char *api) {
  int ddev = is_device_ptr(dst), sdev = is_device_ptr(src);
  if (kind == cudaMemcpyDefault) kind = ddev ? (sdev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                             : (sdev ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  int want_d = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  int want_s = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (want_d != ddev || (want_d && !find_alloc(dst, n)))
    hs_emu_violation("%s(kind %d): destination %p (%zu bytes) is %s", api, (int)kind, dst, n,
                     want_d ? "not device memory of that size" : "device memory");
  if (want_s != sdev || (want_s && !find_alloc(src, n)))
    hs_emu_violation("%s(kind %d): source %p (%zu bytes) is %s", api, (int)kind, src, n,
                     want_s ? "not device memory of that size" : "device memory");
  emu_op *op = op_new(OP_COPY);
  op->dst = dst;
  op->src = src;
  op->n = n;
  op->dst_dev = want_d;
  op->src_dev = want_s;
  return op;
}

/* Asynchronous. Pageable host memory (all host memory here: nothing is pinned) is read when the
 * copy runs, as pinned memory would be (the stricter of the documented behaviours: the caller
 * keeps the buffer until the copy is done), and a copy to it is synchronous with the host ("for
 * transfers between device memory and pageable host memory, the function might be synchronous
 * with respect to host"). In a capture only copies between device buffers are recorded: one with
 * a pageable end cannot be part of a graph (it is staged or synchronous with the host at the
 * call), and fails as an unsupported operation during capture. */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaMemcpyAsync");
  check_not_held(s, "cudaMemcpyAsync");
  emu_op *op = copy_op(dst, src, count, kind, "cudaMemcpyAsync");
  emu_capture *cap;
  cudaError_t e = work_gate(s, &cap);
  if (e == cudaSuccess && cap && !(op->dst_dev && op->src_dev)) {
    cap->invalid = 1;
    e = cudaErrorStreamCaptureUnsupported;
  }
  if (e != cudaSuccess) {
    op_discard(op);
  } else if (cap) {
    nodes_push(&cap->nodes, (emu_node){.kind = OP_COPY, .dst = dst, .src = src, .n = count});
    op_discard(op);
  } else {
    int to_host = !op->dst_dev;
    uint64_t t = enqueue(s, op);
    if (to_host) wait_ticket(s, t, "cudaMemcpyAsync to pageable host memory");
  }
  unlock();
  return e == cudaSuccess ? e : fail(e);
}

/* On the legacy stream. From pageable memory to the device: the stream is synchronised, the
 * source staged, and the call returns before the copy has landed (the documented behaviour);
 * to the host: returns once the copy is done. */
cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind) {
  if (count == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  lock();
  struct CUstream_st *s = legacy_stream(cur_dev);
  emu_op *op = copy_op(dst, src, count, kind, "cudaMemcpy");
  cudaError_t e = legacy_conflict(s);
  if (e == cudaSuccess) e = unsafe_call();
  if (e != cudaSuccess) {
    op_discard(op);
  } else if (op->dst_dev && !op->src_dev) {
    wait_ticket(s, enqueue(s, op_new(OP_MARK)), "cudaMemcpy");
    op->staged = malloc(count);
    if (!op->staged) hs_emu_violation("out of memory");
    memcpy(op->staged, src, count);
    enqueue(s, op);
  } else if (!op->dst_dev) {
    wait_ticket(s, enqueue(s, op), "cudaMemcpy");
  } else {
    enqueue(s, op);
  }
  unlock();
  return e == cudaSuccess ? e : fail(e);
}

/* The memory a memset fills must be device memory of that size (mu held): on a GPU a host
 * pointer faults and an overrun writes a neighbour's memory. */
static void check_memset(const void *devPtr, size_t count, const char *api) {
  if (!find_alloc(devPtr, count))
    hs_emu_violation("%s(%p, %zu bytes): not device memory of that size (%s)", api, devPtr, count,
                     is_device_ptr(devPtr) ? "it overruns its allocation" : "host memory, or freed");
}

/* Asynchronous, as documented; the bytes are written when the operation runs. */
cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (!devPtr) return fail(cudaErrorInvalidValue);
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaMemsetAsync");
  check_not_held(s, "cudaMemsetAsync");
  check_memset(devPtr, count, "cudaMemsetAsync");
  emu_capture *cap;
  cudaError_t e = work_gate(s, &cap);
  if (e == cudaSuccess && cap) {
    nodes_push(&cap->nodes, (emu_node){.kind = OP_MEMSET, .dst = devPtr, .n = count, .value = (unsigned char)value});
  } else if (e == cudaSuccess) {
    emu_op *op = op_new(OP_MEMSET);
    op->dst = devPtr;
    op->n = count;
    op->value = (unsigned char)value;
    op->dst_dev = 1;
    enqueue(s, op);
  }
  unlock();
  return e == cudaSuccess ? e : fail(e);
}

/* On the legacy stream; "asynchronous with respect to the host unless devPtr refers to pinned
 * host memory" (never here). */
cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
  if (count == 0) return cudaSuccess;
  if (!devPtr) return fail(cudaErrorInvalidValue);
  lock();
  struct CUstream_st *s = legacy_stream(cur_dev);
  check_memset(devPtr, count, "cudaMemset");
  cudaError_t e = legacy_conflict(s);
  if (e == cudaSuccess) e = unsafe_call();
  if (e == cudaSuccess) {
    emu_op *op = op_new(OP_MEMSET);
    op->dst = devPtr;
    op->n = count;
    op->value = (unsigned char)value;
    op->dst_dev = 1;
    enqueue(s, op);
  }
  unlock();
  return e == cudaSuccess ? e : fail(e);
}

/* --- stream capture and graphs -------------------------------------------------------------- */

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
  if (!mode || (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
                *mode != cudaStreamCaptureModeRelaxed))
    return fail(cudaErrorInvalidValue);
  enum cudaStreamCaptureMode old = thread_mode;
  thread_mode = *mode;
  *mode = old;
  return cudaSuccess;
}

/* "Capture may not be initiated if stream is cudaStreamLegacy ... it may only be initiated if
 * the stream is not already in capture mode." The emulation runs cudaStreamPerThread as the
 * legacy stream, so a capture of it is not modelled. */
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return fail(cudaErrorInvalidValue);
  if (stream == cudaStreamPerThread) not_modelled("a capture of cudaStreamPerThread");
  if (special(stream)) return fail(cudaErrorStreamCaptureUnsupported);
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaStreamBeginCapture");
  check_not_held(s, "cudaStreamBeginCapture");
  if (s->cap) {
    unlock();
    return fail(cudaErrorIllegalState);
  }
  emu_capture *c = calloc(1, sizeof *c);
  if (!c) hs_emu_violation("out of memory");
  c->id = ++capture_ids;
  c->thread = pthread_self();
  c->mode = mode;
  s->cap = c;
  unlock();
  return cudaSuccess;
}

/* "If the mode argument to cudaStreamBeginCapture was not cudaStreamCaptureModeRelaxed, this call
 * must be from the same thread" (cudaErrorStreamCaptureWrongThread; the capture goes on); "If
 * capture was invalidated, due to a violation of the rules of stream capture, then a NULL graph
 * will be returned", with cudaErrorStreamCaptureInvalidated. A stream that is not capturing is
 * cudaErrorIllegalState. */
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
  if (!pGraph) return fail(cudaErrorInvalidValue);
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaStreamEndCapture");
  emu_capture *c = s->cap;
  if (!c) {
    unlock();
    return fail(cudaErrorIllegalState);
  }
  if (c->mode != cudaStreamCaptureModeRelaxed && !pthread_equal(c->thread, pthread_self())) {
    unlock();
    return fail(cudaErrorStreamCaptureWrongThread);
  }
  s->cap = NULL;
  *pGraph = NULL;
  struct CUgraph_st *g = NULL;
  if (!c->invalid) {
    g = calloc(1, sizeof *g);
    if (!g) hs_emu_violation("out of memory");
    g->magic = GRAPH_LIVE;
    g->nodes = c->nodes;
    c->nodes = (emu_nodes){0};
    g->next_all = all_graphs;
    all_graphs = g;
  }
  unlock();
  nodes_drop(&c->nodes); /* an invalidated capture's work: nothing will run it */
  free(c);
  if (!g) return fail(cudaErrorStreamCaptureInvalidated);
  *pGraph = g;
  return cudaSuccess;
}

/* On the legacy stream while a blocking stream of its device captures:
 * cudaErrorStreamCaptureImplicit, and "The blocking stream capture is not invalidated". */
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus) {
  if (!pCaptureStatus) return fail(cudaErrorInvalidValue);
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaStreamIsCapturing");
  int implicit = 0;
  if (s->legacy)
    for (struct CUstream_st *t = all_streams; t; t = t->next_all)
      implicit |= t->cap && !t->legacy && !t->nonblocking && t->device == s->device;
  if (!implicit)
    *pCaptureStatus = !s->cap           ? cudaStreamCaptureStatusNone
                      : s->cap->invalid ? cudaStreamCaptureStatusInvalidated
                                        : cudaStreamCaptureStatusActive;
  unlock();
  return implicit ? fail(cudaErrorStreamCaptureImplicit) : cudaSuccess;
}

static struct CUgraph_st *graph_of(cudaGraph_t g, const char *api) {
  for (struct CUgraph_st *t = all_graphs; t; t = t->next_all)
    if (t == g) {
      if (t->magic == GRAPH_DEAD) hs_emu_violation("%s: graph %p used after cudaGraphDestroy", api, (void *)g);
      return t;
    }
  hs_emu_violation("%s: %p is not a graph", api, (void *)g);
}

static struct CUgraphExec_st *exec_of(cudaGraphExec_t x, const char *api) {
  for (struct CUgraphExec_st *t = all_execs; t; t = t->next_all)
    if (t == x) {
      if (t->magic == EXEC_DEAD)
        hs_emu_violation("%s: executable graph %p used after cudaGraphExecDestroy", api, (void *)x);
      return t;
    }
  hs_emu_violation("%s: %p is not an executable graph", api, (void *)x);
}

/* The executable graph is a copy of the graph: either may be destroyed first. Device-launch and
 * upload instantiation are not modelled; the other documented flags change nothing here (the
 * emulation has no allocation nodes or priorities). */
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  const unsigned long long known = cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUpload |
                                   cudaGraphInstantiateFlagDeviceLaunch | cudaGraphInstantiateFlagUseNodePriority;
  if (!pGraphExec || !graph || (flags & ~known)) return fail(cudaErrorInvalidValue);
  if (flags & (cudaGraphInstantiateFlagUpload | cudaGraphInstantiateFlagDeviceLaunch))
    not_modelled("cudaGraphInstantiate with cudaGraphInstantiateFlagUpload or cudaGraphInstantiateFlagDeviceLaunch");
  struct CUgraphExec_st *x = calloc(1, sizeof *x);
  if (!x) return fail(cudaErrorMemoryAllocation);
  lock();
  struct CUgraph_st *g = graph_of(graph, "cudaGraphInstantiate");
  x->magic = EXEC_LIVE;
  nodes_append(&x->nodes, &g->nodes);
  x->next_all = all_execs;
  all_execs = x;
  unlock();
  *pGraphExec = x;
  return cudaSuccess;
}

/* "Each launch is ordered behind both any previous work in stream and any previous launches of
 * graphExec." On a capturing stream the graph's work is recorded into the capture. */
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  if (!graphExec) return fail(cudaErrorInvalidValue);
  lock();
  struct CUgraphExec_st *x = exec_of(graphExec, "cudaGraphLaunch");
  struct CUstream_st *s = stream_of(stream, "cudaGraphLaunch");
  check_not_held(s, "cudaGraphLaunch");
  emu_capture *cap;
  cudaError_t e = work_gate(s, &cap);
  if (e == cudaSuccess && cap) {
    nodes_append(&cap->nodes, &x->nodes);
  } else if (e == cudaSuccess) {
    /* An empty graph is one mark, which still orders the launch behind the previous one. */
    size_t n = x->nodes.n;
    for (size_t i = 0; i < (n ? n : 1); i++) {
      emu_op *op = n ? op_of_node(&x->nodes.v[i]) : op_new(OP_MARK);
      if (i == 0 && x->last_s) add_dep(op, x->last_s, x->last_ticket);
      x->last_ticket = enqueue(s, op);
      x->last_s = s;
    }
  }
  unlock();
  return e == cudaSuccess ? e : fail(e);
}

/* Launches in flight keep their work: "If the executable graph is in-flight, it will not be
 * terminated, but rather freed asynchronously on completion" (cuda.h, cuGraphExecDestroy). */
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  if (!graphExec) return fail(cudaErrorInvalidValue);
  lock();
  struct CUgraphExec_st *x = exec_of(graphExec, "cudaGraphExecDestroy");
  x->magic = EXEC_DEAD;
  emu_nodes nodes = x->nodes;
  x->nodes = (emu_nodes){0};
  unlock();
  nodes_drop(&nodes);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!graph) return fail(cudaErrorInvalidValue);
  lock();
  struct CUgraph_st *g = graph_of(graph, "cudaGraphDestroy");
  g->magic = GRAPH_DEAD;
  emu_nodes nodes = g->nodes;
  g->nodes = (emu_nodes){0};
  unlock();
  nodes_drop(&nodes);
  return cudaSuccess;
}
