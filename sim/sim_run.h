/* sim_run: the simulated runtime: the simulation driver of the runtime core (runtime/rt_core.h).
 * The core implements the policy interface (pol_policy.h): checks, worker table, timers and
 * cluster events, iteration counting, step records, stop conditions, evaluations. This driver
 * moves simulated time on the event engine, over the cluster described by a cluster file and
 * the network model, feeds the convergence model, and reports every finished step to a sink
 * (the database, a test) through the core.
 *
 * Contract:
 * - hs_sim_run is deterministic for a given configuration and seed: the same inputs give the
 *   same step rows, bit for bit.
 * - It allocates what it needs and frees it before returning; the caller keeps ownership of
 *   everything in hs_sim_config.
 * - It returns 0 when the run ended (result.status says how), or a negative code when the run
 *   could not be set up or the policy failed (the diag says why).
 * Semantics (see DESIGN.md, "Simulation semantics", and docs/policies.md):
 * - A step's compute time is t(b) = t0 + per_sample * b of the worker's device type (or its
 *   calibrated model, cfg->perf), times its slowdown when the step starts, times lognormal
 *   jitter from the worker's own stream.
 * - An iteration is one update of the global model: an all-reduce, an applied push, or a
 *   server apply. The run ends after max_iterations iterations, once max_epochs worth of
 *   samples have been computed, or at max_sim_time, whichever comes first.
 * - With a convergence model, every step gets the model's loss, the global model is evaluated
 *   every `eval_every` iterations (a parameter of the model) and once more at the end, and the
 *   run also ends at the first evaluation that meets every target given (target_loss,
 *   target_accuracy); summary.time_to_target_s is that evaluation's time (NaN if none met).
 * Units: seconds, bytes, samples. */
#ifndef HS_SIM_RUN_H
#define HS_SIM_RUN_H

#include <signal.h>
#include <stdint.h>

#include "core/core_config.h"
#include "core/core_perfmodel.h"
#include "core/core_progress.h"
#include "core/core_store.h"
#include "policies/pol_policy.h"
#include "sim/sim_trace.h"

/* What the simulator can do (pol_policy.h's HS_CAP_*): everything. */
#define HS_SIM_CAPS HS_CAP_ALL

typedef enum hs_sim_status {
  HS_SIM_COMPLETE = 0,    /* a stop condition was reached */
  HS_SIM_INTERRUPTED = 1, /* *stop became non-zero */
  HS_SIM_STALLED = 2      /* no event was left before any stop condition (e.g. all workers left) */
} hs_sim_status;

/* Receives each finished step; a non-zero return ends the run with that code (an HS_E* code;
 * a positive one is taken as HS_ERUNTIME). */
typedef int hs_step_sink(void *ctx, const hs_step_row *row, hs_diag *d);
/* Receives each evaluation of the convergence model (time in s, step = global updates so far,
 * accuracy a fraction or NaN); a non-zero return ends the run as a step sink's does. */
typedef int hs_eval_sink(void *ctx, double time_s, int64_t step, double loss, double accuracy,
                         hs_diag *d);
struct hs_conv_model;

typedef struct hs_sim_config {
  const hs_cluster_spec *cluster;
  const char *model;              /* name: picks each device type's compute (per-model forms) */
  double train_flops_per_sample;  /* FLOP, forward + backward, for roofline compute; 0 = the
                                   * zoo's figure for model */
  double grad_bytes;              /* bytes of one gradient or model (fp32: 4 * params) */
  double act_bytes_per_sample;    /* for memory limits; 0 = unknown */
  double param_bytes;             /* weights, for memory limits */
  int64_t dataset_size;           /* samples in one epoch */
  int64_t global_batch;
  const hs_policy *policy;
  const hs_params *params;
  uint64_t seed;
  int64_t max_iterations;         /* 0 = no limit */
  double max_epochs;              /* 0 = no limit */
  double max_sim_time;            /* s; 0 = no limit */
  size_t max_events;              /* pending-event limit, 0 = default */
  hs_step_sink *sink;             /* may be NULL */
  void *sink_ctx;
  hs_trace *trace;                /* may be NULL */
  hs_progress *progress;          /* may be NULL */
  volatile sig_atomic_t *stop;    /* may be NULL */
  /* Calibrated compute (core_perfmodel.h): one entry per device type of the cluster, read for
   * the types whose compute is `calib:`; their step time is hs_perf_eval(&perf[type], b), and
   * perf[type].max_batch (when > 0) bounds their batch. NULL when no type is calibrated. */
  const hs_perf_model *perf;
  /* Convergence (sim_conv.h): NULL = none, and then no loss, evaluation or target. */
  const struct hs_conv_model *conv;
  const hs_params *conv_params;   /* parsed against conv->params */
  double target_loss;             /* end once an evaluation's loss is <= this; <= 0 = none */
  double target_accuracy;         /* end once accuracy >= this (fraction); <= 0 = none */
  hs_eval_sink *eval_sink;        /* may be NULL */
  void *eval_ctx;
  /* A replica of a real run (`hetsim validate`; 0 otherwise): the real runtimes send an update
   * through its compressor on the host (real/real_worker.h) and then send the round trip's
   * result as fp32. With compress_scale > 0 a compression takes its cost model's time
   * (pol_compress.h) times compress_scale (the calibrated round trip over the model's, calib/
   * cal_compress.h) on every participant, whatever its compute slowdown (the real runtimes
   * emulate slowdowns in the steps alone); with dense_wire its bytes stay grad_bytes. */
  double compress_scale;
  int dense_wire;
} hs_sim_config;

typedef struct hs_sim_worker_stats {
  int type, node;
  double joined_at, left_at;      /* s; left_at NaN while in the cluster */
  int initial_batch;              /* batch of its first step, 0 if none */
  int64_t steps, samples;
  double busy_s, comm_s, wait_s;  /* compute, exposed communication, idle */
} hs_sim_worker_stats;

typedef struct hs_sim_result {
  hs_sim_status status;
  hs_summary summary;             /* wall_s is left for the caller */
  int n_workers;                  /* slots, joined workers included */
  hs_sim_worker_stats *workers;   /* caller frees with hs_sim_result_free */
} hs_sim_result;

int hs_sim_run(const hs_sim_config *cfg, hs_sim_result *res, hs_diag *d);
void hs_sim_result_free(hs_sim_result *res);

/* The largest batch a device type can hold for the job's model: the type's max_batch, or what
 * fits in its memory after weights, gradients, momentum and one communication buffer
 * (4 copies of the parameters), at act_bytes_per_sample each. 0 = no limit. */
int hs_sim_max_batch(const hs_device_type *t, double param_bytes, double act_bytes_per_sample);

#endif
