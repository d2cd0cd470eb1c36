/* The local communication backend (real/real_local.c, compiled from source, unchanged) without a
 * GPU (label deviceless): its workers are threads of this program, as in a real run, against an
 * emulated CUDA runtime (tests/gpu_emu/fake_cudart.c, linked in: streams run late on their own
 * threads), an emulated driver that hetsim's own loader opens as libcuda.so.1
 * (tests/gpu_emu/fake_cuda_driver.c, on LD_LIBRARY_PATH) and the weighted-sum launcher on that
 * runtime (tests/gpu_emu/fake_real_kernels.c). The nets are emulated too: each worker's gradient
 * and parameters live in device memory written by work still queued on the net's own stream when
 * the all-reduce is called, as an SGD step leaves them; hs_net_cuda_record_owner (below) finds
 * the net from the buffer as nn_cuda.c does. The cases:
 * - refusals: bad devices, sizes, participants and buffers no net owns are refused;
 * - weighted_three: three workers, all-reduces over all of them with weights and over a subset
 *   (the others take no part), repeated so that scratch vectors are pooled; every buffer holds
 *   the sum when its all-reduce returns, each net's later work sees it, the calling threads'
 *   current contexts are left as they were, and close releases the primary context;
 * - wide: 17 workers, more than one launch takes (HS_RK_MAX_SRC), so the sum is chained;
 * - missing: a participant that never comes: the others fail at the timeout, naming the count,
 *   and the next all-reduce works;
 * - abort: abort from another thread ends an all-reduce in progress, and no later one starts;
 * - host_traffic: send, recv and barrier go through the inner cpu backend.
 * Exits 77 (skipped) in builds without CUDA. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core_buildinfo.h"
#include "tests/hs_test.h"

#if !HETSIM_HAVE_CUDA

int main(void) {
  printf("skipped: this build has no CUDA\n");
  return 77;
}

#else

#include <cuda_runtime_api.h>

#include "nn/nn_cuda.h"
#include "nn/nn_cudalib.h"
#include "real/real_comm.h"
#include "tests/gpu_emu/gpu_emu.h"

#define N 3000 /* floats of every buffer; not a multiple of a block */
#define MAX_NETS 32

/* --- emulated nets ----------------------------------------------------------------------- */

typedef struct emu_net {
  float *grads, *params; /* device memory, N floats each */
  cudaStream_t stream;   /* all of the net's work, as nn_cuda.c's */
} emu_net;

static pthread_mutex_t nets_mu = PTHREAD_MUTEX_INITIALIZER;
static emu_net *nets[MAX_NETS];

static int net_open(emu_net *net) {
  memset(net, 0, sizeof *net);
  if (cudaMalloc((void **)&net->grads, N * sizeof(float)) != cudaSuccess ||
      cudaMalloc((void **)&net->params, N * sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&net->stream, cudaStreamNonBlocking) != cudaSuccess)
    return -1;
  pthread_mutex_lock(&nets_mu);
  int slot = 0;
  while (slot < MAX_NETS && nets[slot]) slot++;
  if (slot < MAX_NETS) nets[slot] = net;
  pthread_mutex_unlock(&nets_mu);
  return slot < MAX_NETS ? 0 : -1;
}

/* After its stream is idle (bounded). */
static void net_close(emu_net *net) {
  pthread_mutex_lock(&nets_mu);
  for (int i = 0; i < MAX_NETS; i++)
    if (nets[i] == net) nets[i] = NULL;
  pthread_mutex_unlock(&nets_mu);
  if (!hs_cuda_stream_drained(net->stream, 10)) HS_FAIL_AT("a net's stream did not drain");
  (void)cudaStreamDestroy(net->stream);
  (void)cudaFree(net->grads);
  (void)cudaFree(net->params);
}

static int inside(const float *v, const void *p) {
  return (const char *)p >= (const char *)v && (const char *)p < (const char *)(v + N);
}

