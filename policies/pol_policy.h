/* pol_policy: the policy interface. One policy, two runtimes.
 *
 * A policy is a const table of callbacks (hs_policy) written against an abstract runtime
 * (hs_runtime) that both the simulator (sim/) and the real trainer (real/) implement. The
 * runtime reports what happened (a compute step finished, a communication finished, a timer
 * fired, the cluster changed); the policy answers with actions on the runtime (compute a step on
 * worker i with batch b, all-reduce a set of workers with weights, push to or pull from the
 * parameter server, apply accumulated pushes, start a timer, set the learning rate).
 *
 * Contract:
 * - A policy reads time only from hs_rt_now, does no I/O and keeps no global state, so it is
 *   deterministic for a given seed and sequence of observations.
 * - The runtime allocates `state_size` zeroed bytes for the policy's state and passes them to
 *   every callback; whatever init allocates beyond that, fini frees.
 * - Callbacks return 0, or a negative HS_E* code after hs_rt_fail() has said why; the runtime
 *   then ends the run as failed.
 * - Every hs_comm_opts pointer may be NULL, in every runtime: it stands for the zeroed options
 *   (gradients, ring, applied on arrival, fp32, tag 0, weight 1).
 * - Iterations: one update of the global model is one iteration, counted once when the update
 *   is made (an all-reduce's result becomes the global model, a push is applied, an apply is
 *   made), whichever participant or rank makes it (runtime/rt_core.h).
 * - Both tables carry a version as their first field; new members are only ever appended
 *   (as SQLite's sqlite3_io_methods), so policies of the next issues fit without changing them.
 * Units: seconds, bytes, samples. */
#ifndef HS_POL_POLICY_H
#define HS_POL_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_error.h"
#include "policies/pol_params.h"

#define HS_RUNTIME_VERSION 2 /* 2: hs_runtime_ops.caps */
#define HS_POLICY_VERSION 1

typedef struct hs_runtime hs_runtime;
struct hs_compressor; /* compressors are tables too; NULL means none */

/* What a communication carries. */
typedef enum hs_comm_what {
  HS_COMM_GRAD = 0,  /* gradients: the receiver applies them as one SGD update */
  HS_COMM_MODEL = 1  /* model parameters: averaged (all-reduce) or replaced (pull) */
} hs_comm_what;

typedef enum hs_ar_algo {
  HS_AR_RING = 0,    /* ring all-reduce over the participants in worker order */
  HS_AR_HIER = 1     /* intra-node reduce, inter-node ring over nodes, intra-node broadcast */
} hs_ar_algo;

typedef enum hs_ps_mode {
  HS_PS_APPLY = 0,      /* the server applies this push as one global update when it arrives */
  HS_PS_ACCUMULATE = 1  /* the server only accumulates; hs_rt_apply makes the update */
} hs_ps_mode;

typedef struct hs_comm_opts {
  hs_comm_what what;
  hs_ar_algo algo;                        /* all-reduce only */
  hs_ps_mode ps_mode;                     /* push only */
  int overlap;                            /* all-reduce of GRAD only: reduce in buckets while the
                                             participants' current backward passes run */
  double bucket_bytes;                    /* bytes per overlap bucket; 0 = 25 MiB */
  double fwd_fraction;                    /* share of a step spent in the forward pass; 0 = 1/3 */
  const struct hs_compressor *compressor; /* NULL: fp32 as is */
  double ratio;                           /* compressor's ratio, when one is set */
  uint64_t tag;                           /* handed back in hs_comm_obs */
  double weight;                          /* PUSH: the server scales this update by weight (e.g.
                                             ASHL's data share p_i); 0 = 1, unscaled */
  int keep_local;                         /* all-reduce of MODEL only: each participant keeps
                                             the progress it made while the operation was in
                                             flight, x_i <- avg + (x_i - x_i at issue) (overlap
                                             local SGD / CoCoD-SGD compensation); 0: the
                                             participants take the average, x_i <- avg */
} hs_comm_opts;

/* A compute step finished. */
typedef struct hs_step_obs {
  int worker;
  int batch;          /* samples */
  double start, end;  /* s, runtime clock */
  double duration;    /* s, measured (end - start) */
  double loss;        /* training loss of the step, NaN when the runtime computes none */
  uint64_t tag;
} hs_step_obs;

