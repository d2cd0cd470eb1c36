/* fake_cudart: an emulated CUDA runtime for deviceless tests (see gpu_emu.h for what it
 * promises). It defines the runtime API functions that the code under test calls, with the
 * declarations of the real <cuda_runtime_api.h>, so that code compiles unchanged against it.
 *
 * Model. One process-wide lock (mu) and condition variable (cv) guard every stream, event and
 * allocation: the emulation is about ordering, not speed. A stream is a FIFO of operations with
 * two counters, enq (operations enqueued) and done (operations finished); its executor thread
 * runs the head once every dependency (stream, ticket) of it is met (that stream's done has
 * reached the ticket), after a random delay. An event records (stream, ticket); cudaEventQuery
 * compares the ticket with done. cudaStreamWaitEvent enqueues an empty operation that depends on
 * the event's (stream, ticket). The legacy default stream of each device synchronises with the
 * device's blocking streams (created without cudaStreamNonBlocking) through the same
 * dependencies, as the programming guide describes.
 *
 * Handles are never freed: a destroyed stream or event keeps its memory with a poisoned magic, so
 * that a later use is reported (the documentation calls it undefined behaviour) rather than read
 * from freed memory. The process ends with its executors idle; they are detached. */
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

enum {
  STREAM_LIVE = 0x5354524du,
  STREAM_DEAD = 0xdead5354u,
  EVENT_LIVE = 0x45564e54u,
  EVENT_DEAD = 0xdead4556u,
};

typedef struct emu_dep {
  struct CUstream_st *s;
  uint64_t ticket; /* met once s->done >= ticket */
} emu_dep;

enum { OP_MARK = 0, OP_FN = 1, OP_COPY = 2 };

typedef struct emu_op {
  int kind;
  void (*fn)(void *); /* OP_FN */
  void *arg;
  void *dst; /* OP_COPY */
  const void *src;
  size_t n;
  int dst_dev, src_dev; /* which ends are device memory, checked when the copy runs */
  void *staged;         /* a copy of pageable memory taken at the call (freed after) */
  emu_dep *deps;
  int ndeps;
  struct emu_op *next;
} emu_op;

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
  struct CUstream_st *next_all;
};

struct CUevent_st {
  unsigned magic;
  int device;
  int recorded;
  struct CUstream_st *s;
  uint64_t ticket;
  struct CUevent_st *next_all;
};

