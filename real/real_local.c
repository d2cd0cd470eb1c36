/* The local communication backend: workers are threads of one process on one GPU, each net on
 * its own green context when the device names a partition (see real_comm.h).
 *
 * Devices: cfg.device is the workers' device, "cuda:I" or "cuda:I/sm=N". The runtime opens
 * every worker's net on that device, so on "cuda:I/sm=N" each worker runs in a green context of
 * N SMs of its own (nn_cuda.c); the backend itself works in GPU I's primary context.
 *
 * All-reduce (buffers are device memory: the nets' hs_net_grads/hs_net_params): a rendezvous
 * slot per operation id, as the cpu backend's. Each participant, on its own thread, records an
 * event on the stream of the net that owns its buffer (hs_net_cuda_record_owner: the net is
 * found from the buffer's address, so nothing depends on which context the thread has current;
 * the gradient it is about to share may still be in flight on that stream) and registers its
 * buffer, weight and event. The last to arrive makes the primary context current (and restores
 * the thread's own afterwards), orders the backend's one reduction stream after every
 * participant's event (cudaStreamWaitEvent), runs the weighted sum (nn_real_kernels.h) into a
 * scratch vector, copies the sum back into every participant's buffer, records a completion
 * event and polls it until the device is done; then every participant returns, and its net's
 * later work, enqueued after that, sees the sum. Scratch vectors are pooled (one per operation
 * in flight).
 *
 * Memory: the nets' buffers and the scratch vectors are device memory of one GPU; green
 * contexts share their device's memory with its primary context, so one kernel reads them all.
 *
 * Send/recv and barrier: the runtime hands the parameter server's traffic over in host memory
 * (it applies updates to a host model), so those go through an inner cpu backend (real_cpu.c):
 * host mailboxes, no device copy.
 *
 * Every wait is bounded by cfg.timeout_s (the device work too: completion is polled, never
 * waited for without a deadline) and abort wakes them all. A participant that gives up before
 * everyone has arrived fails the operation for all of them, and nothing starts after abort, so
 * that no reduction runs over the buffer and event of a participant that has left; once all have
 * arrived, each waits for the reduction (itself bounded) to end. NOT RUN ON A GPU YET: this file
 * compiles and links here (no GPU on the machines that wrote it); see docs/gpu.md. */
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

#if HETSIM_HAVE_CUDA

#include <cuda_runtime_api.h>

#include "nn/nn_cuda.h"
#include "nn/nn_cudalib.h"
#include "nn/nn_real_kernels.h"

typedef struct lc_slot {
  uint64_t op;
  int nranks, arrived, departed;
  int done;        /* the sum is in every participant's buffer */
  int failed;      /* the reduction could not run: err says why */
  int64_t n;
  const float **src;
  float *w;
  cudaEvent_t *ev; /* each participant's capture of its context, owned by that participant */
  float *sum;      /* a pooled scratch vector, while the reduction runs */
  hs_diag err;     /* why, when failed */
  struct lc_slot *next;
} lc_slot;

typedef struct lc_buf {
  float *p;
  struct lc_buf *next;
} lc_buf;

struct hs_real_comm {
  hs_real_comm_config cfg;
  char device[64];
  hs_real_comm *host; /* the inner cpu backend: send, recv, barrier */
  const hs_cudrv_api *drv;
  CUdevice dev;
  int ordinal;
  CUcontext primary;
  int retained;
  cudaStream_t stream; /* in the primary context */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int aborted;
  int wedged;      /* the reduction stream did not drain after a failure: its work may still use
                      the scratch vectors and the nets' buffers, so nothing of it is freed */
  lc_slot *slots;
  lc_buf *pool;
};

static int drv_fail(const hs_real_comm *c, CUresult r, const char *what, hs_diag *d) {
  char t[HS_CUDRV_ERROR_TEXT];
  return hs_diag_set(d, HS_ERUNTIME, "local comm (%s): %s: %s", c->device, what,
                     hs_cudrv_error_text(c->drv, r, t, sizeof t));
}

