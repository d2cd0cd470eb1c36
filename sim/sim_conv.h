/* sim_conv: convergence models for the simulator. A convergence model turns the schedule that
 * the simulated runtime executes (which worker computed which batch on which model version,
 * which updates were averaged, pushed with what staleness, compressed at what ratio) into
 * training losses and accuracies, so that a simulated run has a loss per step, evaluations and
 * a time to a target loss or accuracy.
 *
 * A model is a const table of callbacks (hs_conv_model), listed once in a registry:
 *   analytic  progress in effective samples (Pollux's statistical efficiency of the batch size,
 *             penalties for staleness, local steps and compression) mapped to a loss by
 *             l(k) = 1/(beta0*k + beta1) + beta2; see docs/convergence.md.
 *   proxy     each simulated worker step really computes a gradient of mlp or cnn on the
 *             worker's Fashion-MNIST shard on the nn cpu backend (sim_proxy.c).
 *
 * Contract:
 * - The simulated runtime allocates state_size zeroed bytes, calls init, then drives the model
 *   with the callbacks below in simulated-time order, and calls fini (also after a failed init).
 *   Callbacks return 0 or a negative HS_E* code with the diag filled.
 * - Communications are reported twice: begin when the policy issues the operation (the content
 *   is taken then: the gradients or models as they are at issue time), end when it completes in
 *   simulated time (the update is applied then). `id` identifies the operation between the two
 *   calls; it is unique among operations in flight and may be reused afterwards.
 * - Workers are numbered as in the simulator; add_worker is called for every worker when it
 *   enters the cluster (at start, or when a joining worker holds the model) and gives it the
 *   current global model.
 * - Models are deterministic for a given configuration, seed and sequence of calls.
 * Units: samples, seconds; progress k in epochs of effective samples. */
#ifndef HS_SIM_CONV_H
#define HS_SIM_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_error.h"
#include "policies/pol_params.h"
#include "policies/pol_policy.h"

#define HS_CONV_VERSION 1

typedef struct hs_conv_config {
  const char *model;          /* zoo name, e.g. "mlp" */
  int64_t dataset_size;       /* training samples in one epoch */
  int classes;                /* outputs of the model (chance accuracy = 1/classes) */
  int64_t global_batch;       /* samples */
  int n_workers;              /* workers at start; joins may add more */
  uint64_t seed;
  const hs_params *params;    /* parsed against the model's own parameter table */
} hs_conv_config;

/* One communication as the policy issued it. */
typedef struct hs_conv_op {
  hs_comm_kind kind;          /* ALLREDUCE, PUSH, PULL or APPLY */
  hs_comm_what what;          /* GRAD or MODEL */
  hs_ps_mode ps_mode;         /* PUSH: APPLY (one update at arrival) or ACCUMULATE */
  int worker;                 /* PUSH, PULL: the worker; -1 otherwise */
  const int *ws;              /* ALLREDUCE: the participants */
  int n;
  const double *weights;      /* ALLREDUCE: weights, NULL = b_i / sum of b (last step's batch) */
  const struct hs_compressor *compressor; /* NULL: fp32 as is */
  double ratio;               /* the compressor's setting (hs_comm_opts.ratio: density, levels
                                 or rank), when compressor is set */
  double weight;              /* PUSH: scale of the update at the server (hs_comm_opts.weight);
                                 0 = 1 */
  int keep_local;             /* ALLREDUCE of MODEL: at the end each participant takes
                                 avg + (its model now - its model at begin), not avg
                                 (hs_comm_opts.keep_local) */
} hs_conv_op;

typedef struct hs_conv_model {
  int version;                /* HS_CONV_VERSION */
  const char *name;
  const char *description;    /* one line */
  const hs_param_spec *params; /* terminated by an entry with name == NULL */
  size_t state_size;
  int (*init)(void *st, const hs_conv_config *c, hs_diag *d);
  void (*fini)(void *st);
  int (*add_worker)(void *st, int w, hs_diag *d);
  /* Worker w starts a step of `batch` samples on the model it holds; *loss is the step's
   * training loss (the mean over its batch) or NaN when the model computes none. */
  int (*step)(void *st, int w, int batch, double *loss, hs_diag *d);
  /* Applies worker w's last gradient to its own model. */
  int (*local_update)(void *st, int w, hs_diag *d);
  /* w = -1: every worker and the global model. */
  int (*set_lr)(void *st, int w, double lr, hs_diag *d);
  int (*begin)(void *st, int64_t id, const hs_conv_op *op, hs_diag *d);
  /* staleness: PUSH applied by the server: global updates since the worker read its model. */
  int (*end)(void *st, int64_t id, int staleness, hs_diag *d);
  /* Loss and accuracy (a fraction; NaN when the model gives none) of the global model. */
  int (*evaluate)(void *st, double *loss, double *accuracy, hs_diag *d);
  /* Before a run: HS_EINVAL, saying why, when the model with parameters p can never meet the
   * targets (<= 0: none), so that such a run is refused instead of running until its bound.
   * NULL: the model cannot tell (any target may be met). */
  int (*check_target)(const hs_params *p, int classes, double target_loss,
                      double target_accuracy, hs_diag *d);
  /* After evaluate, given its loss and accuracy and the targets (<= 0: none): the probability
   * that a real evaluation of the model as it is now meets them, when the model's evaluations
   * stand for noisy ones; NaN when the evaluation's own values decide. NULL: always those
   * values. */
  double (*target_chance)(void *st, double loss, double accuracy, double target_loss, double target_accuracy);
} hs_conv_model;

