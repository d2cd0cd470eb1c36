/* The nccl communication backend (real/real_nccl.c, compiled from source, unchanged) without a GPU
 * (label deviceless): its ranks run as processes of this program against an emulated CUDA
 * runtime (tests/gpu_emu/fake_cudart.c, linked in) and an emulated NCCL (tests/gpu_emu/fake_nccl.c,
 * built as libnccl.so.2 and opened by hetsim's own loader through HETSIM_NCCL_PATH). Both follow
 * the documented semantics adversarially (tests/gpu_emu/gpu_emu.h): streams run late on their own
 * threads, a non-blocking communicator enqueues its kernels after returning ncclInProgress, CUDA
 * calls on NCCL's stream before the communicator's state is ncclSuccess, calls on a freed
 * communicator, a destroy without a completed finalize and every wait that would hang a GPU are
 * reported as violations that abort the rank. The cases, modelled on tests/test_gpu_real.c's:
 * - loader_and_refusals: the loader opens the emulation; the registry's table refuses; bad
 *   launches, world sizes and devices are refused before anything is opened;
 * - solo: one rank; the all-reduce of a buffer that a net's stream is still writing must follow
 *   the net's work (hs_net_cuda_record_owner);
 * - functional_2, functional_3: weighted all-reduces over all ranks (one of a net-owned buffer),
 *   over subsets (a sub-communicator made on first use, from a thread whose current GPU is not
 *   the rank's; ranks outside take no part), send/recv with tags asked out of order, a barrier
 *   and the clean teardown (every communicator finalized, polled, destroyed; none aborted);
 * - duplicate_gpu: two ranks on one GPU are refused promptly (an error of the non-blocking set-up);
 * - killed_rank, killed_hub: a rank (rank 2, then rank 0) is SIGKILLed: a survivor waiting in an
 *   all-reduce and one that starts an all-reduce afterwards both fail at once, naming the rank,
 *   and later operations return the stored failure without calling NCCL;
 * - timeout: a rank never joins an all-reduce: the other fails at its timeout_s, every later
 *   operation (all-reduce, send, recv, barrier) returns the stored failure at once without
 *   calling NCCL, and the peer learns that the rank failed without waiting for its own timeout;
 * - stalled_send: a send whose link never moves: sender and receiver both fail within their
 *   timeout (the receive's copy to the host must not block the receiving thread);
 * - abort: abort() from another thread ends an all-reduce in progress with HS_EINTR;
 * - killed_in_teardown: a peer killed while a rank's clean close waits in ncclCommFinalize: the
 *   communicator is aborted instead, close returns at once;
 * - init_fail: a rank whose NCCL set-up fails at once: its peer, waiting for the communicator,
 *   fails at once too, naming it, rather than at its timeout;
 * - missing_rank: a rank without its peer (rank 0 alone, rank 1 alone) fails its open at the
 *   timeout.
 * Exits 77 (skipped) in builds without CUDA or NCCL headers. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core_buildinfo.h"
#include "tests/hs_test.h"

#if !HETSIM_HAVE_CUDA || !HETSIM_HAVE_NCCL

int main(void) {
  printf("skipped: this build has no CUDA or no NCCL headers\n");
  return 77;
}

#else

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "nn/nn_cuda.h"
#include "nn/nn_cudalib.h"
#include "real/real_comm.h"
#include "real/real_nccl.h"
#include "tests/gpu_emu/gpu_emu.h"

#define NF 1000 /* floats per buffer (cfg.n) */
#define MAXW 3

/* --- what the files compiled into this test need from the parts of hetsim left out ---------- */

/* A stand-in for a cuda net (nn/nn_cuda.c needs cuDNN): at most one buffer of this process is
 * "owned by a net", whose work runs on its own stream. */
static struct {
  pthread_mutex_t mu;
  const float *buf;
  int64_t n;
  int device;
  cudaStream_t stream;
} net = {.mu = PTHREAD_MUTEX_INITIALIZER};

int hs_net_cuda_record_owner(const void *dev_ptr, void **event, hs_diag *d) {
  pthread_mutex_lock(&net.mu);
  int owned = net.buf && (const float *)dev_ptr >= net.buf && (const float *)dev_ptr < net.buf + net.n;
  int rc = 0;
  if (!owned) rc = hs_diag_set(d, HS_ENOTFOUND, "no cuda net owns %p", dev_ptr);
  cudaEvent_t ev = NULL;
  /* As nn_cuda.c does: the net's GPU current on the calling thread, an event on its stream. */
  if (!rc && (cudaSetDevice(net.device) != cudaSuccess || cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
              cudaEventRecord(ev, net.stream) != cudaSuccess))
    rc = hs_diag_set(d, HS_ERUNTIME, "recording the net's event failed");
  pthread_mutex_unlock(&net.mu);
  if (!rc) *event = ev;
  return rc;
}

/* The net's SGD update, still running when the all-reduce is called: 30 ms later it writes the
 * buffer's final values (it stands for a kernel on the net's stream). */
typedef struct update {
  float *buf;
  int rank;
} update;

static float owned_value(int rank, int64_t i) { return (float)(2 * (rank + 1)) - 0.001f * (float)(i % 11); }

static void slow_update(void *p) {
  update *u = p;
  nanosleep(&(struct timespec){0, 30000000L}, NULL);
  for (int64_t i = 0; i < NF; i++) u->buf[i] = owned_value(u->rank, i);
}

/* --- a rank (a child process) ------------------------------------------------------------- */

static int me = -1; /* this child's rank, for messages */

#define STEP(n, cond, ...)                                                                                             \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      fprintf(stderr, "rank %d: step %d: ", me, n);                                                                    \
      fprintf(stderr, __VA_ARGS__);                                                                                    \
      fputc('\n', stderr);                                                                                             \
      return n;                                                                                                        \
    }                                                                                                                  \
  } while (0)