static int rt_fail(const hs_real_comm *c, cudaError_t e, const char *what, hs_diag *d) {
  return hs_diag_set(d, e == cudaErrorMemoryAllocation ? HS_ENOMEM : HS_ERUNTIME,
                     "local comm (%s): %s: %s", c->device, what, cudaGetErrorString(e));
}

/* "cuda:I" or "cuda:I/sm=N" -> I. */
static int device_ordinal(const char *dev, int *ordinal, hs_diag *d) {
  const char *why = "expected \"cuda:I\" or \"cuda:I/sm=N\"";
  if (!dev || strncmp(dev, "cuda:", 5) != 0)
    return hs_diag_set(d, HS_EINVAL, "--backend local: device \"%s\": %s", dev ? dev : "", why);
  char *end;
  long v = strtol(dev + 5, &end, 10);
  if (end == dev + 5 || v < 0 || v > 1023 || (*end && strncmp(end, "/sm=", 4) != 0))
    return hs_diag_set(d, HS_EINVAL, "--backend local: device \"%s\": %s", dev, why);
  *ordinal = (int)v;
  return 0;
}

static void local_close(hs_real_comm *c) {
  if (!c) return;
  if (c->host) hs_real_comm_cpu.close(c->host);
  while (c->slots) { /* only after a failed run: operations left half-way */
    lc_slot *s = c->slots;
    c->slots = s->next;
    free(s->src);
    free(s->w);
    free(s->ev);
    free(s);
  }
  /* A wedged stream (or one that does not drain now, within the run's timeout), or a device
   * another user left wedged (nn_cuda.h), keeps its scratch vectors and the primary context:
   * freeing either would wait for the device's work, which has not ended. They are left to the
   * process's exit. */
  if (c->wedged) hs_cuda_mark_wedged(c->ordinal);
  if (c->retained && !c->wedged && !hs_cuda_device_wedged(c->ordinal)) {
    CUcontext prev = NULL;
    (void)c->drv->cuCtxGetCurrent(&prev);
    if (c->drv->cuCtxSetCurrent(c->primary) == CUDA_SUCCESS) {
      if (c->stream && !hs_cuda_stream_drained(c->stream, c->cfg.timeout_s)) {
        c->wedged = 1;
        hs_cuda_mark_wedged(c->ordinal);
      }
      if (c->stream) (void)cudaStreamDestroy(c->stream); /* returns at once; freed when idle */
      while (c->pool && !c->wedged) {
        lc_buf *b = c->pool;
        c->pool = b->next;
        (void)cudaFree(b->p);
        free(b);
      }
      (void)c->drv->cuCtxSetCurrent(prev);
    }
    if (!c->wedged) (void)c->drv->cuDevicePrimaryCtxRelease(c->dev);
  }
  while (c->pool) { /* the device memory is not freed here (a wedged stream, or no context) */
    lc_buf *b = c->pool;
    c->pool = b->next;
    free(b);
  }
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static int local_open(hs_real_comm **out, const hs_real_comm_config *cfg, hs_diag *d) {
  *out = NULL;
  if (cfg->world < 1 || cfg->n < 1)
    return hs_diag_set(d, HS_EINVAL, "local comm: world %d, %lld floats", cfg->world, (long long)cfg->n);
  int ordinal = -1, rc;
  if ((rc = device_ordinal(cfg->device, &ordinal, d))) return rc;
  hs_diag sub = {0};
  const hs_cudrv_api *drv = hs_cudrv_api_get(&sub);
  if (!drv)
    return hs_diag_set(d, HS_EUNSUPPORTED, "--backend local: no usable GPU driver: %s", sub.msg);
  int count = 0;
  if (drv->cuInit(0) != CUDA_SUCCESS || drv->cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1)
    return hs_diag_set(d, HS_EUNSUPPORTED, "--backend local: this machine has no usable GPU");
  if (ordinal >= count)
    return hs_diag_set(d, HS_EINVAL, "--backend local: device \"%s\": this machine has %d GPU%s",
                       cfg->device, count, count == 1 ? "" : "s");
  hs_real_comm *c = calloc(1, sizeof *c);
  if (!c) return hs_diag_set(d, HS_ENOMEM, "out of memory for the local comm backend");
  c->cfg = *cfg;
  snprintf(c->device, sizeof c->device, "%s", cfg->device);
  c->cfg.device = c->device;
  c->cfg.timeout_s = hs_real_timeout(c->cfg.timeout_s);
  c->drv = drv;
  pthread_mutex_init(&c->mu, NULL);
  hs_cond_init_monotonic(&c->cv);
  c->ordinal = ordinal;
  CUresult r = drv->cuDeviceGet(&c->dev, ordinal);
  if (r != CUDA_SUCCESS) {
    rc = drv_fail(c, r, "cuDeviceGet", d);
    goto fail;
  }
  if ((r = drv->cuDevicePrimaryCtxRetain(&c->primary, c->dev)) != CUDA_SUCCESS) {
    rc = drv_fail(c, r, "cuDevicePrimaryCtxRetain", d);
    goto fail;
  }
  c->retained = 1;
  CUcontext prev = NULL;
  (void)drv->cuCtxGetCurrent(&prev);
  if ((r = drv->cuCtxSetCurrent(c->primary)) != CUDA_SUCCESS) {
    rc = drv_fail(c, r, "cuCtxSetCurrent", d);
    goto fail;
  }
  cudaError_t e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
  (void)drv->cuCtxSetCurrent(prev);
  if (e != cudaSuccess) {
    c->stream = NULL;
    rc = rt_fail(c, e, "cudaStreamCreateWithFlags", d);
    goto fail;
  }
  hs_real_comm_config hc = *cfg;
  hc.device = NULL;
  if ((rc = hs_real_comm_cpu.open(&c->host, &hc, d))) goto fail;
  *out = c;
  return 0;
fail:
  local_close(c);
  return rc;
}

static void unlink_slot(hs_real_comm *c, lc_slot *s) {
  for (lc_slot **p = &c->slots; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  free(s->src);
  free(s->w);
  free(s->ev);
  free(s);
}

/* Runs the reduction of a complete slot on the reduction stream and waits for it (bounded);
 * called by the last participant to arrive, without mu. Returns 0 or the error, in s->err. */
static int reduce(hs_real_comm *c, lc_slot *s, const struct timespec *dl, hs_diag *d) {
  const hs_cudrv_api *drv = c->drv;
  CUcontext prev = NULL;
  (void)drv->cuCtxGetCurrent(&prev);
  CUresult r = drv->cuCtxSetCurrent(c->primary);
  if (r != CUDA_SUCCESS) return drv_fail(c, r, "cuCtxSetCurrent (primary context)", d);
  int rc = 0;
  cudaError_t e = cudaSuccess;
  float *sum = NULL;
  pthread_mutex_lock(&c->mu);
  lc_buf *b = c->pool;
  if (b) c->pool = b->next;
  pthread_mutex_unlock(&c->mu);
  if (!b) {
    b = calloc(1, sizeof *b);
    if (!b) rc = hs_diag_set(d, HS_ENOMEM, "out of memory for a scratch vector");
    else if ((e = cudaMalloc((void **)&b->p, (size_t)c->cfg.n * sizeof(float))) != cudaSuccess) {
      free(b);
      b = NULL;
      rc = rt_fail(c, e, "cudaMalloc (all-reduce scratch)", d);
    }
  }
  if (!rc && b) sum = b->p;
  else if (!rc) rc = hs_diag_set(d, HS_ENOMEM, "no scratch vector");
  for (int i = 0; !rc && i < s->nranks; i++)
    if ((e = cudaStreamWaitEvent(c->stream, s->ev[i], 0)) != cudaSuccess)
      rc = rt_fail(c, e, "cudaStreamWaitEvent", d);
  for (int k = 0; !rc && k < s->nranks; k += HS_RK_MAX_SRC) {
    int m = s->nranks - k < HS_RK_MAX_SRC ? s->nranks - k : HS_RK_MAX_SRC;
    if ((e = hs_rk_weighted_sum(sum, s->src + k, s->w + k, m, k > 0, s->n, c->stream)) != cudaSuccess)
      rc = rt_fail(c, e, "weighted-sum kernel", d);
  }
  for (int i = 0; !rc && i < s->nranks; i++)
    if ((e = cudaMemcpyAsync((void *)s->src[i], sum, (size_t)s->n * sizeof(float), cudaMemcpyDeviceToDevice,
                             c->stream)) != cudaSuccess)
      rc = rt_fail(c, e, "cudaMemcpyAsync (sum to a participant)", d);
  cudaEvent_t done = NULL;
  if (!rc && (e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming)) != cudaSuccess) {
    done = NULL;
    rc = rt_fail(c, e, "cudaEventCreate", d);
  }
  if (!rc && (e = cudaEventRecord(done, c->stream)) != cudaSuccess) rc = rt_fail(c, e, "cudaEventRecord", d);
  /* Bounded wait for the device; abort ends it too. */
  while (!rc) {
    e = cudaEventQuery(done);
    if (e == cudaSuccess) break;
    if (e != cudaErrorNotReady) {
      rc = rt_fail(c, e, "all-reduce on the device", d);
      break;
    }
    pthread_mutex_lock(&c->mu);
    int aborted = c->aborted;
    pthread_mutex_unlock(&c->mu);
    if (aborted) rc = hs_diag_set(d, HS_EINTR, "local all-reduce %llu: aborted", (unsigned long long)s->op);
    else if (hs_deadline_past(dl))
      rc = hs_diag_set(d, HS_ERUNTIME, "local all-reduce %llu: the device did not finish within %.3g s",
                       (unsigned long long)s->op, c->cfg.timeout_s);
    else nanosleep(&(struct timespec){0, 50000}, NULL);
  }
  if (done) (void)cudaEventDestroy(done);
  if (b) {
    /* After a failure the stream may still use the vector: it is freed once the device is done
     * with it (bounded), or else left allocated and the backend marked wedged, so that no later
     * all-reduce starts and local_close frees nothing the stream may still touch. */
    if (rc && hs_cuda_stream_drained(c->stream, c->cfg.timeout_s)) (void)cudaFree(b->p), free(b);
    else if (rc) {
      pthread_mutex_lock(&c->mu);
      c->wedged = 1;
      pthread_mutex_unlock(&c->mu);
      free(b);
      hs_diag why = *d;
      hs_diag_set(d, rc, "%s; the device did not finish the reduction's queued work within %.3g s more "
                  "(its memory is left allocated)", why.msg, c->cfg.timeout_s);
    } else {
      pthread_mutex_lock(&c->mu);
      b->next = c->pool;
      c->pool = b;
      pthread_mutex_unlock(&c->mu);
    }
  }
  (void)drv->cuCtxSetCurrent(prev);
  return rc;
}

static int local_allreduce(hs_real_comm *c, uint64_t op, int rank, float *buf, int64_t n,
                           const int *ranks, int nranks, const double *weights, hs_diag *d) {
  if (n < 1 || n > c->cfg.n || nranks < 1 || !buf)
    return hs_diag_set(d, HS_EINVAL, "local all-reduce %llu: %lld floats over %d ranks (buffers hold %lld)",
                       (unsigned long long)op, (long long)n, nranks, (long long)c->cfg.n);
  int me = -1;
  for (int i = 0; i < nranks; i++)
    if (ranks[i] == rank) me = i;
  if (me < 0) return hs_diag_set(d, HS_EINVAL, "local all-reduce %llu: rank %d is not a participant", (unsigned long long)op, rank);
  float wt = weights ? (float)weights[me] : 1.0f;
  struct timespec dl;
  hs_deadline_in(&dl, c->cfg.timeout_s);
  /* Capture what the net owning buf has enqueued so far (the gradient it is about to share may
   * still be in flight on its stream). The net is found from the buffer, not from whatever
   * context the calling thread happens to have current. */
  void *owner_ev = NULL;
  hs_diag od = {0};
  int orc = hs_net_cuda_record_owner(buf, &owner_ev, &od);
  if (orc)
    return hs_diag_set(d, orc == HS_ENOTFOUND ? HS_EINVAL : orc, "local all-reduce %llu on rank %d: %s",
                       (unsigned long long)op, rank, od.msg);
  cudaEvent_t ev = owner_ev;
  pthread_mutex_lock(&c->mu);
  if (c->aborted || c->wedged) {
    /* After abort no reduction may start: the participants that left have destroyed their
     * events, which a last arrival would otherwise hand to cudaStreamWaitEvent. Nor after a
     * reduction that the device never finished: the stream is still busy with it. */
    int wedged = c->wedged;
    pthread_mutex_unlock(&c->mu);
    (void)cudaEventDestroy(ev);
    if (wedged)
      return hs_diag_set(d, HS_ERUNTIME, "local all-reduce %llu: an earlier reduction never finished on the device",
                         (unsigned long long)op);
    return hs_diag_set(d, HS_EINTR, "local all-reduce %llu: aborted", (unsigned long long)op);
  }
  lc_slot *s = c->slots;
  while (s && s->op != op) s = s->next;
  if (!s) {
    s = calloc(1, sizeof *s);
    if (s) {
      s->src = calloc((size_t)nranks, sizeof *s->src);
      s->w = calloc((size_t)nranks, sizeof *s->w);
      s->ev = calloc((size_t)nranks, sizeof *s->ev);
    }
    if (!s || !s->src || !s->w || !s->ev) {
      if (s) free(s->src), free(s->w), free(s->ev), free(s);
      pthread_mutex_unlock(&c->mu);
      (void)cudaEventDestroy(ev);
      return hs_diag_set(d, HS_ENOMEM, "out of memory for an all-reduce over %d ranks", nranks);
    }
    s->op = op;
    s->nranks = nranks;
    s->n = n;
    s->next = c->slots;
    c->slots = s;
  }
  int rc = 0;
  if (s->nranks != nranks || s->n != n)
    rc = hs_diag_set(d, HS_EINVAL, "local all-reduce %llu: rank %d gives %lld floats over %d ranks, another gave %lld over %d",
                     (unsigned long long)op, rank, (long long)n, nranks, (long long)s->n, s->nranks);
  else {
    s->src[me] = buf;
    s->w[me] = wt;
    s->ev[me] = ev;
    if (++s->arrived == s->nranks && !s->failed) {
      pthread_mutex_unlock(&c->mu);
      hs_diag rd = {0};
      int rrc = reduce(c, s, &dl, &rd);
      pthread_mutex_lock(&c->mu);
      if (rrc) {
        s->failed = rrc;
        s->err = rd;
      } else {
        s->done = 1;
      }
      pthread_cond_broadcast(&c->cv);
    }
    /* Once everyone has arrived, the reduction uses every participant's buffer and event: each
     * waits for it to end (its own wait is bounded by the deadline and ends on abort), since an
     * event destroyed while the reduction may still pass it to cudaStreamWaitEvent is a use
     * after free. Before that, a participant that gives up fails the slot, so that a late
     * arrival never starts a reduction over a buffer and an event whose owner has left. */
    while (!s->done && !s->failed && !rc) {
      if (s->arrived == s->nranks) pthread_cond_wait(&c->cv, &c->mu);
      else if (c->aborted) rc = HS_EINTR;
      else if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT && !s->done && !s->failed &&
               s->arrived < s->nranks)
        rc = HS_ERUNTIME;
    }
    if (s->done || s->failed) rc = 0; /* done, or the slot's error is returned below */
    if (rc) {
      s->failed = rc;
      if (rc == HS_EINTR)
        hs_diag_set(&s->err, rc, "local all-reduce %llu: aborted", (unsigned long long)op);
      else
        hs_diag_set(&s->err, rc, "local all-reduce %llu: rank %d waited %.3g s and only %d of %d participants arrived",
                    (unsigned long long)op, rank, c->cfg.timeout_s, s->arrived, nranks);
      pthread_cond_broadcast(&c->cv); /* the others waiting in this slot stop now, with this error */
    }
  }
  int failed = s->failed;
  hs_diag err = s->err;
  if (rc == HS_EINVAL) {
    /* Not registered in the slot: nothing of ours to take back. */
  } else if (++s->departed == s->arrived && (s->done || s->failed || rc)) {
    unlink_slot(c, s);
  }
  pthread_mutex_unlock(&c->mu);
  /* The reduction (if it ran) has waited on our event already; it is ours to destroy. */
  (void)cudaEventDestroy(ev);
  if (rc == HS_EINVAL) return rc;
  if (failed) return hs_diag_set(d, failed, "%s", err.msg);
  return 0;
}

