/* The real runtime's GPU communication backends (real/real_local.c, real/real_nccl.c).
 *
 * - local: three worker threads, each with a net on its own green-context partition of GPU 0,
 *   share their gradients through the local backend's weighted all-reduce; every worker ends
 *   with sum_i w_i g_i (checked against the same sum on the host).
 * - nccl, one rank (per-process table, real_nccl.h), in a child started torchrun-style with
 *   WORLD_SIZE=1: runs on any one GPU and any NCCL. A weighted all-reduce of a net's gradient
 *   right after an asynchronous SGD update of the same net (the all-reduce must follow the net's
 *   stream; one rank's sum is its own weighted buffer), a barrier, then the clean teardown.
 * - nccl, two forked ranks on GPU 0, started torchrun-style (RANK/WORLD_SIZE/MASTER_ADDR/
 *   MASTER_PORT). Two ranks on one GPU need a recent NCCL (2.30 or later) with
 *   NCCL_MULTI_RANK_GPU_ENABLE=1; where NCCL refuses them ("Duplicate GPU detected", NCCL 2.28
 *   among others) those cases say so and pass, after the refusal came (promptly: it is an error
 *   of the non-blocking set-up). A weighted all-reduce, a send/recv pair out of tag order, a
 *   barrier; then a rank killed (SIGKILL) while the other waits in an all-reduce whose timeout is
 *   120 s: the survivor must fail with a message naming the dead rank (the control channel
 *   noticed), not the timeout.
 * Needs a GPU: exits 77 (skipped) where "cuda:0" cannot be opened. NOT RUN ON A GPU YET. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core_buildinfo.h"
#include "nn/nn_cudalib.h"
#include "nn/nn_net.h"
#include "real/real_comm.h"
#include "real/real_nccl.h"
#include "tests/hs_test.h"

#define WORKERS 3

typedef struct lworker {
  hs_real_comm *comm;
  int rank;
  hs_net *net;
  int64_t p;
  float *g;
  int rc;
  char msg[1024];
} lworker;

static const double lweights[WORKERS] = {0.5, 0.3, 0.2};

static float grad_value(int w, int64_t i) { return (float)((w + 1) * 0.25 + 0.001 * (double)(i % 97)); }

static void *lworker_main(void *p) {
  lworker *x = p;
  hs_diag d = {0};
  static const int ranks[WORKERS] = {0, 1, 2};
  /* Through the net, so that its context is current on this thread, as in the runtime. */
  x->rc = hs_net_set_grads(x->net, x->g, &d);
  if (!x->rc) x->rc = hs_real_comm_local.allreduce(x->comm, 7, x->rank, hs_net_grads(x->net), x->p, ranks, WORKERS,
                                                   lweights, &d);
  if (!x->rc) x->rc = hs_net_get_grads(x->net, x->g, &d);
  snprintf(x->msg, sizeof x->msg, "%s", d.msg);
  return NULL;
}

static void test_local_weighted_allreduce(void) {
  hs_diag d = {0};
  lworker w[WORKERS];
  memset(w, 0, sizeof w);
  hs_net_options o = {.seed = 3};
  for (int i = 0; i < WORKERS; i++) {
    ASSERT_EQ(hs_net_open(&w[i].net, "cuda:0/sm=16", "mlp", &o, &d), 0);
    if (!w[i].net) {
      fprintf(stderr, "  %s\n", d.msg);
      goto out;
    }
    w[i].p = hs_net_param_count(w[i].net);
    w[i].rank = i;
    w[i].g = malloc((size_t)w[i].p * sizeof *w[i].g);
    for (int64_t k = 0; k < w[i].p; k++) w[i].g[k] = grad_value(i, k);
  }
  hs_real_comm *c = NULL;
  hs_real_comm_config cc = {.world = WORKERS, .n = w[0].p, .timeout_s = 60, .device = "cuda:0/sm=16"};
  ASSERT_EQ(hs_real_comm_local.open(&c, &cc, &d), 0);
  if (!c) goto out;
  pthread_t th[WORKERS];
  for (int i = 0; i < WORKERS; i++) {
    w[i].comm = c;
    pthread_create(&th[i], NULL, lworker_main, &w[i]);
  }
  for (int i = 0; i < WORKERS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < WORKERS; i++) {
    if (w[i].rc) HS_FAIL_AT("worker %d: %s", i, w[i].msg);
    double worst = 0;
    for (int64_t k = 0; !w[i].rc && k < w[i].p; k++) {
      double want = 0;
      for (int j = 0; j < WORKERS; j++) want += lweights[j] * grad_value(j, k);
      double e = fabs(w[i].g[k] - want) / (fabs(want) + 1e-6);
      if (e > worst) worst = e;
    }
    ASSERT(worst < 1e-5);
  }
  hs_real_comm_local.close(c);
out:
  for (int i = 0; i < WORKERS; i++) {
    hs_net_close(w[i].net);
    free(w[i].g);
  }
}