static int env_int(const char *name) {
  const char *s = getenv(name);
  return s ? atoi(s) : -1;
}

static float value(int rank, int64_t i) { return 0.5f * (float)(rank + 1) + 0.01f * (float)(i % 37); }

/* device NULL: the rank's own GPU, cuda:RANK. */
static int open_rank(hs_real_comm **c, int rank, int world, double timeout_s, const char *device, hs_diag *d) {
  char own[16];
  if (!device) {
    snprintf(own, sizeof own, "cuda:%d", rank);
    device = own;
  }
  hs_test_set_torchrun(rank, world, env_int("HS_NCCL_EMU_PORT"));
  hs_real_comm_config cc = {.world = world, .n = NF, .timeout_s = timeout_s, .device = device};
  return hs_real_comm_nccl_rank.open(c, &cc, d);
}

/* Writes one byte to the fd named by an environment variable (the parent's pipe). */
static void tell_parent(const char *var) {
  int fd = env_int(var);
  if (fd >= 0) (void)!write(fd, "x", 1);
}

/* Waits (bounded) for one byte on the fd named by var. */
static int wait_parent(const char *var) {
  struct pollfd pf = {.fd = env_int(var), .events = POLLIN};
  char x;
  return pf.fd >= 0 && poll(&pf, 1, 30000) == 1 && read(pf.fd, &x, 1) == 1 ? 0 : -1;
}

static int fill(float *dev, int rank, float (*f)(int, int64_t)) {
  float host[NF];
  for (int64_t i = 0; i < NF; i++) host[i] = f(rank, i);
  /* A cudaMemcpy from pageable memory may return before its copy has landed. */
  return cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice) != cudaSuccess ||
         cudaDeviceSynchronize() != cudaSuccess;
}

/* The largest relative error of dev against sum_j w[j] * f(ranks[j], i). */
static double worst_error(const float *dev, const int *ranks, int nranks, const double *w, float (*f)(int, int64_t)) {
  float host[NF];
  if (cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost) != cudaSuccess) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < NF; i++) {
    double want = 0;
    for (int j = 0; j < nranks; j++) want += (w ? w[j] : 1.0) * f(ranks[j], i);
    double e = fabs(host[i] - want) / (fabs(want) + 1e-3);
    if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
  }
  return worst;
}

