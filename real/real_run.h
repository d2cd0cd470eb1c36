/* real_run: the threaded real runtime: the threads driver of the runtime core
 * (runtime/rt_core.h), which implements the policy interface (pol_policy.h): checks, worker
 * table, timers and cluster events, iteration counting, step records, stop conditions and
 * evaluations are the core's, as in the simulator. This driver really trains a zoo model: one
 * worker per thread, each with its own net (nn_net.h) and shard of the training data
 * (real_worker.h), and a communication backend (real_comm.h) for all-reduce and the parameter
 * server. The same policy objects that drive the simulator drive it.
 *
 * Threads: a lane per worker and one for the parameter server, each a thread that runs the
 * actions the policy queued on it in order (compute a step, apply a local update, take part in
 * an all-reduce, push, pull, apply). Compute and communication run concurrently on the lanes;
 * a worker whose net (in host memory) holds the global model that an all-reduce of gradients
 * updates applies the update to its own parameters instead of copying the global model in;
 * the core, the policy's callbacks, the step sink and the evaluation sink are serialised under
 * one mutex (policies are not thread-safe). The calling thread fires timers and cluster events and watches
 * for the end, an interrupt and a stall. Evaluations: the global model is copied at the update
 * that is due one and evaluated after the run (after an interruption too), where it does not
 * take a core from the workers; with a target loss, or once the waiting copies exceed 256 MiB,
 * the calling thread evaluates them during the run. Each is stored with the time and step of
 * its update either way.
 *
 * Numerics (the same as the simulator's proxy convergence model, docs/convergence.md): plain
 * SGD at the learning rate (policies may change it with set_lr), a global model held by the
 * runtime (what a parameter server or the last all-reduce holds), and
 *   all-reduce GRAD    global -= lr * sum_i w_i g_i; participants take the global model
 *   all-reduce MODEL   global = sum_i w_i x_i;       participants take the global model
 *   push GRAD          global -= lr * g_w            (applied on arrival, or accumulated)
 *   push MODEL         global += x_w - base_w        (progress since its last sync or push)
 *   apply              global -= lr * (sum b_i g_i) / (sum b_i), or += mean model delta
 *   pull               the worker takes the global model
 * weights NULL = b_i / sum b over the participants' last steps; given weights are normalised to
 * sum 1. An operation's content is taken when its lane reaches it (after the lane's earlier
 * actions), so communication overlaps other workers' compute but not the same worker's.
 * A gradient or model delta sent with a compressor goes through the compressor's real round
 * trip (pol_compress.h, one context per worker, as the simulator's proxy model), so what the
 * others or the server receive is what the compressor lets through; the bytes on the wire stay
 * fp32. Overlapped and hierarchical all-reduces are refused (HS_REAL_THREADS_CAPS;
 * hs_runtime_check_caps before the run).
 *
 * Time: CLOCK_MONOTONIC, 0 at the start of the run. Heterogeneity on one machine is emulated
 * from the cluster file: a worker whose compute slowdown is s (its initial `slowdown`, then the
 * slowdown events at their times) measures the real compute time t of a step and then sleeps
 * (s - 1) * t, so the step lasts s * t, with s read when the step starts, exactly as the
 * simulator applies a slowdown. s < 1 cannot be emulated and counts as 1; comm_slowdown is
 * not emulated. `leave` events are honoured. `join` events too: every worker the run will
 * have (hs_cluster_all_workers) gets its net, buffers, data iterator and lane before the run,
 * so a joiner costs no set-up inside the run; at its event it enters the core with the next
 * number, takes the global model (as the simulator's joiner fetches it) and then joins the
 * policy's groups. The data is sharded over the workers at the start; a joiner w reads shard
 * w mod N of them, as the simulator's proxy convergence model's joiners do.
 *
 * Contract: hs_real_run returns 0 when the run ended (result.status says how) or a negative
 * code when it could not start or failed (the diag says why; rows already handed to the sinks
 * stay). It frees everything it allocates; the caller owns the config and what it points to.
 * Units: seconds, samples, floats. */
#ifndef HS_REAL_RUN_H
#define HS_REAL_RUN_H

#include <signal.h>
#include <stdint.h>

#include "core/core_affinity.h"
#include "core/core_config.h"
#include "core/core_perfmodel.h"
#include "core/core_store.h"
#include "nn/nn_data.h"
#include "policies/pol_policy.h"
#include "real/real_comm.h"
#include "runtime/rt_core.h"

/* What the threaded runtime can do (pol_policy.h's HS_CAP_*): the CLI checks a run against it
 * with hs_runtime_check_caps (runtime/rt_core.h) before it stores anything. */
#define HS_REAL_THREADS_CAPS (HS_CAP_COMPRESSION | HS_CAP_SUBSET | HS_CAP_LEAVE | HS_CAP_JOIN)

typedef enum hs_real_status {
  HS_REAL_COMPLETE = 0,    /* a stop condition was reached */
  HS_REAL_INTERRUPTED = 1, /* *stop became non-zero */
  HS_REAL_STALLED = 2      /* nothing was left to do before any stop condition */
} hs_real_status;

typedef int hs_real_step_sink(void *ctx, const hs_step_row *row, hs_diag *d);
typedef int hs_real_eval_sink(void *ctx, double time_s, int64_t step, double loss,
                              double accuracy, hs_diag *d);