/* --- nccl: forked ranks --------------------------------------------------------------------- */

#if HETSIM_HAVE_CUDA && HETSIM_HAVE_NCCL

#include <cuda_runtime_api.h>

#define NC_FLOATS 1000

/* A child must not inherit the parent's CUDA state (CUDA does not survive fork): it runs this
 * program again with its role in HS_GPU_REAL_ROLE ("rank0", "rank1", "victim", "survivor").
 * With rfd, the child's stdout is a pipe whose read end goes to *rfd. -1 when it cannot start. */
static pid_t spawn(const char *role, int port, int *rfd) {
  int fds[2] = {-1, -1};
  if (rfd && pipe(fds)) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (rfd) {
      dup2(fds[1], 1);
      close(fds[0]);
      close(fds[1]);
    }
    char b[16];
    snprintf(b, sizeof b, "%d", port);
    setenv("HS_GPU_REAL_ROLE", role, 1);
    setenv("HS_GPU_REAL_PORT", b, 1);
    execl("/proc/self/exe", "test_gpu_real", (char *)NULL);
    _exit(127);
  }
  if (rfd) {
    close(fds[1]);
    *rfd = fds[0];
  }
  return pid;
}

/* A child's exit status when NCCL refused two ranks on one GPU: the case cannot run here. */
#define REFUSED 3

/* 0 when NCCL can be tried here (and sets the variable that lets a recent NCCL put two ranks on
 * one GPU), else 1 with why. Whether this NCCL accepts two ranks on one GPU is found by trying:
 * an older one refuses them at set-up, and the children say so (REFUSED). */
static int nccl_usable(char *why, size_t len) {
  hs_diag d = {0};
  const hs_nccl_api *nccl = hs_nccl_api_get(&d);
  if (!nccl) {
    snprintf(why, len, "%.1000s", d.msg);
    return 1;
  }
  setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
  return 0;
}

/* A failed open: REFUSED when NCCL refused two ranks on one GPU, else `code`. */
static int open_failed(int rank, const hs_diag *d, int code) {
  int refused = strstr(d->msg, "Duplicate GPU") != NULL;
  fprintf(stderr, "rank %d: %s%s\n", rank, d->msg, refused ? " (this NCCL refuses two ranks on one GPU)" : "");
  return refused ? REFUSED : code;
}