static long stat_load(const long *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

/* After close: every communicator this rank created was destroyed or aborted. */
static int all_freed(void) {
  hs_emu_nccl_stats *st = hs_emu_nccl_stats_get();
  long created = stat_load(&st->created), destroyed = stat_load(&st->destroyed), aborted = stat_load(&st->aborted);
  STEP(60, created == destroyed + aborted, "%ld communicators created, %ld destroyed, %ld aborted", created, destroyed,
       aborted);
  return 0;
}

/* Sub-communicator all-reduces, run on a thread of their own whose current GPU is the default
 * one (0), not the rank's: the backend must make its GPU current itself. */
typedef struct subset_job {
  hs_real_comm *c;
  int rank, world;
  float *dev;
  int rc;
  char msg[1100];
} subset_job;

static void *subset_main(void *p) {
  subset_job *j = p;
  hs_diag d = {0};
  static const int s02[2] = {0, 2}, s12[2] = {1, 2}, s1[1] = {1};
  static const double w2[2] = {0.25, 0.75}, w1[1] = {0.5};
  const int *sets[2] = {j->world == 3 ? s02 : s1, j->world == 3 ? s12 : s1};
  int sizes[2] = {j->world == 3 ? 2 : 1, j->world == 3 ? 2 : 1};
  const double *ws[2] = {j->world == 3 ? w2 : w1, j->world == 3 ? w2 : w1};
  uint64_t op = 10;
  /* Twice each: the second use finds the cached communicator. */
  for (int round = 0; round < 2 && !j->rc; round++)
    for (int s = 0; s < 2 && !j->rc; s++) {
      int member = 0;
      for (int k = 0; k < sizes[s]; k++) member |= sets[s][k] == j->rank;
      op++;
      if (!member) continue;
      if (fill(j->dev, j->rank, value)) {
        j->rc = 1;
        snprintf(j->msg, sizeof j->msg, "filling the buffer failed");
      } else if (hs_real_comm_nccl_rank.allreduce(j->c, op, j->rank, j->dev, NF, sets[s], sizes[s], ws[s], &d)) {
        j->rc = 2;
        snprintf(j->msg, sizeof j->msg, "subset all-reduce %llu: %s", (unsigned long long)op, d.msg);
      } else {
        double e = worst_error(j->dev, sets[s], sizes[s], ws[s], value);
        if (e > 1e-5) {
          j->rc = 3;
          snprintf(j->msg, sizeof j->msg, "subset all-reduce %llu: relative error %g", (unsigned long long)op, e);
        }
      }
    }
  return NULL;
}

static float pa(int rank, int64_t i) { return (float)(rank * 1000 + i); }
static float pb(int rank, int64_t i) { return -(float)(rank * 1000 + i) - 0.5f; }

/* Point-to-point, pair after pair (0->1, then 1->2 and 2->0 with three ranks): the sender sends
 * tags 5 then 6, the receiver asks for 6 first. A send's buffer may change once it returns. */
static int p2p_rounds(hs_real_comm *c, int rank, int world, hs_diag *d) {
  static const int pairs[3][2] = {{0, 1}, {1, 2}, {2, 0}};
  int npairs = world == 3 ? 3 : 1;
  for (int p = 0; p < npairs; p++) {
    int from = pairs[p][0], to = pairs[p][1];
    float a[NF], b[NF];
    if (rank == from) {
      for (int64_t i = 0; i < NF; i++) a[i] = pa(rank, i), b[i] = pb(rank, i);
      STEP(40, !hs_real_comm_nccl_rank.send(c, rank, to, 5, a, NF, d), "send tag 5 to %d: %s", to, d->msg);
      for (int64_t i = 0; i < NF; i++) a[i] = -999;
      STEP(41, !hs_real_comm_nccl_rank.send(c, rank, to, 6, b, NF, d), "send tag 6 to %d: %s", to, d->msg);
    } else if (rank == to) {
      STEP(42, !hs_real_comm_nccl_rank.recv(c, rank, from, 6, b, NF, d), "recv tag 6 from %d: %s", from, d->msg);
      STEP(43, !hs_real_comm_nccl_rank.recv(c, rank, from, 5, a, NF, d), "recv tag 5 from %d: %s", from, d->msg);
      for (int64_t i = 0; i < NF; i++) {
        STEP(44, a[i] == pa(from, i), "tag 5 from %d: [%lld] = %g, want %g", from, (long long)i, a[i], pa(from, i));
        STEP(45, b[i] == pb(from, i), "tag 6 from %d: [%lld] = %g, want %g", from, (long long)i, b[i], pb(from, i));
      }
    }
  }
  return 0;
}

/* The net-owned buffer: garbage until the net's update, queued just before the all-reduce,
 * writes it. */
static int owned_allreduce(hs_real_comm *c, int rank, int world, uint64_t op, const double *w, hs_diag *d) {
  float *buf = NULL;
  cudaStream_t s = NULL;
  STEP(30, cudaMalloc((void **)&buf, NF * sizeof(float)) == cudaSuccess &&
               cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess,
       "cuda set-up");
  float garbage[NF];
  for (int i = 0; i < NF; i++) garbage[i] = 1e6f;
  STEP(31, cudaMemcpy(buf, garbage, sizeof garbage, cudaMemcpyHostToDevice) == cudaSuccess &&
               cudaDeviceSynchronize() == cudaSuccess,
       "fill");
  static update u; /* read by the net's stream, which outlives a failed step */
  u = (update){.buf = buf, .rank = rank};
  pthread_mutex_lock(&net.mu);
  net.buf = buf, net.n = NF, net.stream = s, net.device = hs_emu_current_device();
  pthread_mutex_unlock(&net.mu);
  STEP(32, cudaLaunchHostFunc(s, slow_update, &u) == cudaSuccess, "the net's update");
  int ranks[MAXW] = {0, 1, 2};
  STEP(33, !hs_real_comm_nccl_rank.allreduce(c, op, rank, buf, NF, ranks, world, w, d), "net-owned all-reduce: %s", d->msg);
  double e = worst_error(buf, ranks, world, w, owned_value);
  STEP(34, e < 1e-5, "net-owned all-reduce: relative error %g (did it read the buffer before the net's update?)", e);
  STEP(35, cudaStreamSynchronize(s) == cudaSuccess, "the net's stream");
  pthread_mutex_lock(&net.mu);
  net.buf = NULL;
  pthread_mutex_unlock(&net.mu);
  cudaStreamDestroy(s);
  cudaFree(buf);
  return 0;
}

static int functional_main(int rank, int world) {
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  STEP(10, !open_rank(&c, rank, world, 10, NULL, &d), "open: %s", d.msg);
  STEP(11, hs_real_nccl_rank(c) == rank, "hs_real_nccl_rank says %d", hs_real_nccl_rank(c));
  float *dev = NULL;
  STEP(12, cudaMalloc((void **)&dev, NF * sizeof(float)) == cudaSuccess && !fill(dev, rank, value), "cuda set-up");
  static const int ranks[MAXW] = {0, 1, 2};
  static const double w3[3] = {0.5, 0.3, 0.2}, w2[2] = {0.75, 0.25};
  const double *w = world == 3 ? w3 : w2;
  STEP(13, !hs_real_comm_nccl_rank.allreduce(c, 1, rank, dev, NF, ranks, world, w, &d), "all-reduce: %s", d.msg);
  double e = worst_error(dev, ranks, world, w, value);
  STEP(14, e < 1e-5, "weighted all-reduce: relative error %g", e);
  int rc = owned_allreduce(c, rank, world, 2, w, &d);
  if (rc) return rc;
  subset_job sj = {.c = c, .rank = rank, .world = world, .dev = dev};
  pthread_t th;
  STEP(15, !pthread_create(&th, NULL, subset_main, &sj), "thread");
  pthread_join(th, NULL);
  STEP(16, !sj.rc, "%s", sj.msg);
  if ((rc = p2p_rounds(c, rank, world, &d))) return rc;
  STEP(17, !hs_real_comm_nccl_rank.barrier(c, rank, &d), "barrier: %s", d.msg);
  STEP(18, hs_real_comm_nccl_rank.barrier(c, (rank + 1) % world, &d) == HS_EINVAL, "a barrier for another rank");
  hs_real_comm_nccl_rank.close(c);
  cudaFree(dev);
  hs_emu_nccl_stats *st = hs_emu_nccl_stats_get();
  long created = stat_load(&st->created), ready = stat_load(&st->ready), fin = stat_load(&st->finalized),
       destroyed = stat_load(&st->destroyed), aborted = stat_load(&st->aborted), deferred = stat_load(&st->deferred);
  int want = world == 3 ? (rank == 2 ? 3 : 2) : 1 + (rank == 1);
  STEP(19, created == want && ready == created && fin == created && destroyed == created && aborted == 0 && deferred > 0,
       "communicators: %ld created (want %d), %ld ready, %ld finalized, %ld destroyed, %ld aborted; %ld operations "
       "deferred",
       created, want, ready, fin, destroyed, aborted, deferred);
  return 0;
}

static int solo_main(void) {
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  STEP(10, !open_rank(&c, 0, 1, 10, "cuda:0", &d), "open: %s", d.msg);
  static const double w[1] = {0.25};
  int rc = owned_allreduce(c, 0, 1, 1, w, &d);
  if (rc) return rc;
  STEP(11, !hs_real_comm_nccl_rank.barrier(c, 0, &d), "barrier: %s", d.msg);
  hs_real_comm_nccl_rank.close(c);
  hs_emu_nccl_stats *st = hs_emu_nccl_stats_get();
  STEP(12, stat_load(&st->destroyed) == 1 && stat_load(&st->aborted) == 0, "teardown");
  return 0;
}

static int duplicate_main(int rank) {
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  double t0 = hs_real_mono();
  int rc = open_rank(&c, rank, 2, 10, "cuda:0", &d);
  double took = hs_real_mono() - t0;
  /* The first rank to see NCCL's refusal aborts and says it failed: the other may hear that
   * before its own NCCL state turns to the error. The parent wants NCCL's reason from one. */
  int dup = strstr(d.msg, "Duplicate GPU") != NULL;
  STEP(10, rc == HS_ERUNTIME && (dup || strstr(d.msg, "failed and left")), "open on a GPU the other rank has: %d %s", rc,
       d.msg);
  STEP(11, took < 5, "the refusal took %.2f s", took);
  int fd = env_int("HS_NCCL_EMU_OPENED_FD");
  if (fd >= 0) (void)!write(fd, dup ? "D" : "P", 1);
  return all_freed();
}

/* After a failure: every operation returns the stored failure at once, without calling NCCL. */
static int after_failure(hs_real_comm *c, int rank, int world, int peer, float *dev, hs_diag *d) {
  static const int ranks[MAXW] = {0, 1, 2};
  long calls = stat_load(&hs_emu_nccl_stats_get()->calls);
  float host[NF] = {0};
  const char *what[4] = {"all-reduce", "send", "recv", "barrier"};
  for (int k = 0; k < 4; k++) {
    double t0 = hs_real_mono();
    int rc = k == 0 ? hs_real_comm_nccl_rank.allreduce(c, 99, rank, dev, NF, ranks, world, NULL, d)
           : k == 1 ? hs_real_comm_nccl_rank.send(c, rank, peer, 77, host, NF, d)
           : k == 2 ? hs_real_comm_nccl_rank.recv(c, rank, peer, 78, host, NF, d)
                    : hs_real_comm_nccl_rank.barrier(c, rank, d);
    double took = hs_real_mono() - t0;
    STEP(50 + k, rc == HS_ERUNTIME && strstr(d->msg, "aborted after an earlier failure") && took < 0.5,
         "%s after the failure: %d after %.2f s: %s", what[k], rc, took, d->msg);
  }
  long now = stat_load(&hs_emu_nccl_stats_get()->calls);
  STEP(54, now == calls, "%ld NCCL calls after the communicators were aborted", now - calls);
  return 0;
}

/* killed_rank / killed_hub. busy: in an all-reduce when the victim dies; idle: starts one after. */
static int survivor_main(int rank, int busy, int victim) {
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  STEP(10, !open_rank(&c, rank, 3, 30, NULL, &d), "open: %s", d.msg);
  float *dev = NULL;
  STEP(11, cudaMalloc((void **)&dev, NF * sizeof(float)) == cudaSuccess && !fill(dev, rank, value), "cuda set-up");
  tell_parent("HS_NCCL_EMU_OPENED_FD");
  if (!busy) STEP(12, !wait_parent("HS_NCCL_EMU_GO_FD"), "no word from the parent");
  static const int ranks[MAXW] = {0, 1, 2};
  double t0 = hs_real_mono();
  int rc = hs_real_comm_nccl_rank.allreduce(c, 1, rank, dev, NF, ranks, 3, NULL, &d);
  double took = hs_real_mono() - t0;
  char who[16];
  snprintf(who, sizeof who, "rank %d", victim);
  fprintf(stderr, "rank %d (%s): all-reduce after rank %d was killed: %s (%.2f s)\n", rank, busy ? "busy" : "idle",
          victim, rc ? d.msg : "succeeded", took);
  STEP(13, rc == HS_ERUNTIME && strstr(d.msg, who) && strstr(d.msg, "died"), "the failure does not name the dead rank");
  STEP(14, busy ? took > 0.1 && took < 8 : took < 1, "the failure took %.2f s (timeout 30 s)", took);
  /* The peer of send and recv: the other survivor, alive. */
  rc = after_failure(c, rank, 3, 3 - rank - victim, dev, &d);
  double t1 = hs_real_mono();
  hs_real_comm_nccl_rank.close(c);
  cudaFree(dev);
  if (rc) return rc;
  STEP(15, hs_real_mono() - t1 < 5, "close took %.2f s", hs_real_mono() - t1);
  return all_freed();
}

static int victim_main(int rank) {
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  STEP(10, !open_rank(&c, rank, 3, 30, NULL, &d), "open: %s", d.msg);
  tell_parent("HS_NCCL_EMU_OPENED_FD");
  for (int i = 0; i < 600; i++) nanosleep(&(struct timespec){0, 100000000L}, NULL);
  return 20; /* never reached: the parent kills it */
}

/* timeout: rank 0 all-reduces; rank 1 never joins, then, once rank 0 has left, tries a barrier. */
static int late_main(int rank) {
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  static const int ranks[2] = {0, 1};
  if (rank == 0) {
    STEP(10, !open_rank(&c, 0, 2, 1.0, NULL, &d), "open: %s", d.msg);
    float *dev = NULL;
    STEP(11, cudaMalloc((void **)&dev, NF * sizeof(float)) == cudaSuccess && !fill(dev, rank, value), "cuda set-up");
    double t0 = hs_real_mono();
    int rc = hs_real_comm_nccl_rank.allreduce(c, 1, 0, dev, NF, ranks, 2, NULL, &d);
    double took = hs_real_mono() - t0;
    fprintf(stderr, "rank 0: all-reduce without rank 1: %s (%.2f s)\n", rc ? d.msg : "succeeded", took);
    STEP(12, rc == HS_ERUNTIME && strstr(d.msg, "within 1 s"), "the failure is not the timeout");
    STEP(13, took > 0.95 && took < 3, "the timeout of 1 s took %.2f s", took);
    rc = after_failure(c, 0, 2, 1, dev, &d);
    hs_real_comm_nccl_rank.close(c); /* says "failed" to rank 1, which checks that it hears so */
    cudaFree(dev);
    return rc ? rc : all_freed();
  }
  STEP(10, !open_rank(&c, 1, 2, 20, NULL, &d), "open: %s", d.msg);
  tell_parent("HS_NCCL_EMU_OPENED_FD");
  STEP(11, !wait_parent("HS_NCCL_EMU_GO_FD"), "no word from the parent");
  double t0 = hs_real_mono();
  int rc = hs_real_comm_nccl_rank.barrier(c, 1, &d);
  double took = hs_real_mono() - t0;
  fprintf(stderr, "rank 1: barrier after rank 0 failed and left: %s (%.2f s)\n", rc ? d.msg : "succeeded", took);
  STEP(12, rc == HS_ERUNTIME && strstr(d.msg, "rank 0 failed"), "the failure does not say that rank 0 failed");
  STEP(13, took < 1, "the failure took %.2f s (timeout 20 s)", took);
  hs_real_comm_nccl_rank.close(c);
  return all_freed();
}

/* stalled_send: rank 0's send kernels never deliver (HS_EMU_NCCL_STALL_SEND); rank 1 receives. */
static int stalled_main(int rank) {
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  STEP(10, !open_rank(&c, rank, 2, 1.0, NULL, &d), "open: %s", d.msg);
  float host[NF];
  for (int i = 0; i < NF; i++) host[i] = (float)i;
  double t0 = hs_real_mono();
  int rc = rank == 0 ? hs_real_comm_nccl_rank.send(c, 0, 1, 7, host, NF, &d)
                     : hs_real_comm_nccl_rank.recv(c, 1, 0, 7, host, NF, &d);
  double took = hs_real_mono() - t0;
  fprintf(stderr, "rank %d: %s over a stalled link: %s (%.2f s)\n", rank, rank ? "recv" : "send", rc ? d.msg : "succeeded",
          took);
  STEP(11, rc == HS_ERUNTIME, "the transfer did not fail");
  STEP(12, took < 3, "the failure took %.2f s (timeout 1 s)", took);
  hs_real_comm_nccl_rank.close(c);
  return all_freed();
}

/* abort: rank 0's all-reduce (rank 1 never joins) is ended by abort() from another thread. */
static void *aborter(void *p) {
  nanosleep(&(struct timespec){0, 300000000L}, NULL);
  hs_real_comm_nccl_rank.abort(p);
  return NULL;
}

static int abort_main(int rank) {
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  STEP(10, !open_rank(&c, rank, 2, 10, NULL, &d), "open: %s", d.msg);
  double t0 = hs_real_mono();
  int rc;
  if (rank == 0) {
    float *dev = NULL;
    STEP(11, cudaMalloc((void **)&dev, NF * sizeof(float)) == cudaSuccess && !fill(dev, rank, value), "cuda set-up");
    static const int ranks[2] = {0, 1};
    pthread_t th;
    STEP(12, !pthread_create(&th, NULL, aborter, c), "thread");
    rc = hs_real_comm_nccl_rank.allreduce(c, 1, 0, dev, NF, ranks, 2, NULL, &d);
    pthread_join(th, NULL);
    double took = hs_real_mono() - t0;
    STEP(13, rc == HS_EINTR && took < 2, "all-reduce ended by abort: %d after %.2f s: %s", rc, took, d.msg);
    hs_real_comm_nccl_rank.close(c);
    cudaFree(dev);
    return all_freed();
  }
  float host[NF];
  rc = hs_real_comm_nccl_rank.recv(c, 1, 0, 3, host, NF, &d);
  double took = hs_real_mono() - t0;
  STEP(13, rc == HS_ERUNTIME && strstr(d.msg, "rank 0 failed") && took < 5,
       "a receive from rank 0, which aborted: %d after %.2f s: %s", rc, took, d.msg);
  hs_real_comm_nccl_rank.close(c);
  return all_freed();
}

/* killed_in_teardown: rank 0 closes at once, its finalize waiting for rank 1, which is killed. */
static int teardown_main(int rank) {
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  STEP(10, !open_rank(&c, rank, 2, 30, NULL, &d), "open: %s", d.msg);
  tell_parent("HS_NCCL_EMU_OPENED_FD");
  if (rank == 1) {
    for (int i = 0; i < 600; i++) nanosleep(&(struct timespec){0, 100000000L}, NULL);
    return 20; /* never reached: the parent kills it */
  }
  double t0 = hs_real_mono();
  hs_real_comm_nccl_rank.close(c);
  double took = hs_real_mono() - t0;
  hs_emu_nccl_stats *st = hs_emu_nccl_stats_get();
  STEP(11, took > 0.1 && took < 5, "close while the peer was killed took %.2f s (timeout 30 s)", took);
  STEP(12, stat_load(&st->aborted) == 1 && stat_load(&st->destroyed) == 0 && stat_load(&st->finalized) == 0,
       "the communicator was not aborted: %ld aborted, %ld destroyed", stat_load(&st->aborted),
       stat_load(&st->destroyed));
  return 0;
}

/* init_fail: rank 1's ncclCommInitRankConfig fails at once (HS_EMU_NCCL_INIT_FAIL): its open
 * fails, and rank 0, waiting for the communicator, hears that rank 1 failed instead of a
 * goodbye, and fails at once rather than at its timeout. */
static int init_fail_main(int rank) {
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  double t0 = hs_real_mono();
  int rc = open_rank(&c, rank, 2, 20, NULL, &d);
  double took = hs_real_mono() - t0;
  fprintf(stderr, "rank %d: open with rank 1's set-up failing: %s (%.2f s)\n", rank, rc ? d.msg : "succeeded", took);
  STEP(10, rc != 0, "the open succeeded");
  if (rank == 0) STEP(11, strstr(d.msg, "rank 1") != NULL, "the failure does not name rank 1: %s", d.msg);
  STEP(12, took < 5, "the failure took %.2f s (timeout 20 s)", took);
  return all_freed();
}

/* missing_rank: a rank alone in a world of two fails its open at the timeout. */
static int alone_main(int rank) {
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  double t0 = hs_real_mono();
  int rc = open_rank(&c, rank, 2, 1.0, NULL, &d);
  double took = hs_real_mono() - t0;
  STEP(10, rc == HS_ERUNTIME && strstr(d.msg, rank ? "could not reach rank 0" : "heard from 1 of 2"),
       "open without the other rank: %d %s", rc, d.msg);
  STEP(11, took > 0.95 && took < 3, "the failure took %.2f s (timeout 1 s)", took);
  return 0;
}

static int child_main(const char *role) {
  int rank = env_int("HS_NCCL_EMU_RANK"), world = env_int("HS_NCCL_EMU_WORLD");
  me = rank;
  if (!strcmp(role, "functional")) return functional_main(rank, world);
  if (!strcmp(role, "solo")) return solo_main();
  if (!strcmp(role, "duplicate")) return duplicate_main(rank);
  if (!strcmp(role, "busy")) return survivor_main(rank, 1, env_int("HS_NCCL_EMU_VICTIM"));
  if (!strcmp(role, "idle")) return survivor_main(rank, 0, env_int("HS_NCCL_EMU_VICTIM"));
  if (!strcmp(role, "victim")) return victim_main(rank);
  if (!strcmp(role, "late")) return late_main(rank);
  if (!strcmp(role, "stalled")) return stalled_main(rank);
  if (!strcmp(role, "abort")) return abort_main(rank);
  if (!strcmp(role, "teardown")) return teardown_main(rank);
  if (!strcmp(role, "alone")) return alone_main(rank);
  if (!strcmp(role, "init_fail")) return init_fail_main(rank);
  fprintf(stderr, "unknown role %s\n", role);
  return 2;
}

/* --- the parent ---------------------------------------------------------------------------- */

/* A loopback port free right now (the ranks bind it a moment later; the tests that start ranks
 * on ports take turns, CMakeLists.txt's RESOURCE_LOCK). */
static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int port = -1;
  if (s >= 0 && !bind(s, (struct sockaddr *)&a, sizeof a) && !getsockname(s, (struct sockaddr *)&a, &len))
    port = ntohs(a.sin_port);
  if (s >= 0) close(s);
  return port;
}