static int local_send(hs_real_comm *c, int rank, int peer, uint64_t tag, const float *buf, int64_t n,
                      hs_diag *d) {
  return hs_real_comm_cpu.send(c->host, rank, peer, tag, buf, n, d);
}
static int local_recv(hs_real_comm *c, int rank, int peer, uint64_t tag, float *buf, int64_t n,
                      hs_diag *d) {
  return hs_real_comm_cpu.recv(c->host, rank, peer, tag, buf, n, d);
}
static int local_barrier(hs_real_comm *c, int rank, hs_diag *d) {
  return hs_real_comm_cpu.barrier(c->host, rank, d);
}
static void local_abort(hs_real_comm *c) {
  pthread_mutex_lock(&c->mu);
  c->aborted = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  hs_real_comm_cpu.abort(c->host);
}

#else /* !HETSIM_HAVE_CUDA */

static int local_open(hs_real_comm **out, const hs_real_comm_config *cfg, hs_diag *d) {
  (void)cfg;
  *out = NULL;
  return hs_diag_set(d, HS_EUNSUPPORTED, "--backend local: this build has no CUDA support "
                     "(no CUDA toolkit was found at configure time); use --backend cpu");
}
static void local_close(hs_real_comm *c) { (void)c; }
static int local_allreduce(hs_real_comm *c, uint64_t op, int rank, float *buf, int64_t n,
                           const int *ranks, int nranks, const double *weights, hs_diag *d) {
  (void)c, (void)op, (void)rank, (void)buf, (void)n, (void)ranks, (void)nranks, (void)weights;
  return hs_diag_set(d, HS_EUNSUPPORTED, "local: built without CUDA");
}
static int local_send(hs_real_comm *c, int rank, int peer, uint64_t tag, const float *buf, int64_t n,
                      hs_diag *d) {
  (void)c, (void)rank, (void)peer, (void)tag, (void)buf, (void)n;
  return hs_diag_set(d, HS_EUNSUPPORTED, "local: built without CUDA");
}
static int local_recv(hs_real_comm *c, int rank, int peer, uint64_t tag, float *buf, int64_t n,
                      hs_diag *d) {
  (void)c, (void)rank, (void)peer, (void)tag, (void)buf, (void)n;
  return hs_diag_set(d, HS_EUNSUPPORTED, "local: built without CUDA");
}
static int local_barrier(hs_real_comm *c, int rank, hs_diag *d) {
  (void)c, (void)rank;
  return hs_diag_set(d, HS_EUNSUPPORTED, "local: built without CUDA");
}
static void local_abort(hs_real_comm *c) { (void)c; }

#endif

const hs_real_comm_ops hs_real_comm_local = {
    .version = HS_REAL_COMM_VERSION,
    .name = "local",
    .description = "threads on green-context SM partitions of one GPU; device-kernel reductions (not run on a GPU yet)",
    .device_buffers = 1,
    .open = local_open,
    .close = local_close,
    .allreduce = local_allreduce,
    .send = local_send,
    .recv = local_recv,
    .barrier = local_barrier,
    .abort = local_abort,
};