/* One rank of the functional case; the exit status says which step failed (0 = all passed). */
static int rank_main(int rank, int port) {
  hs_test_set_torchrun(rank, 2, port);
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  hs_real_comm_config cc = {.world = 2, .n = NC_FLOATS, .timeout_s = 60, .device = "cuda:0"};
  if (hs_real_comm_nccl_rank.open(&c, &cc, &d)) return open_failed(rank, &d, 10);
  int status = 0;
  float host[NC_FLOATS], *dev = NULL;
  for (int i = 0; i < NC_FLOATS; i++) host[i] = (float)(rank + 1) * (float)(i % 13);
  static const int ranks[2] = {0, 1};
  static const double wts[2] = {0.75, 0.25};
  /* A buffer of no net: it must be completely written before the all-reduce (real_nccl.h), and a
   * cudaMemcpy from pageable memory may return before its DMA has landed. */
  if (cudaMalloc((void **)&dev, sizeof host) != cudaSuccess ||
      cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaDeviceSynchronize() != cudaSuccess)
    status = 11;
  if (!status && hs_real_comm_nccl_rank.allreduce(c, 1, rank, dev, NC_FLOATS, ranks, 2, wts, &d)) status = 12;
  if (!status && cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost) != cudaSuccess) status = 13;
  for (int i = 0; !status && i < NC_FLOATS; i++)
    if (fabsf(host[i] - (float)(0.75 * 1 + 0.25 * 2) * (float)(i % 13)) > 1e-4f) status = 14;
  /* Rank 0 sends tags 5 then 6; rank 1 asks for 6 first. */
  float a[NC_FLOATS], b[NC_FLOATS];
  for (int i = 0; i < NC_FLOATS; i++) a[i] = (float)i, b[i] = (float)-i;
  if (!status && rank == 0 &&
      (hs_real_comm_nccl_rank.send(c, 0, 1, 5, a, NC_FLOATS, &d) || hs_real_comm_nccl_rank.send(c, 0, 1, 6, b, NC_FLOATS, &d)))
    status = 15;
  if (!status && rank == 1) {
    float r6[NC_FLOATS], r5[NC_FLOATS];
    if (hs_real_comm_nccl_rank.recv(c, 1, 0, 6, r6, NC_FLOATS, &d) || hs_real_comm_nccl_rank.recv(c, 1, 0, 5, r5, NC_FLOATS, &d))
      status = 16;
    else if (memcmp(r6, b, sizeof b) || memcmp(r5, a, sizeof a)) status = 17;
  }
  if (!status && hs_real_comm_nccl_rank.barrier(c, rank, &d)) status = 18;
  if (status) fprintf(stderr, "rank %d: step %d: %s\n", rank, status, d.msg);
  cudaFree(dev);
  hs_real_comm_nccl_rank.close(c);
  return status;
}

/* Below the kernel's ephemeral ports (32768 and up here), where a connection's own local port,
 * or one in TIME_WAIT, can make the bind fail (tests/cli-lib.sh, first_port). */
static int port_base(void) { return 20000 + (int)(getpid() % 12000); }

static void test_nccl_two_ranks(void) {
  char why[1100];
  if (nccl_usable(why, sizeof why)) {
    printf("  (not run: %s)\n", why);
    return;
  }
  int port = port_base();
  pid_t kids[2] = {spawn("rank0", port, NULL), spawn("rank1", port, NULL)};
  int st[2] = {0, 0};
  for (int r = 0; r < 2; r++) waitpid(kids[r], &st[r], 0);
  for (int r = 0; r < 2; r++)
    if (WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == REFUSED) {
      printf("  (not run: this NCCL refuses two ranks on one GPU)\n");
      return;
    }
  for (int r = 0; r < 2; r++)
    if (!WIFEXITED(st[r]) || WEXITSTATUS(st[r]) != 0) HS_FAIL_AT("rank %d ended with status 0x%x", r, st[r]);
}

/* One rank alone (any NCCL, any GPU): the weighted all-reduce of a net's gradient queued right
 * after an SGD update of that net, which runs asynchronously on the net's stream; the exit
 * status says which step failed (0 = all passed). */