/* One scenario's shared state: the emulation's folder, the port, the children. */
typedef struct scenario {
  char dir[256];
  int port;
  int n;
  pid_t pid[MAXW];
  const char *role[MAXW];
} scenario;

static int scenario_start(scenario *sc, const char *gpus) {
  memset(sc, 0, sizeof *sc);
  const char *tmp = getenv("TMPDIR");
  snprintf(sc->dir, sizeof sc->dir, "%s/hs-nccl-emu-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(sc->dir)) {
    HS_FAIL_AT("mkdtemp %s: %s", sc->dir, strerror(errno));
    return -1;
  }
  sc->port = free_port();
  if (sc->port < 0) {
    HS_FAIL_AT("no free port");
    return -1;
  }
  setenv("HS_EMU_DIR", sc->dir, 1);
  setenv("HS_EMU_GPUS", gpus, 1);
  char b[16];
  snprintf(b, sizeof b, "%d", sc->port);
  setenv("HS_NCCL_EMU_PORT", b, 1);
  return 0;
}

/* Starts this program again as one rank; extra is "VAR=VALUE" or NULL. */
static pid_t spawn(scenario *sc, const char *role, int rank, int world, const char *extra) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    char b[16];
    setenv("HS_NCCL_EMU_ROLE", role, 1);
    snprintf(b, sizeof b, "%d", rank);
    setenv("HS_NCCL_EMU_RANK", b, 1);
    snprintf(b, sizeof b, "%d", world);
    setenv("HS_NCCL_EMU_WORLD", b, 1);
    const char *eq = extra ? strchr(extra, '=') : NULL;
    if (eq) {
      char var[64];
      snprintf(var, sizeof var, "%.*s", (int)(eq - extra), extra);
      setenv(var, eq + 1, 1);
    }
    execl("/proc/self/exe", "test_deviceless_nccl", (char *)NULL);
    _exit(127);
  }
  if (sc->n < MAXW) {
    sc->role[sc->n] = role;
    sc->pid[sc->n++] = pid;
  }
  return pid;
}