extern const hs_conv_model hs_conv_analytic;
extern const hs_conv_model hs_conv_proxy;
/* 1 when the proxy can train `model` for n_workers workers (a Fashion-MNIST model of the zoo, at
 * most 256 workers), as its set-up requires; 0 otherwise. Lets a caller choose another model
 * before a run rather than fail in it (hetsim validate). */
int hs_conv_proxy_supports(const char *model, int n_workers);

/* NULL if unknown. */
const hs_conv_model *hs_conv_find(const char *name);
/* "analytic, proxy" into buf (always terminated). */
void hs_conv_names(char *buf, size_t size);

/* Parses "NAME[:key=value,...]" for the model `model`. Parameters are layered: the table's
 * defaults, then the convergence model's defaults for `model` (analytic: fitted values for mlp
 * and cnn), then `file` (may be NULL: key=value lines, '#' comments, as `hetsim
 * fit-convergence` writes them), then the keys given in the spec; a key given twice in one
 * layer is an error. Unknown names and keys list the valid ones (HS_EINVAL).
 * The analytic model has nothing to say about a model outside the zoo (no defaults were ever
 * fitted for it, and the table's are illustrative): for such a `model` it is refused
 * (HS_EINVAL, saying how to fit it) unless a file is given or the spec sets at least beta0,
 * beta1 and beta2. `model` NULL: the table's defaults alone, never refused (for fitting). */
int hs_conv_parse(const char *spec, const char *model, const char *file,
                  const hs_conv_model **out, hs_params *p, hs_diag *d);
/* The same with `fitted` ("k=v,k=v" of analytic parameters fitted to the user's curves, e.g.
 * hs_conv_fit.params; NULL for none) in place of the model's own defaults, under the file and
 * the spec; a model outside the zoo with fitted parameters is not refused. Only the analytic
 * model takes fitted parameters (HS_EINVAL for another with fitted set). */
int hs_conv_parse_fitted(const char *spec, const char *model, const char *fitted, const char *file,
                         const hs_conv_model **out, hs_params *p, hs_diag *d);

/* The analytic model's built-in parameters fitted for a model of the zoo (mlp, cnn: key=value
 * text, docs/convergence.md), or NULL when it has none. */
const char *hs_conv_analytic_defaults(const char *model);

/* Calls m->check_target when the model has one; 0 otherwise. */
int hs_conv_check_target(const hs_conv_model *m, const hs_params *p, int classes,
                         double target_loss, double target_accuracy, hs_diag *d);

/* --- the analytic model's formulas, for tests and for the fit command ------------------- */

typedef struct hs_conv_coef {
  double phi;                 /* gradient noise scale, samples */
  double b0;                  /* reference batch: E(b0) = 1, samples */
  double beta0, beta1, beta2; /* loss curve l(k) = 1/(beta0*k + beta1) + beta2 */
  double lambda_s;            /* staleness penalty */
  double lambda_tau;          /* local-steps penalty */
  double lambda_c;            /* compression penalty */
  double acc_max, acc_alpha;  /* accuracy map; acc_max <= 0: no map (accuracy NaN) */
  double acc_slope, acc_bend; /* acc_slope > 0: the rational map in place of acc_alpha's */
  double acc_noise;           /* standard deviation of a real evaluation's accuracy about the map;
                                 0: evaluations are the map's values */
} hs_conv_coef;

/* Reads the analytic parameters from p (parsed against hs_conv_analytic.params). */
void hs_conv_coef_from(const hs_params *p, hs_conv_coef *c);

/* Pollux's statistical efficiency of a batch of B samples relative to b0:
 * E(B) = (phi + b0) / (phi + B), so one update with batch B is worth B*E(B) samples at b0. */
double hs_conv_efficiency(const hs_conv_coef *c, double batch);
/* 1 / (1 + lambda_s * staleness) */
double hs_conv_stale_factor(const hs_conv_coef *c, double staleness);
/* 1 / (1 + lambda_tau * (tau - 1)) for tau >= 1 local updates between averages */
double hs_conv_local_factor(const hs_conv_coef *c, double tau);
/* max(0, 1 - lambda_c * (1 - ratio)) for an update compressed to `ratio` of its fp32 bytes
 * (hs_compress_wire_ratio of the compressor's setting); 1 when ratio >= 1 */
double hs_conv_compress_factor(const hs_conv_coef *c, double ratio);
/* l(k) = 1/(beta0*k + beta1) + beta2, k in epochs of effective samples. */
double hs_conv_loss(const hs_conv_coef *c, double k);
/* chance + (acc_max - chance) * exp(-acc_alpha * (loss - beta2)), or with acc_slope > 0
 * acc_max - acc_slope x / (1 + acc_bend x), x = max(loss - beta2, 0); clamped to
 * [chance, acc_max]; NaN when acc_max <= 0. */
double hs_conv_accuracy(const hs_conv_coef *c, double loss, int classes);

#endif