typedef enum hs_comm_kind {
  HS_OP_ALLREDUCE = 0,
  HS_OP_PUSH = 1,
  HS_OP_PULL = 2,
  HS_OP_APPLY = 3
} hs_comm_kind;

/* A communication finished. For a collective, worker is -1 and every participant is done. */
typedef struct hs_comm_obs {
  hs_comm_kind kind;
  int worker;
  double start, end;  /* s */
  uint64_t version;   /* global model version after the operation */
  int staleness;      /* PUSH: global updates applied since the pushing worker's model was read */
  uint64_t tag;
} hs_comm_obs;

typedef enum hs_cluster_change {
  HS_CHANGE_SLOWDOWN = 0,
  HS_CHANGE_JOIN = 1,     /* the worker exists, holds the current model and is idle */
  HS_CHANGE_LEAVE = 2     /* the worker takes no new work; operations in flight still finish */
} hs_cluster_change;

typedef struct hs_cluster_obs {
  hs_cluster_change kind;
  int worker;
  double slowdown, comm_slowdown; /* current multipliers */
} hs_cluster_obs;

/* What a runtime can do beyond the plain operations (hs_runtime_ops.caps). A runtime refuses
 * what it lacks with a clear message (HS_EUNSUPPORTED): before the run where the policy's
 * parameters or the cluster file show it (hs_runtime_check_caps, runtime/rt_core.h), else when
 * the policy asks. */
#define HS_CAP_COMPRESSION 0x01u /* hs_comm_opts.compressor applied to what is sent */
#define HS_CAP_OVERLAP 0x02u     /* hs_comm_opts.overlap: bucketed all-reduce during backward */
#define HS_CAP_ALGO 0x04u        /* hs_comm_opts.algo = HS_AR_HIER, hierarchical all-reduce */
#define HS_CAP_SUBSET 0x08u      /* all-reduces over a subset of the workers */
#define HS_CAP_JOIN 0x10u        /* join events of the cluster file */
#define HS_CAP_LEAVE 0x20u       /* leave events of the cluster file */
#define HS_CAP_ALL 0x3fu

/* The runtime's operations. Implementations embed `hs_runtime` as their first member. */
typedef struct hs_runtime_ops {
  int version; /* HS_RUNTIME_VERSION */
  double (*now)(hs_runtime *rt);
  int (*n_workers)(hs_runtime *rt);                 /* worker slots ever created */
  int (*active)(hs_runtime *rt, int w);             /* 1 while w is in the cluster */
  int64_t (*global_batch)(hs_runtime *rt);
  int (*max_batch)(hs_runtime *rt, int w);          /* memory limit; 0 = none */
  /* The performance model's prediction of a step on w (no jitter, current slowdown). */
  double (*predict_compute)(hs_runtime *rt, int w, int batch);
  uint64_t (*model_version)(hs_runtime *rt);        /* global model version */
  uint64_t (*worker_version)(hs_runtime *rt, int w);/* version of the model w computes on */
  uint64_t (*seed)(hs_runtime *rt);
  int (*compute)(hs_runtime *rt, int w, int batch, uint64_t tag);
  int (*local_update)(hs_runtime *rt, int w);       /* apply w's own gradient to its local model */
  /* weights NULL: b_i / sum b over the participants' last batches; given or not, every weight
   * must be finite and not negative (else the run fails), and they are normalised to sum 1
   * (1/n each when they sum to 0). */
  int (*allreduce)(hs_runtime *rt, const int *workers, int n, const double *weights,
                   const hs_comm_opts *o);
  int (*push)(hs_runtime *rt, int w, const hs_comm_opts *o);
  int (*apply)(hs_runtime *rt, const hs_comm_opts *o);
  int (*pull)(hs_runtime *rt, int w, const hs_comm_opts *o);
  int (*timer)(hs_runtime *rt, double delay, uint64_t tag);
  int (*set_lr)(hs_runtime *rt, int w, double lr);  /* w = -1: every worker */
  hs_diag *(*diag)(hs_runtime *rt);                 /* where a failing policy says why */
  unsigned caps;                                    /* HS_CAP_* (version 2) */
} hs_runtime_ops;

struct hs_runtime {
  const hs_runtime_ops *ops;
};