/* Waits for every child, bounded: one still running after `within` s is killed and fails. */
static void scenario_end(scenario *sc, double within, pid_t killed) {
  double end = hs_real_mono() + within;
  for (int i = 0; i < sc->n; i++) {
    int st = 0;
    pid_t r;
    while ((r = waitpid(sc->pid[i], &st, WNOHANG)) == 0 && hs_real_mono() < end)
      nanosleep(&(struct timespec){0, 10000000L}, NULL);
    if (r == 0) {
      kill(sc->pid[i], SIGKILL);
      waitpid(sc->pid[i], &st, 0);
      HS_FAIL_AT("%s (pid %ld) still ran after %g s: killed", sc->role[i], (long)sc->pid[i], within);
    } else if (sc->pid[i] != killed && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
      HS_FAIL_AT("%s (pid %ld) ended with %s %d", sc->role[i], (long)sc->pid[i],
                 WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
  }
  DIR *dir = opendir(sc->dir);
  struct dirent *e;
  while (dir && (e = readdir(dir))) {
    if (e->d_name[0] == '.') continue;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", sc->dir, e->d_name);
    unlink(path);
  }
  if (dir) closedir(dir);
  rmdir(sc->dir);
}

static void test_loader_and_refusals(void) {
  const hs_cudalib_status *st = hs_cudalib_status_get(HS_CUDALIB_NCCL);
  const char *emu = getenv("HETSIM_NCCL_PATH");
  ASSERT_EQ(st->state, HS_CUDALIB_OK);
  ASSERT_EQ(st->version, 22803);
  ASSERT(emu && !strncmp(st->path, emu, strlen(emu)));
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  hs_real_comm_config cc = {.world = 2, .n = NF, .timeout_s = 5, .device = "cuda:0"};
  ASSERT_EQ(hs_real_comm_nccl.open(&c, &cc, &d), HS_EUNSUPPORTED);
  ASSERT_CONTAINS(d.msg, "mpirun");
  unsetenv("RANK"), unsetenv("WORLD_SIZE"), unsetenv("OMPI_COMM_WORLD_RANK"), unsetenv("OMPI_COMM_WORLD_SIZE");
  ASSERT_EQ(hs_real_comm_nccl_rank.open(&c, &cc, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "mpirun");
  hs_test_set_torchrun(0, 3, 1);
  ASSERT_EQ(hs_real_comm_nccl_rank.open(&c, &cc, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "world-size mismatch");
  hs_test_set_torchrun(0, 2, 1);
  setenv("HS_EMU_GPUS", "1", 1);
  cc.device = "cuda:5";
  ASSERT_EQ(hs_real_comm_nccl_rank.open(&c, &cc, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "has 1 GPU");
  cc.device = "gpu0";
  ASSERT_EQ(hs_real_comm_nccl_rank.open(&c, &cc, &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "cuda:I");
  ASSERT(c == NULL);
  unsetenv("RANK"), unsetenv("WORLD_SIZE"), unsetenv("MASTER_ADDR"), unsetenv("MASTER_PORT");
  ASSERT_EQ(hs_real_nccl_check("cuda:0", &d), 0);
  ASSERT_EQ(hs_real_nccl_check("cuda:3", &d), HS_EINVAL);
  ASSERT_CONTAINS(d.msg, "bad device index");
  setenv("HS_EMU_GPUS", "0", 1);
  ASSERT_EQ(hs_real_nccl_check("cuda:0", &d), HS_EUNSUPPORTED);
  ASSERT_CONTAINS(d.msg, "no usable GPU");
  (void)cudaGetLastError();
}

static void test_solo(void) {
  scenario sc;
  if (scenario_start(&sc, "1")) return;
  spawn(&sc, "solo", 0, 1, NULL);
  scenario_end(&sc, 60, 0);
}

static void run_functional(int world) {
  scenario sc;
  char gpus[8];
  snprintf(gpus, sizeof gpus, "%d", world);
  if (scenario_start(&sc, gpus)) return;
  for (int r = 0; r < world; r++) spawn(&sc, "functional", r, world, NULL);
  scenario_end(&sc, 60, 0);
}

static void test_functional_2(void) { run_functional(2); }
static void test_functional_3(void) { run_functional(3); }

static int make_pipe(int fds[2], const char *var_write, const char *var_read) {
  if (pipe(fds)) return -1;
  char b[16];
  if (var_write) snprintf(b, sizeof b, "%d", fds[1]), setenv(var_write, b, 1);
  if (var_read) snprintf(b, sizeof b, "%d", fds[0]), setenv(var_read, b, 1);
  return 0;
}

/* Reads n bytes from fd within `within` s. */
static int read_bytes(int fd, int n, double within) {
  double end = hs_real_mono() + within;
  while (n > 0) {
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int ms = (int)((end - hs_real_mono()) * 1000);
    if (ms <= 0 || poll(&pf, 1, ms) != 1) return -1;
    char x;
    if (read(fd, &x, 1) != 1) return -1;
    n--;
  }
  return 0;
}

static void test_duplicate_gpu(void) {
  scenario sc;
  if (scenario_start(&sc, "2")) return;
  int said[2];
  if (make_pipe(said, "HS_NCCL_EMU_OPENED_FD", NULL)) {
    HS_FAIL_AT("pipe");
    return;
  }
  for (int r = 0; r < 2; r++) spawn(&sc, "duplicate", r, 2, NULL);
  close(said[1]);
  scenario_end(&sc, 60, 0);
  char b[2] = {0, 0};
  ASSERT_EQ(read(said[0], b, 2), 2);
  ASSERT(b[0] == 'D' || b[1] == 'D');
  close(said[0]);
}

static void run_killed(int victim) {
  scenario sc;
  if (scenario_start(&sc, "3")) return;
  char v[16];
  snprintf(v, sizeof v, "%d", victim);
  setenv("HS_NCCL_EMU_VICTIM", v, 1);
  int opened[2], go[2];
  if (make_pipe(opened, "HS_NCCL_EMU_OPENED_FD", NULL) || make_pipe(go, NULL, "HS_NCCL_EMU_GO_FD")) {
    HS_FAIL_AT("pipe");
    return;
  }
  int busy = (victim + 1) % 3, idle = (victim + 2) % 3;
  pid_t vp = spawn(&sc, "victim", victim, 3, NULL);
  spawn(&sc, "busy", busy, 3, NULL);
  spawn(&sc, "idle", idle, 3, NULL);
  close(opened[1]);
  close(go[0]);
  int ok = !read_bytes(opened[0], 3, 30);
  ASSERT(ok);
  /* The busy survivor is then waiting inside its all-reduce. */
  nanosleep(&(struct timespec){0, 300000000L}, NULL);
  kill(vp, SIGKILL);
  /* The idle survivor starts its all-reduce once the death has surely been noticed. */
  nanosleep(&(struct timespec){0, 500000000L}, NULL);
  (void)!write(go[1], "x", 1);
  scenario_end(&sc, 60, vp);
  close(opened[0]);
  close(go[1]);
}

static void test_killed_rank(void) { run_killed(2); }
static void test_killed_hub(void) { run_killed(0); }

static void test_timeout(void) {
  scenario sc;
  if (scenario_start(&sc, "2")) return;
  int opened[2], go[2];
  if (make_pipe(opened, "HS_NCCL_EMU_OPENED_FD", NULL) || make_pipe(go, NULL, "HS_NCCL_EMU_GO_FD")) {
    HS_FAIL_AT("pipe");
    return;
  }
  pid_t r0 = spawn(&sc, "late", 0, 2, NULL);
  spawn(&sc, "late", 1, 2, NULL);
  close(opened[1]);
  close(go[0]);
  ASSERT(!read_bytes(opened[0], 1, 30));
  /* Rank 1 tries its barrier once rank 0 has failed and left. */
  int st = 0;
  double end = hs_real_mono() + 30;
  pid_t r;
  while ((r = waitpid(r0, &st, WNOHANG)) == 0 && hs_real_mono() < end) nanosleep(&(struct timespec){0, 10000000L}, NULL);
  if (r == 0) {
    kill(r0, SIGKILL);
    waitpid(r0, &st, 0);
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) HS_FAIL_AT("rank 0 ended with %s 0x%x", r ? "status" : "a kill after 30 s", st);
  (void)!write(go[1], "x", 1);
  sc.pid[0] = sc.pid[1]; /* rank 0 is reaped: only rank 1 is left */
  sc.role[0] = sc.role[1];
  sc.n = 1;
  scenario_end(&sc, 60, 0);
  close(opened[0]);
  close(go[1]);
}

static void test_stalled_send(void) {
  scenario sc;
  if (scenario_start(&sc, "2")) return;
  spawn(&sc, "stalled", 0, 2, "HS_EMU_NCCL_STALL_SEND=1");
  spawn(&sc, "stalled", 1, 2, NULL);
  scenario_end(&sc, 60, 0);
}

static void test_abort(void) {
  scenario sc;
  if (scenario_start(&sc, "2")) return;
  for (int r = 0; r < 2; r++) spawn(&sc, "abort", r, 2, NULL);
  scenario_end(&sc, 60, 0);
}

static void test_killed_in_teardown(void) {
  scenario sc;
  if (scenario_start(&sc, "2")) return;
  int opened[2];
  if (make_pipe(opened, "HS_NCCL_EMU_OPENED_FD", NULL)) {
    HS_FAIL_AT("pipe");
    return;
  }
  spawn(&sc, "teardown", 0, 2, NULL);
  pid_t victim = spawn(&sc, "teardown", 1, 2, NULL);
  close(opened[1]);
  ASSERT(!read_bytes(opened[0], 2, 30));
  nanosleep(&(struct timespec){0, 300000000L}, NULL);
  kill(victim, SIGKILL);
  scenario_end(&sc, 60, victim);
  close(opened[0]);
}

static void test_init_fail(void) {
  scenario sc;
  if (scenario_start(&sc, "2")) return;
  spawn(&sc, "init_fail", 0, 2, NULL);
  spawn(&sc, "init_fail", 1, 2, "HS_EMU_NCCL_INIT_FAIL=1");
  scenario_end(&sc, 60, 0);
}

/* Each rank alone, on ports of their own, side by side. */
static void test_missing_rank(void) {
  scenario sc[2];
  for (int r = 0; r < 2; r++) {
    if (scenario_start(&sc[r], "2")) return;
    spawn(&sc[r], "alone", r, 2, NULL);
  }
  for (int r = 0; r < 2; r++) scenario_end(&sc[r], 60, 0);
}

static const hs_test_case cases[] = {
    {"loader_and_refusals", test_loader_and_refusals},
    {"solo", test_solo},
    {"functional_2", test_functional_2},
    {"functional_3", test_functional_3},
    {"duplicate_gpu", test_duplicate_gpu},
    {"killed_rank", test_killed_rank},
    {"killed_hub", test_killed_hub},
    {"timeout", test_timeout},
    {"stalled_send", test_stalled_send},
    {"abort", test_abort},
    {"killed_in_teardown", test_killed_in_teardown},
    {"init_fail", test_init_fail},
    {"missing_rank", test_missing_rank},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  const char *role = getenv("HS_NCCL_EMU_ROLE");
  if (role) return child_main(role);
  /* A pipe whose reader has died (a rank that failed) must not kill the parent. */
  signal(SIGPIPE, SIG_IGN);
  /* The emulated NCCL, unless the environment names another folder (ctest sets it). */
  const char *path = getenv("HETSIM_NCCL_PATH");
  if (!path || !*path) setenv("HETSIM_NCCL_PATH", HS_EMU_NCCL_DIR, 1);
  /* A generous bound on the emulation's waits that would hang a GPU (the cases' timeouts are
   * at most 30 s, and the failures they expect come within a few seconds). */
  if (!getenv("HS_EMU_BOUND_S")) setenv("HS_EMU_BOUND_S", "15", 1);
  return hs_test_main("deviceless_nccl", cases, argc, argv);
}

#endif