/* What nn_cuda.c's does for its nets: an event on the owning net's stream, after everything the
 * net has enqueued so far. */
int hs_net_cuda_record_owner(const void *dev_ptr, void **event, hs_diag *d) {
  *event = NULL;
  emu_net *owner = NULL;
  pthread_mutex_lock(&nets_mu);
  for (int i = 0; i < MAX_NETS && !owner; i++)
    if (nets[i] && (inside(nets[i]->grads, dev_ptr) || inside(nets[i]->params, dev_ptr))) owner = nets[i];
  pthread_mutex_unlock(&nets_mu);
  if (!owner) return hs_diag_set(d, HS_ENOTFOUND, "no open cuda net holds %p", dev_ptr);
  cudaEvent_t ev = NULL;
  if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess || cudaEventRecord(ev, owner->stream) != cudaSuccess)
    return hs_diag_set(d, HS_ERUNTIME, "recording the owner's event failed");
  *event = ev;
  return 0;
}

static float pattern(int64_t j, int seed) { return (float)((j * 7 + seed * 13) % 23) - 11.0f; }

/* A net's kernel: v = scale * pattern, run late on the net's stream (an SGD step's write). */
typedef struct fill {
  float *v;
  float scale;
  int seed;
} fill;

static void fill_run(void *p) {
  fill *f = p;
  hs_emu_jitter(500, 3000); /* a long kernel: the all-reduce is called long before it ends */
  for (int64_t j = 0; j < N; j++) f->v[j] = f->scale * pattern(j, f->seed);
  free(f);
}

static void net_write(emu_net *net, float *v, float scale, int seed) {
  fill *f = malloc(sizeof *f);
  if (!f) {
    HS_FAIL_AT("out of memory");
    return;
  }
  *f = (fill){.v = v, .scale = scale, .seed = seed};
  if (hs_emu_stream_submit(net->stream, fill_run, f) != cudaSuccess) {
    free(f);
    HS_FAIL_AT("a net's write was refused");
  }
}

/* The net's next kernel reads its buffer after the all-reduce: a copy on its own stream, then
 * the stream is waited for (bounded). */
static int net_read(emu_net *net, const float *v, float *host) {
  if (cudaMemcpyAsync(host, v, N * sizeof(float), cudaMemcpyDeviceToHost, net->stream) != cudaSuccess) return -1;
  return hs_cuda_stream_drained(net->stream, 10) ? 0 : -1;
}

/* --- the backend --------------------------------------------------------------------------- */

static const hs_cudrv_api *driver(void) {
  hs_diag d = {0};
  const hs_cudrv_api *drv = hs_cudrv_api_get(&d);
  if (!drv) HS_FAIL_AT("the emulated driver did not load: %s", d.msg);
  return drv;
}

/* How often the emulated driver's device 0 primary context is retained now. */
static int primary_refs(void) {
  void *sym = hs_emu_driver_sym("hs_emu_driver_primary_refs");
  int (*refs)(int) = NULL;
  memcpy(&refs, &sym, sizeof sym);
  return refs ? refs(0) : -1;
}

static hs_real_comm *open_local(int world, double timeout_s) {
  hs_real_comm_config cc = {.world = world, .n = N, .timeout_s = timeout_s, .device = "cuda:0"};
  hs_real_comm *c = NULL;
  hs_diag d = {0};
  if (hs_real_comm_local.open(&c, &cc, &d)) HS_FAIL_AT("open: %s", d.msg);
  return c;
}