typedef struct emu_alloc {
  char *base;
  size_t n;
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
static emu_alloc *allocs;
static size_t nallocs, cap_allocs;
static hs_emu_nccl_stats stats;

static _Thread_local int cur_dev;
static _Thread_local cudaError_t last_error = cudaSuccess;
static _Thread_local uint64_t rng_state;

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

int hs_emu_current_device(void) { return cur_dev; }

static cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

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
    if (op->kind == OP_FN) op->fn(op->arg);
    else if (op->kind == OP_COPY) run_copy(op);
    lock();
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    s->done++;
    free(op->deps);
    free(op->staged);
    free(op);
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
  struct CUstream_st *t = NULL;
  if (special(s)) t = legacy_stream(cur_dev);
  else
    for (struct CUstream_st *u = all_streams; u; u = u->next_all)
      if (u == s && u->magic == STREAM_LIVE) t = u;
  if (!t) {
    unlock();
    return cudaErrorInvalidResourceHandle;
  }
  emu_op *op = op_new(OP_FN);
  op->fn = fn;
  op->arg = arg;
  enqueue(t, op);
  unlock();
  return cudaSuccess;
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

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

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
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
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

cudaError_t cudaMalloc(void **devPtr, size_t size) {
  if (!devPtr) return fail(cudaErrorInvalidValue);
  *devPtr = NULL;
  if (size == 0) return cudaSuccess;
  size_t rounded = (size + 255) / 256 * 256;
  char *p = aligned_alloc(256, rounded);
  if (!p) return fail(cudaErrorMemoryAllocation);
  memset(p, 0xff, rounded); /* device memory is not initialised: NaN floats */
  lock();
  if (nallocs == cap_allocs) {
    size_t cap = cap_allocs ? 2 * cap_allocs : 64;
    emu_alloc *a = realloc(allocs, cap * sizeof *a);
    if (!a) {
      unlock();
      free(p);
      return fail(cudaErrorMemoryAllocation);
    }
    allocs = a;
    cap_allocs = cap;
  }
  allocs[nallocs++] = (emu_alloc){.base = p, .n = size, .device = cur_dev, .live = 1};
  unlock();
  *devPtr = p;
  return cudaSuccess;
}

/* Frees at once, without waiting for the device: work still queued that uses the memory is
 * reported when it runs. */
cudaError_t cudaFree(void *devPtr) {
  if (!devPtr) return cudaSuccess;
  lock();
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

/* Returns at once; the executor finishes the stream's work, then ends. */
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (special(stream)) return fail(cudaErrorInvalidResourceHandle);
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaStreamDestroy");
  check_not_held(s, "cudaStreamDestroy");
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
  int idle = s->done == s->enq;
  unlock();
  return idle ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaStreamSynchronize");
  check_not_held(s, "cudaStreamSynchronize");
  wait_ticket(s, s->enq, "cudaStreamSynchronize");
  unlock();
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  lock();
  int dev = cur_dev;
  /* Not a check of held work: another thread's device-wide wait is no call related to NCCL's
   * operation (it waits for what is enqueued, as on a GPU). */
  for (struct CUstream_st *s = all_streams; s; s = s->next_all)
    if (s->device == dev) wait_ticket(s, s->enq, "cudaDeviceSynchronize");
  unlock();
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  if (!event || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess)))
    return fail(cudaErrorInvalidValue);
  struct CUevent_st *e = calloc(1, sizeof *e);
  if (!e) return fail(cudaErrorMemoryAllocation);
  e->magic = EVENT_LIVE;
  e->device = cur_dev;
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
 * (programming guide, "Stream and Event Behavior"). */
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
  e->s = s;
  e->ticket = enqueue(s, op_new(OP_MARK));
  e->recorded = 1;
  unlock();
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  lock();
  struct CUevent_st *e = event_of(event, "cudaEventQuery");
  int done = !e->recorded || e->s->done >= e->ticket;
  unlock();
  return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  lock();
  struct CUevent_st *e = event_of(event, "cudaEventSynchronize");
  if (e->recorded) wait_ticket(e->s, e->ticket, "cudaEventSynchronize");
  unlock();
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (!event) return fail(cudaErrorInvalidResourceHandle);
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaStreamWaitEvent");
  struct CUevent_st *e = event_of(event, "cudaStreamWaitEvent");
  check_not_held(s, "cudaStreamWaitEvent");
  if (e->recorded) {
    emu_op *op = op_new(OP_MARK);
    add_dep(op, e->s, e->ticket);
    enqueue(s, op);
  }
  unlock();
  (void)flags;
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData) {
  if (!fn) return fail(cudaErrorInvalidValue);
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaLaunchHostFunc");
  check_not_held(s, "cudaLaunchHostFunc");
  emu_op *op = op_new(OP_FN);
  op->fn = fn;
  op->arg = userData;
  enqueue(s, op);
  unlock();
  return cudaSuccess;
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
 * with respect to host"). */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (!dst || !src) return fail(cudaErrorInvalidValue);
  lock();
  struct CUstream_st *s = stream_of(stream, "cudaMemcpyAsync");
  check_not_held(s, "cudaMemcpyAsync");
  emu_op *op = copy_op(dst, src, count, kind, "cudaMemcpyAsync");
  int to_host = !op->dst_dev;
  uint64_t t = enqueue(s, op);
  if (to_host) wait_ticket(s, t, "cudaMemcpyAsync to pageable host memory");
  unlock();
  return cudaSuccess;
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
  if (op->dst_dev && !op->src_dev) {
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
  return cudaSuccess;
}