static int solo_main(int port) {
  hs_test_set_torchrun(0, 1, port);
  hs_diag d = {0};
  hs_net *net = NULL;
  hs_net_options o = {.seed = 5};
  if (hs_net_open(&net, "cuda:0", "mlp", &o, &d)) {
    fprintf(stderr, "solo: %s\n", d.msg);
    return 9;
  }
  int64_t p = hs_net_param_count(net);
  hs_real_comm *c = NULL;
  hs_real_comm_config cc = {.world = 1, .n = p, .timeout_s = 60, .device = "cuda:0"};
  if (hs_real_comm_nccl_rank.open(&c, &cc, &d)) {
    fprintf(stderr, "solo: %s\n", d.msg);
    hs_net_close(net);
    return 10;
  }
  int status = 0;
  float *g = malloc((size_t)p * sizeof *g), *w0 = malloc((size_t)p * sizeof *w0), *w1 = malloc((size_t)p * sizeof *w1);
  static const int ranks[1] = {0};
  static const double wt[1] = {0.25};
  hs_sgd opt = {.lr = 0.5, .momentum = 0, .weight_decay = 0};
  if (!g || !w0 || !w1) status = 11;
  for (int64_t k = 0; !status && k < p; k++) g[k] = grad_value(0, k);
  /* params: w0 - lr * g after the update; the all-reduce of the parameters (weight 0.25) must
   * see the updated values, then the gradient's (weight 0.25) must scale g. */
  if (!status && (hs_net_get_params(net, w0, &d) || hs_net_set_grads(net, g, &d) || hs_net_update(net, &opt, &d)))
    status = 12;
  if (!status && hs_real_comm_nccl_rank.allreduce(c, 1, 0, hs_net_params(net), p, ranks, 1, wt, &d)) status = 13;
  if (!status && hs_net_get_params(net, w1, &d)) status = 14;
  double worst = 0;
  for (int64_t k = 0; !status && k < p; k++) {
    double want = 0.25 * ((double)w0[k] - 0.5 * (double)g[k]);
    double e = fabs(w1[k] - want) / (fabs(want) + 1e-3);
    if (e > worst) worst = e;
  }
  if (!status && worst > 1e-5) {
    fprintf(stderr, "solo: parameters after update + all-reduce: relative error %g\n", worst);
    status = 15;
  }
  if (!status && hs_real_comm_nccl_rank.allreduce(c, 2, 0, hs_net_grads(net), p, ranks, 1, wt, &d)) status = 16;
  if (!status && hs_net_get_grads(net, w1, &d)) status = 17;
  for (int64_t k = 0; !status && k < p; k++)
    if (fabs(w1[k] - 0.25 * (double)g[k]) > 1e-6 * (fabs(g[k]) + 1)) status = 18;
  if (!status && hs_real_comm_nccl_rank.barrier(c, 0, &d)) status = 19;
  if (status) fprintf(stderr, "solo: step %d: %s\n", status, d.msg);
  hs_real_comm_nccl_rank.close(c);
  hs_net_close(net);
  free(g);
  free(w0);
  free(w1);
  return status;
}

static void test_nccl_one_rank(void) {
  char why[1100];
  if (nccl_usable(why, sizeof why)) {
    printf("  (not run: %s)\n", why);
    return;
  }
  pid_t kid = spawn("solo", port_base() + 2, NULL);
  int st = 0;
  waitpid(kid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) HS_FAIL_AT("the rank ended with status 0x%x", st);
}

/* Rank 0 waits in an all-reduce that rank 1 never joins: rank 1 is killed by the parent once both
 * have opened (each writes a byte to its pipe; rank 1 then sleeps). Rank 0's exit status: 0 when
 * the all-reduce failed with a message that names rank 1's death. */
static int survivor_main(int port) {
  hs_test_set_torchrun(0, 2, port);
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  hs_real_comm_config cc = {.world = 2, .n = NC_FLOATS, .timeout_s = 120, .device = "cuda:0"};
  if (hs_real_comm_nccl_rank.open(&c, &cc, &d)) return open_failed(0, &d, 10);
  (void)!write(1, "x", 1); /* opened: the parent kills rank 1 now */
  float *dev = NULL;
  int status = cudaMalloc((void **)&dev, NC_FLOATS * sizeof(float)) != cudaSuccess ? 11 : 0;
  static const int ranks[2] = {0, 1};
  if (!status) {
    int rc = hs_real_comm_nccl_rank.allreduce(c, 1, 0, dev, NC_FLOATS, ranks, 2, NULL, &d);
    fprintf(stderr, "rank 0: all-reduce after rank 1 was killed: %s\n", rc ? d.msg : "succeeded");
    status = rc == HS_ERUNTIME && strstr(d.msg, "rank 1") && strstr(d.msg, "died") ? 0 : 12;
  }
  cudaFree(dev);
  hs_real_comm_nccl_rank.close(c);
  return status;
}