static void test_refusals(void) {
  hs_real_comm *c = NULL;
  hs_diag d = {0};
  hs_real_comm_config cc = {.world = 2, .n = N, .timeout_s = 5, .device = "cuda:7"};
  ASSERT_EQ(hs_real_comm_local.open(&c, &cc, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "this machine has 1 GPU");
  cc.device = "cpu";
  ASSERT_EQ(hs_real_comm_local.open(&c, &cc, &d), HS_EINVAL);
  cc.device = "cuda:0/sm=16";
  ASSERT_EQ(hs_real_comm_local.open(&c, &cc, &d), 0);
  ASSERT_EQ(primary_refs(), 1);
  emu_net net;
  ASSERT_EQ(net_open(&net), 0);
  float *own = NULL;
  ASSERT_EQ(cudaMalloc((void **)&own, N * sizeof(float)), cudaSuccess);
  static const int ranks[2] = {0, 1};
  ASSERT_EQ(hs_real_comm_local.allreduce(c, 1, 0, own, N, ranks, 2, NULL, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "no open cuda net holds");
  ASSERT_EQ(hs_real_comm_local.allreduce(c, 1, 0, net.grads, N + 1, ranks, 2, NULL, &d), HS_EINVAL);
  ASSERT_EQ(hs_real_comm_local.allreduce(c, 1, 5, net.grads, N, ranks, 2, NULL, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "not a participant");
  hs_real_comm_local.close(c);
  ASSERT_EQ(primary_refs(), 0);
  (void)cudaFree(own);
  net_close(&net);
}

/* One worker's thread: its net, its part in each all-reduce. */
typedef struct worker {
  hs_real_comm *c;
  int rank, ops;
  emu_net net;
  int fails;
  hs_diag d;
  int leave_at; /* all-reduce number it does not come to (missing), or 0 */
  int got_rc;   /* the last all-reduce's status */
} worker;

static const double WEIGHTS[3] = {0.5, 0.25, 0.25};

/* Expected sum over ranks (weights w, NULL = 1) of (r + 1 + it) * pattern(j, it). */
static float expected(int64_t j, int it, const int *ranks, int nranks, const double *w) {
  float acc = 0;
  for (int k = 0; k < nranks; k++)
    acc = fmaf(w ? (float)w[k] : 1.0f, (float)(ranks[k] + 1 + it) * pattern(j, it), acc);
  return acc;
}

static void *weighted_worker(void *p) {
  worker *w = p;
  const hs_cudrv_api *drv = driver();
  float *host = malloc(N * sizeof(float));
  if (!drv || !host) {
    w->fails++;
    free(host);
    return NULL;
  }
  static const int all[3] = {0, 1, 2}, pair[2] = {0, 2};
  for (int it = 0; it < w->ops && !w->fails; it++) {
    /* Every third operation is over ranks 0 and 2 only, unweighted; rank 1 sits it out. */
    int sub = it % 3 == 2;
    if (sub && w->rank == 1) continue;
    const int *ranks = sub ? pair : all;
    int nranks = sub ? 2 : 3;
    const double *wts = sub ? NULL : WEIGHTS;
    float *buf = it % 2 ? w->net.params : w->net.grads;
    net_write(&w->net, buf, (float)(w->rank + 1 + it), it);
    CUcontext before = NULL, after = NULL;
    (void)drv->cuCtxGetCurrent(&before);
    if (hs_real_comm_local.allreduce(w->c, (uint64_t)it + 1, w->rank, buf, N, ranks, nranks, wts, &w->d)) {
      w->fails++;
      break;
    }
    (void)drv->cuCtxGetCurrent(&after);
    if (after != before) {
      snprintf(w->d.msg, sizeof w->d.msg, "all-reduce %d changed the thread's current context", it + 1);
      w->fails++;
    }
    /* When the all-reduce returns, the buffer holds the sum: read straight from "device" memory
     * (the emulation's is the host's), and by the net's next kernel on its own stream. */
    for (int64_t j = 0; j < N && !w->fails; j++)
      if (buf[j] != expected(j, it, ranks, nranks, wts)) {
        snprintf(w->d.msg, sizeof w->d.msg, "all-reduce %d, rank %d: [%lld] = %g, expected %g", it + 1, w->rank,
                 (long long)j, (double)buf[j], (double)expected(j, it, ranks, nranks, wts));
        w->fails++;
      }
    if (!w->fails && net_read(&w->net, buf, host)) w->fails++;
    if (!w->fails && memcmp(host, buf, N * sizeof(float))) {
      snprintf(w->d.msg, sizeof w->d.msg, "all-reduce %d: the net's next kernel saw another vector", it + 1);
      w->fails++;
    }
  }
  free(host);
  return NULL;
}

static void run_workers(worker *ws, int n, void *(*fn)(void *)) {
  pthread_t th[32];
  for (int i = 0; i < n; i++)
    if (pthread_create(&th[i], NULL, fn, &ws[i])) HS_FAIL_AT("pthread_create");
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

static void test_weighted_three(void) {
  hs_real_comm *c = open_local(3, 10);
  if (!c) return;
  worker ws[3];
  for (int i = 0; i < 3; i++) {
    ws[i] = (worker){.c = c, .rank = i, .ops = 12};
    ASSERT_EQ(net_open(&ws[i].net), 0);
  }
  run_workers(ws, 3, weighted_worker);
  for (int i = 0; i < 3; i++) {
    if (ws[i].fails) HS_FAIL_AT("rank %d: %s", i, ws[i].d.msg);
    net_close(&ws[i].net);
  }
  hs_real_comm_local.close(c);
  ASSERT_EQ(primary_refs(), 0);
}

/* Every rank's all-reduce over all: more sources than one launch takes. */
#define WIDE 17

static void *wide_worker(void *p) {
  worker *w = p;
  int ranks[WIDE];
  double wts[WIDE];
  for (int i = 0; i < WIDE; i++) ranks[i] = i, wts[i] = 1.0 / (i + 1);
  net_write(&w->net, w->net.grads, (float)(w->rank + 1), 0);
  if (hs_real_comm_local.allreduce(w->c, 7, w->rank, w->net.grads, N, ranks, WIDE, wts, &w->d)) {
    w->fails++;
    return NULL;
  }
  for (int64_t j = 0; j < N && !w->fails; j++) {
    /* Sixteen in one launch, then the seventeenth accumulated, as real_local.c chains them. */
    float acc = 0;
    for (int k = 0; k < 16; k++) acc = fmaf((float)wts[k], (float)(k + 1) * pattern(j, 0), acc);
    acc = fmaf((float)wts[16], 17.0f * pattern(j, 0), acc);
    if (w->net.grads[j] != acc) {
      snprintf(w->d.msg, sizeof w->d.msg, "[%lld] = %g, expected %g", (long long)j, (double)w->net.grads[j],
               (double)acc);
      w->fails++;
    }
  }
  return NULL;
}

static void test_wide(void) {
  hs_real_comm *c = open_local(WIDE, 10);
  if (!c) return;
  worker ws[WIDE];
  for (int i = 0; i < WIDE; i++) {
    ws[i] = (worker){.c = c, .rank = i};
    ASSERT_EQ(net_open(&ws[i].net), 0);
  }
  run_workers(ws, WIDE, wide_worker);
  for (int i = 0; i < WIDE; i++) {
    if (ws[i].fails) HS_FAIL_AT("rank %d: %s", i, ws[i].d.msg);
    net_close(&ws[i].net);
  }
  hs_real_comm_local.close(c);
}

/* All-reduce 1 over ranks 0..2 (rank 2 stays away: leave_at 1), then all-reduce 2. */
static void *missing_worker(void *p) {
  worker *w = p;
  static const int all[3] = {0, 1, 2};
  for (int it = 1; it <= 2; it++) {
    if (w->leave_at == it) {
      /* Into all-reduce 2 once the others have given up on 1 (at 1 s) and well before they give
       * up on 2 (at 2 s). */
      nanosleep(&(struct timespec){1, 400000000}, NULL);
      continue;
    }
    net_write(&w->net, w->net.grads, 1.0f, 0);
    w->got_rc = hs_real_comm_local.allreduce(w->c, (uint64_t)it, w->rank, w->net.grads, N, all, 3, NULL, &w->d);
    if (it == 1 && w->got_rc != HS_ERUNTIME) w->fails++;
    if (it == 1 && !strstr(w->d.msg, "only 2 of 3 participants arrived")) w->fails++;
    if (it == 2 && w->got_rc) w->fails++;
  }
  return NULL;
}

static void test_missing(void) {
  hs_real_comm *c = open_local(3, 1.0);
  if (!c) return;
  worker ws[3];
  for (int i = 0; i < 3; i++) {
    ws[i] = (worker){.c = c, .rank = i, .leave_at = i == 2 ? 1 : 0};
    ASSERT_EQ(net_open(&ws[i].net), 0);
  }
  double t0 = hs_real_mono();
  run_workers(ws, 3, missing_worker);
  double took = hs_real_mono() - t0;
  for (int i = 0; i < 3; i++) {
    if (ws[i].fails) HS_FAIL_AT("rank %d: status %d: %s", i, ws[i].got_rc, ws[i].d.msg);
    net_close(&ws[i].net);
  }
  /* Bounded by the timeout (1 s, then rank 2's 1.4 s), with room for a loaded machine; never
   * the emulation's bound. */
  ASSERT(took < 10);
  hs_real_comm_local.close(c);
}

typedef struct aborter {
  hs_real_comm *c;
  double after_s;
} aborter;

static void *abort_later(void *p) {
  aborter *a = p;
  nanosleep(&(struct timespec){0, (long)(a->after_s * 1e9)}, NULL);
  hs_real_comm_local.abort(a->c);
  return NULL;
}

static void test_abort(void) {
  hs_real_comm *c = open_local(2, 30);
  if (!c) return;
  emu_net net;
  ASSERT_EQ(net_open(&net), 0);
  static const int ranks[2] = {0, 1};
  aborter a = {.c = c, .after_s = 0.2};
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, abort_later, &a), 0);
  hs_diag d = {0};
  double t0 = hs_real_mono();
  net_write(&net, net.grads, 1.0f, 0);
  ASSERT_EQ(hs_real_comm_local.allreduce(c, 1, 0, net.grads, N, ranks, 2, NULL, &d), HS_EINTR);
  ASSERT(hs_real_mono() - t0 < 10); /* the abort, not the 30 s timeout */
  pthread_join(th, NULL);
  ASSERT_CONTAINS(d.msg, "aborted");
  /* Nothing starts after abort. */
  ASSERT_EQ(hs_real_comm_local.allreduce(c, 2, 0, net.grads, N, ranks, 2, NULL, &d), HS_EINTR);
  net_close(&net);
  hs_real_comm_local.close(c);
  ASSERT_EQ(primary_refs(), 0);
}

static void *host_peer(void *p) {
  worker *w = p;
  float got[4];
  if (hs_real_comm_local.recv(w->c, 1, 0, 9, got, 4, &w->d) || got[3] != 4.0f) w->fails++;
  if (hs_real_comm_local.barrier(w->c, 1, &w->d)) w->fails++;
  return NULL;
}

static void test_host_traffic(void) {
  hs_real_comm *c = open_local(2, 10);
  if (!c) return;
  worker peer = {.c = c, .rank = 1};
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, host_peer, &peer), 0);
  hs_diag d = {0};
  static const float msg[4] = {1, 2, 3, 4};
  ASSERT_EQ(hs_real_comm_local.send(c, 0, 1, 9, msg, 4, &d), 0);
  ASSERT_EQ(hs_real_comm_local.barrier(c, 0, &d), 0);
  pthread_join(th, NULL);
  if (peer.fails) HS_FAIL_AT("rank 1: %s", peer.d.msg);
  hs_real_comm_local.close(c);
}

static const hs_test_case cases[] = {
    {"refusals", test_refusals},
    {"weighted_three", test_weighted_three},
    {"wide", test_wide},
    {"missing", test_missing},
    {"abort", test_abort},
    {"host_traffic", test_host_traffic},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("deviceless_local", cases, argc, argv); }

#endif /* HETSIM_HAVE_CUDA */