/* Worker threads and CPUs: HS_PIN_AUTO pins worker i's thread to the i-th CPU the process may
 * use when the nets run on the CPU and every worker has a CPU of its own (core_affinity.h says
 * why); HS_PIN_NONE leaves the threads to the scheduler. The parameter server's thread, the
 * caller's and GPU workers' are never pinned. */
typedef enum { HS_PIN_AUTO = 0, HS_PIN_NONE = 1 } hs_real_pin;

typedef struct hs_real_config {
  const hs_cluster_spec *cluster; /* may be NULL: n_workers equal workers, no events */
  int n_workers;                  /* used when cluster is NULL */
  const char *model;
  const char *device;             /* the nets' device: "cpu" */
  /* Per worker (an entry for each of hs_cluster_all_workers, joiners included; NULL = every
   * worker on `device`): the local backend's way to
   * emulate a heterogeneous cluster on one GPU, partitions of different sizes
   * ("cuda:0/sm=16", "cuda:0/sm=48", ...; nn_cuda.h). The backend and the evaluation net use
   * `device`. */
  const char *const *worker_devices;
  const hs_real_comm_ops *comm;
  double timeout_s;               /* bound on every wait (comm, a silent rank, emulated sleeps); <= 0 = 60 */
  const hs_dataset *train;        /* sharded over the workers */
  const hs_dataset *test;         /* evaluations; may be NULL (no evaluation) */
  int64_t global_batch;
  const hs_policy *policy;
  const hs_params *params;
  uint64_t seed;
  double lr;                      /* initial learning rate */
  int64_t eval_every;             /* global updates between evaluations; 0 = only at the end */
  int64_t max_iterations;         /* 0 = no limit */
  double max_epochs;              /* 0 = no limit */
  double max_time;                /* s; 0 = no limit */
  double target_loss;             /* end at the first evaluation with loss <= this; 0 = none */
  double target_accuracy;         /* end at the first evaluation with accuracy >= this (a
                                   * fraction); 0 = none. With target_loss too, both must be met. */
  /* The device's calibrated step model (hs_rt_predict); NULL: a linear fit of steps timed
   * before the run starts, on worker 0 (the ranks), or once per device (the threads:
   * hs_real_first_on_device). */
  const hs_perf_model *perf;
  hs_real_step_sink *sink;        /* may be NULL */
  void *sink_ctx;
  hs_real_eval_sink *eval_sink;   /* may be NULL */
  void *eval_ctx;
  volatile sig_atomic_t *stop;    /* may be NULL */
  hs_real_pin pin;                /* HS_PIN_AUTO (0): see hs_real_pins */
  /* Per worker (as worker_devices; NULL, or a NULL entry: `perf`): the step model of a worker
   * on a device of its own (worker_devices), so that a policy sees partitions of different
   * sizes as unequal (hs_real_plan_worker_perf). */
  const hs_perf_model *const *worker_perf;
} hs_real_config;

/* A worker's part of the result, by the runtime core's rule (rt_core.h's hs_rt_core_summary):
 * busy_s is compute with the emulated slowdown, a step in progress at the end counted up to
 * the end; steps and samples are finished steps. */
typedef hs_rt_worker_stats hs_real_worker_stats;

/* A step-time fit t(b) = t0 + k·b, s and s/sample. */
typedef struct hs_real_fit {
  double t0, k;
} hs_real_fit;

typedef struct hs_real_result {
  hs_real_status status;
  hs_summary summary;             /* wall_s is left for the caller; events = steps run */
  int n_workers;
  hs_real_worker_stats *workers;  /* free with hs_real_result_free */
  /* Per worker (n_workers entries): the pre-run fit t(b) = t0 + k·b that a policy's predictions
   * of its steps come from (before its slowdown). The threads time one worker per device and
   * share its fit; the ranks time every worker's rank on its own device. NULL when every worker
   * is predicted by a calibration (perf; in multi-process mode, each rank's own), NaN for such a
   * worker among fitted ones. Freed by hs_real_result_free. */
  hs_real_fit *fits;
} hs_real_result;

int hs_real_run(const hs_real_config *cfg, hs_real_result *res, hs_diag *d);

/* For both real drivers (the threads, real/real_rank.c's ranks): what the run asks of the
 * runtime core (policy, limits, targets, sinks), from its config; and the checks of a config
 * of n workers before anything starts (evaluates: this process evaluates, so a target needs a
 * test set): 0, or HS_EINVAL with the message in d. */
void hs_real_job(const hs_real_config *cfg, hs_rt_core_job *j);
int hs_real_check(const hs_real_config *cfg, int n, int evaluates, hs_diag *d);

/* Worker w's device: its own (worker_devices) or the config's `device`. */
const char *hs_real_worker_device(const hs_real_config *cfg, int w);
/* The first worker whose device is worker w's (w when none before it): without `perf`, the
 * threads time steps once per device before the run, on that worker's net, and predict every
 * worker on the device from that fit. */
int hs_real_first_on_device(const hs_real_config *cfg, int w);

/* Whether hs_real_run pins the threads of a run of `workers` workers under cfg (1 or 0); fills
 * cpus with the CPUs it would use. */
int hs_real_pins(const hs_real_config *cfg, int workers, hs_cpus *cpus);
void hs_real_result_free(hs_real_result *res);

#endif
