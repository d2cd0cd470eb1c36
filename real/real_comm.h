/* real_comm: the communication backends of the real runtime (cpu, local, nccl), as one table.
 *
 * The real runtime (real_run.h) moves gradients and models through a backend chosen by name:
 *   cpu    workers are threads of one process; buffers are host memory; reductions are loops
 *          (real_cpu.c)
 *   local  workers are threads of one process, each on its own green-context SM partition of
 *          one GPU; buffers are device memory; reductions are cuBLAS axpy calls on the device
 *          (real_local.c)
 *   nccl   one process per GPU (mpirun, or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT as torchrun
 *          sets them); the ncclUniqueId travels over a TCP socket from rank 0; ncclAllReduce
 *          for all-reduce, ncclSend/ncclRecv for the parameter server (real_nccl.c)
 *
 * Ranks: workers are ranks 0..workers-1; the parameter server, when the run has one, is rank
 * `workers` (so world = workers + 1).
 *
 * Operations (every one is called by the thread or process that owns `rank`):
 * - allreduce: every participant of `ranks` calls it with the same `op` id, its own buffer of n
 *   floats and the same weights; on return each buffer holds sum_i weights[i] * buf_i (the
 *   weights are used as given). Participants may arrive in any order.
 * - send/recv: one point-to-point transfer of n floats from `rank` to `peer`, matched by
 *   (source, destination, tag). A send may return before the receiver has the bytes, but not
 *   before it is done with `buf`: the caller may change the buffer once send returns (the cpu
 *   backend copies the message, nccl returns when the transfer is done).
 * - barrier: every rank of the world.
 * - abort: makes every wait in progress or to come return HS_EINTR promptly (the runtime calls
 *   it when the run ends early or fails, so that no thread waits for a partner that will never
 *   come). Safe to call from any thread, more than once.
 * Every wait is bounded by cfg.timeout_s: a partner that does not arrive in time is HS_ERUNTIME
 * with a message naming the operation, the rank and the missing partners.
 *
 * Threading: a comm handle is shared by all the process's worker threads; the backend
 * synchronises internally. Errors are values; nothing exits. Units: floats (n), seconds. */
#ifndef HS_REAL_COMM_H
#define HS_REAL_COMM_H

#include <stdint.h>
#include <time.h>

#include "core/core_error.h"

#define HS_REAL_COMM_VERSION 1

typedef struct hs_real_comm hs_real_comm;

typedef struct hs_real_comm_config {
  int world;          /* ranks in all: workers, plus one when there is a parameter server */
  int64_t n;          /* floats of the largest buffer (one model or gradient) */
  double timeout_s;   /* bound on every wait; <= 0 = 60 s */
  const char *device; /* local: the GPU ("cuda:0"); others: ignored */
  /* Per-process backends (the ranks'): while open waits for its peers, a nonzero *cancel (read
   * atomically) ends it with HS_EINTR, as the multi-process runtime sets it when rank 0 says stop
   * during start-up (a rank that will never come). NULL: the timeout alone bounds it. */
  const int *cancel;
} hs_real_comm_config;

/* CLOCK_MONOTONIC, s: the clock of every bound and timestamp of the real mode. */
static inline double hs_real_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The bound a timeout_s of the real mode's stands for (a run's, a backend's): itself, or 60 s
 * where it is not positive (NaN too). */
static inline double hs_real_timeout(double timeout_s) { return timeout_s > 0 ? timeout_s : 60; }

typedef struct hs_real_comm_ops {
  int version; /* HS_REAL_COMM_VERSION */
  const char *name;
  const char *description;
  /* Where the buffers live: 0 host memory, 1 device memory. */
  int device_buffers;
  int (*open)(hs_real_comm **out, const hs_real_comm_config *cfg, hs_diag *d);
  void (*close)(hs_real_comm *c); /* NULL is fine */
  int (*allreduce)(hs_real_comm *c, uint64_t op, int rank, float *buf, int64_t n, const int *ranks,
                   int nranks, const double *weights, hs_diag *d);
  int (*send)(hs_real_comm *c, int rank, int peer, uint64_t tag, const float *buf, int64_t n,
              hs_diag *d);
  int (*recv)(hs_real_comm *c, int rank, int peer, uint64_t tag, float *buf, int64_t n, hs_diag *d);
  int (*barrier)(hs_real_comm *c, int rank, hs_diag *d);
  void (*abort)(hs_real_comm *c);
  /* What a round costs beyond moving bytes, for a model of the run (`hetsim validate`): the
   * hand-offs between threads (a thread woken from a condition variable, which `hetsim calib`
   * times as comm_sample op "wake") on the critical path of one all-reduce, and of one
   * parameter-server message (a push or a pull's reply), in the threaded runtime over this
   * backend. 0 = none counted (the backend's waits are not condition waits, or not measured). */
  int handoffs_per_allreduce;
  int handoffs_per_message;
} hs_real_comm_ops;

extern const hs_real_comm_ops hs_real_comm_cpu;
extern const hs_real_comm_ops hs_real_comm_local;
extern const hs_real_comm_ops hs_real_comm_nccl;

/* The backend called name, or NULL; HS_EINVAL in d lists the valid names. */
const hs_real_comm_ops *hs_real_comm_find(const char *name, hs_diag *d);

/* The nccl backend's view of how this process was started. */
typedef struct hs_real_launch {
  int rank, world;      /* -1 when the environment names none */
  char master_addr[256];
  int master_port;      /* the first of hetsim's two ports (data channel; control at +1) */
  int agent_store;      /* 1 under torchrun's agent store: master_port is MASTER_PORT + 1 */
  const char *source;   /* "mpirun", "torchrun", or "none" */
  /* The ranks on this machine and this process's place among them: OMPI_COMM_WORLD_LOCAL_RANK
   * and _LOCAL_SIZE (mpirun), LOCAL_RANK and LOCAL_WORLD_SIZE (torchrun); where the launcher
   * sets neither and MASTER_ADDR is a loopback address (127.x, localhost, ::1), every rank is
   * on this machine (rank, world). -1 when not known (a malformed value included: they only
   * decide pinning, real_rank.h). */
  int local_rank, local_world;
} hs_real_launch;
/* Reads OMPI_COMM_WORLD_RANK/SIZE (mpirun) or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT
 * (torchrun), and the local placement (above). HS_EINVAL with a message for a malformed or inconsistent environment (a rank not
 * below the world size, a world size that differs from `expect_world` when that is > 0, a
 * missing MASTER_ADDR or MASTER_PORT). A process with neither set gets source "none". Under
 * torchrun with TORCHELASTIC_USE_AGENT_STORE=True (torch >= 2: the agent's store listens on
 * MASTER_PORT), hetsim's ports are MASTER_PORT+1 and +2. */
int hs_real_launch_read(hs_real_launch *l, int expect_world, hs_diag *d);

#endif