/* The victim: opens as rank 1, says so on stdout (a pipe to the parent), then waits to be killed. */
static int victim_main(int port) {
  hs_test_set_torchrun(1, 2, port);
  hs_diag d = {0};
  hs_real_comm *c = NULL;
  hs_real_comm_config cc = {.world = 2, .n = NC_FLOATS, .timeout_s = 120, .device = "cuda:0"};
  if (hs_real_comm_nccl_rank.open(&c, &cc, &d)) return open_failed(1, &d, 10);
  (void)!write(1, "x", 1);
  for (;;) pause();
}

static void test_nccl_killed_rank(void) {
  char why[1100];
  if (nccl_usable(why, sizeof why)) {
    printf("  (not run: %s)\n", why);
    return;
  }
  int port = port_base() + 1;
  /* Both ranks say on stdout (a pipe each) that they opened; the victim is killed only then,
   * or the survivor's own set-up, still under way, would be what notices the death. */
  int vfd = -1, sfd = -1;
  pid_t victim = spawn("victim", port, &vfd);
  pid_t survivor = spawn("survivor", port, &sfd);
  ASSERT(victim > 0 && survivor > 0);
  char x;
  int opened = read(vfd, &x, 1) == 1;
  opened = read(sfd, &x, 1) == 1 && opened;
  close(vfd);
  close(sfd);
  kill(victim, SIGKILL);
  int vst = 0, st = 0;
  waitpid(victim, &vst, 0);
  waitpid(survivor, &st, 0);
  if (!opened && ((WIFEXITED(vst) && WEXITSTATUS(vst) == REFUSED) || (WIFEXITED(st) && WEXITSTATUS(st) == REFUSED))) {
    printf("  (not run: this NCCL refuses two ranks on one GPU)\n");
    return;
  }
  ASSERT(opened);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) HS_FAIL_AT("the surviving rank ended with status 0x%x", st);
}

/* A child's role, or -1 in the parent. */
static int child_role(void) {
  const char *role = getenv("HS_GPU_REAL_ROLE"), *port = getenv("HS_GPU_REAL_PORT");
  if (!role || !port) return -1;
  int p = atoi(port);
  if (!strcmp(role, "rank0")) return rank_main(0, p);
  if (!strcmp(role, "rank1")) return rank_main(1, p);
  if (!strcmp(role, "victim")) return victim_main(p);
  if (!strcmp(role, "survivor")) return survivor_main(p);
  if (!strcmp(role, "solo")) return solo_main(p);
  return 2;
}

#else

static void test_nccl_one_rank(void) { printf("  (not run: this build has no NCCL headers)\n"); }
static void test_nccl_two_ranks(void) { printf("  (not run: this build has no NCCL headers)\n"); }
static void test_nccl_killed_rank(void) { printf("  (not run: this build has no NCCL headers)\n"); }
static int child_role(void) { return -1; }

#endif

static const hs_test_case cases[] = {
    {"local_weighted_allreduce", test_local_weighted_allreduce},
    {"nccl_one_rank", test_nccl_one_rank},
    {"nccl_two_ranks", test_nccl_two_ranks},
    {"nccl_killed_rank", test_nccl_killed_rank},
    {NULL, NULL},
};

int main(int argc, char **argv) {
  int role = child_role();
  if (role >= 0) return role;
  hs_net_options o = {.seed = 1};
  hs_diag d = {0};
  hs_net *probe = NULL;
  int rc = hs_net_open(&probe, "cuda:0", "mlp", &o, &d);
  if (rc == HS_EUNSUPPORTED) {
    printf("skipped: %s\n", d.msg);
    return 77;
  }
  if (rc) {
    fprintf(stderr, "cuda:0: %s\n", d.msg);
    return 1;
  }
  hs_net_close(probe);
  return hs_test_main("gpu_real", cases, argc, argv);
}