typedef struct hs_policy {
  int version; /* HS_POLICY_VERSION */
  const char *name;
  const char *description;          /* one line, for `hetsim policies` */
  const char *source;               /* where the algorithm comes from */
  const hs_param_spec *params;      /* terminated by an entry with name == NULL */
  size_t state_size;
  int (*init)(void *state, hs_runtime *rt, const hs_params *p);
  int (*start)(void *state, hs_runtime *rt);
  int (*on_compute)(void *state, hs_runtime *rt, const hs_step_obs *o);
  int (*on_comm)(void *state, hs_runtime *rt, const hs_comm_obs *o);
  int (*on_timer)(void *state, hs_runtime *rt, uint64_t tag);
  int (*on_cluster)(void *state, hs_runtime *rt, const hs_cluster_obs *o);
  void (*fini)(void *state, hs_runtime *rt);
} hs_policy;

/* Thin wrappers, so that policies read as actions. */
static inline double hs_rt_now(hs_runtime *rt) { return rt->ops->now(rt); }
static inline int hs_rt_n_workers(hs_runtime *rt) { return rt->ops->n_workers(rt); }
static inline int hs_rt_active(hs_runtime *rt, int w) { return rt->ops->active(rt, w); }
static inline int64_t hs_rt_global_batch(hs_runtime *rt) { return rt->ops->global_batch(rt); }
static inline int hs_rt_max_batch(hs_runtime *rt, int w) { return rt->ops->max_batch(rt, w); }
static inline double hs_rt_predict(hs_runtime *rt, int w, int b) {
  return rt->ops->predict_compute(rt, w, b);
}
static inline uint64_t hs_rt_version(hs_runtime *rt) { return rt->ops->model_version(rt); }
static inline uint64_t hs_rt_worker_version(hs_runtime *rt, int w) {
  return rt->ops->worker_version(rt, w);
}
static inline int hs_rt_compute(hs_runtime *rt, int w, int b, uint64_t tag) {
  return rt->ops->compute(rt, w, b, tag);
}
static inline int hs_rt_local_update(hs_runtime *rt, int w) { return rt->ops->local_update(rt, w); }
static inline int hs_rt_allreduce(hs_runtime *rt, const int *ws, int n, const double *weights,
                                  const hs_comm_opts *o) {
  return rt->ops->allreduce(rt, ws, n, weights, o);
}
static inline int hs_rt_push(hs_runtime *rt, int w, const hs_comm_opts *o) {
  return rt->ops->push(rt, w, o);
}
static inline int hs_rt_apply(hs_runtime *rt, const hs_comm_opts *o) { return rt->ops->apply(rt, o); }
static inline int hs_rt_pull(hs_runtime *rt, int w, const hs_comm_opts *o) {
  return rt->ops->pull(rt, w, o);
}
static inline int hs_rt_timer(hs_runtime *rt, double delay, uint64_t tag) {
  return rt->ops->timer(rt, delay, tag);
}
static inline int hs_rt_set_lr(hs_runtime *rt, int w, double lr) { return rt->ops->set_lr(rt, w, lr); }

/* Records why the policy gives up; returns code for `return hs_rt_fail(...)`. */
int hs_rt_fail(hs_runtime *rt, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The even split of a global batch B over n workers: shares differ by at most one sample, and
 * the first workers take the remainder. */
void hs_pol_even_split(int64_t B, int n, int *batches);
/* Fills ws with the active workers in index order; returns how many. O(workers). */
int hs_pol_active_list(hs_runtime *rt, int *ws, int cap);

/* The set of active workers and their batches, which synchronous policies rebuild only when
 * the cluster changes (so an iteration costs O(N), never O(N^2)). */
typedef struct hs_pol_group {
  int n, cap;
  int *ws;       /* active workers in index order */
  int *batch;    /* samples per worker, aligned with ws */
  int *slot;     /* slot[w] = position of worker w in ws, or -1; sized to cap */
} hs_pol_group;

/* Rebuilds g from the runtime: the active workers, each with an even share of the global
 * batch, checked against each worker's memory limit (HS_EINVAL through hs_rt_fail if one
 * cannot hold its share). An empty cluster gives an empty group, not an error. */
int hs_pol_group_even(hs_pol_group *g, hs_runtime *rt);
void hs_pol_group_free(hs_pol_group *g);

#endif
