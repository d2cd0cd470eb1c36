/* The analytic convergence model: progress in effective samples, a loss curve of progress, and a
 * monotone map from loss to accuracy. Formulas and parameters: docs/convergence.md.
 *
 * Progress k (epochs of effective samples) grows only when an update reaches the global model:
 *   all-reduce of gradients   k += B E(B) Pc / D              B = sum of the participants' batches
 *   all-reduce of models      k += S E(S/tau) Ptau(tau) Pc / D S = samples the participants applied
 *                                                             locally since their last average,
 *                                                             tau = their mean local updates
 *   push of a gradient        k += Pw b E(b) Ps(staleness) Pc / D
 *   push of a model           k += Pw S_w E(S_w/tau_w) Ptau(tau_w) Ps Pc / D
 *   accumulated pushes        k += min(1, pbar) B E(B) Pc / D at the apply, B = their samples
 * with D the data set's size, E Pollux's statistical efficiency, Ps, Ptau, Pc the penalties,
 * Pw = min(1, N p) for a push of server-side weight p (hs_comm_opts.weight, 1 when unset) among
 * the N workers the model holds, and pbar the sample-weighted mean of the accumulated pushes'
 * weights.
 * Each worker also tracks the progress of the model it holds (set by averages and pulls, moved
 * by its local updates), and a step's loss is l of that progress, so that policies reading the
 * loss see the stale model's loss. At the end of an all-reduce the participants hold the global
 * progress; with keep_local plus what their local updates since the begin added (those updates
 * count toward the next average), without it those updates are lost and no longer count. The
 * learning rate is not modelled (set_lr is accepted and ignored). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "policies/pol_compress.h"
#include "sim/sim_conv.h"

static const hs_param_spec analytic_params[] = {
    {"phi", HS_PARAM_DOUBLE, "1000", 0, 1e15, NULL,
     "gradient noise scale (samples): batches well below phi use each sample fully"},
    {"b0", HS_PARAM_DOUBLE, "128", 1, 1e12, NULL, "reference batch (samples): E(b0) = 1"},
    {"beta0", HS_PARAM_DOUBLE, "3", 1e-12, 1e12, NULL, "loss curve slope: l(k) = 1/(beta0 k + beta1) + beta2"},
    {"beta1", HS_PARAM_DOUBLE, "0.4755", 1e-12, 1e12, NULL, "loss curve: 1/beta1 + beta2 is the initial loss"},
    {"beta2", HS_PARAM_DOUBLE, "0.2", 0, 1e12, NULL, "loss curve: the loss reached as k grows without bound"},
    {"lambda_s", HS_PARAM_DOUBLE, "0.1", 0, 1e12, NULL, "staleness penalty: 1/(1 + lambda_s staleness)"},
    {"lambda_tau", HS_PARAM_DOUBLE, "0.05", 0, 1e12, NULL, "local-steps penalty: 1/(1 + lambda_tau (tau - 1))"},
    {"lambda_c", HS_PARAM_DOUBLE, "0.1", 0, 1, NULL, "compression penalty: 1 - lambda_c (1 - ratio)"},
    {"acc_max", HS_PARAM_DOUBLE, "0", 0, 1, NULL, "accuracy at loss beta2; 0 = no accuracy map (accuracy NaN)"},
    {"acc_alpha", HS_PARAM_DOUBLE, "0", 0, 1e12, NULL, "accuracy map: chance + (acc_max - chance) exp(-acc_alpha (l - beta2))"},
    {"acc_slope", HS_PARAM_DOUBLE, "0", 0, 1e12, NULL, "rational accuracy map: acc_max - acc_slope x / (1 + "
     "acc_bend x), x = l - beta2; > 0 replaces the exponential map"},
    {"acc_bend", HS_PARAM_DOUBLE, "0", 0, 1e12, NULL, "rational accuracy map: how it bends towards chance as "
     "the loss grows"},
    {"acc_noise", HS_PARAM_DOUBLE, "0", 0, 1, NULL, "standard deviation of a real evaluation's accuracy "
     "about the map; > 0: a target accuracy is met at its median first passage"},
    {"eval_every", HS_PARAM_INT, "10", 1, 1e9, NULL, "global updates between evaluations (and target checks)"},
    {NULL, 0, NULL, 0, 0, NULL, NULL},
};

/* Defaults per zoo model. mlp and cnn: fitted by `hetsim fit-convergence` to proxy runs (see
 * docs/convergence.md for the runs); the others are the table's illustrative values, not fitted
 * to any run. */
static const struct {
  const char *model, *params;
} model_defaults[] = {
    /* 3 proxy runs on traces/lbb-4gpu.yaml, seed 1, lr 0.1: ssgd at global batch 256 (300
     * updates) and 1024 (120), asp at 256 (1200, mean staleness about 3); 84 evaluations,
     * loss rms 0.034, accuracy rms 0.012. lambda_tau and lambda_c are not fitted. */
    {"mlp", "phi=67.24,beta0=23.60,beta1=0.8427,beta2=0.3960,lambda_s=0.1236,acc_max=0.8571,"
            "acc_alpha=0.4911"},
    /* The same three runs with cnn: loss rms 0.19, a poor fit, because cnn's loss stays near
     * ln 10 for its first ~20 updates before falling, which l(k) cannot follow. */
    {"cnn", "phi=32.29,beta0=2.839,beta1=0.3475,beta2=0.06036,lambda_s=0.3317,acc_max=1,"
            "acc_alpha=0.6558"},
    {NULL, NULL},
};

const char *hs_conv_analytic_defaults(const char *model) {
  for (int i = 0; model && model_defaults[i].model; i++)
    if (!strcmp(model_defaults[i].model, model)) return model_defaults[i].params;
  return NULL;
}

void hs_conv_coef_from(const hs_params *p, hs_conv_coef *c) {
  c->phi = hs_params_get(p, "phi");
  c->b0 = hs_params_get(p, "b0");
  c->beta0 = hs_params_get(p, "beta0");
  c->beta1 = hs_params_get(p, "beta1");
  c->beta2 = hs_params_get(p, "beta2");
  c->lambda_s = hs_params_get(p, "lambda_s");
  c->lambda_tau = hs_params_get(p, "lambda_tau");
  c->lambda_c = hs_params_get(p, "lambda_c");
  c->acc_max = hs_params_get(p, "acc_max");
  c->acc_alpha = hs_params_get(p, "acc_alpha");
  c->acc_slope = hs_params_get(p, "acc_slope");
  c->acc_bend = hs_params_get(p, "acc_bend");
  c->acc_noise = hs_params_get(p, "acc_noise");
}

double hs_conv_efficiency(const hs_conv_coef *c, double batch) {
  return (c->phi + c->b0) / (c->phi + batch);
}

double hs_conv_stale_factor(const hs_conv_coef *c, double staleness) {
  return 1.0 / (1.0 + c->lambda_s * (staleness > 0 ? staleness : 0));
}

double hs_conv_local_factor(const hs_conv_coef *c, double tau) {
  return 1.0 / (1.0 + c->lambda_tau * (tau > 1 ? tau - 1 : 0));
}

double hs_conv_compress_factor(const hs_conv_coef *c, double ratio) {
  if (!(ratio > 0) || ratio >= 1) return 1.0;
  double f = 1.0 - c->lambda_c * (1.0 - ratio);
  return f > 0 ? f : 0;
}

double hs_conv_loss(const hs_conv_coef *c, double k) {
  return 1.0 / (c->beta0 * k + c->beta1) + c->beta2;
}

double hs_conv_accuracy(const hs_conv_coef *c, double loss, int classes) {
  if (!(c->acc_max > 0)) return NAN;
  double chance = classes > 0 ? 1.0 / classes : 0;
  double a;
  if (c->acc_slope > 0) {
    double x = fmax(loss - c->beta2, 0);
    a = c->acc_max - c->acc_slope * x / (1 + c->acc_bend * x);
  } else {
    a = chance + (c->acc_max - chance) * exp(-c->acc_alpha * (loss - c->beta2));
  }
  if (a > c->acc_max) a = c->acc_max;
  if (a < chance) a = chance;
  return a;
}

typedef struct a_op {
  hs_comm_kind kind;
  int worker;
  hs_ps_mode ps_mode;
  int keep_local;        /* all-reduce of models: participants keep their progress since begin */
  double value;          /* progress the operation brings, before the staleness penalty */
  double samples;        /* accumulated push: its batch */
  double weight;         /* push: the server's scale of it (1 when unscaled) */
  double cfactor;        /* compression factor */
  double k;              /* pull: the global progress when it was issued */
  int *ws;               /* all-reduce: participants, set at end */
  int n;
} a_op;

typedef struct analytic {
  hs_conv_coef c;
  double D;              /* samples per epoch */
  int classes;
  double k;              /* global progress, epochs of effective samples */
  /* Per worker, one array per field (the simulator's own per-worker state shares the data
   * cache, and each pass below reads or writes only one or two fields of every participant):
   * sized cap, n in use. */
  int n, cap;
  int *last_batch;       /* samples of its latest step */
  int *local_updates;    /* since its model was last replaced or pushed */
  double *local_samples; /* samples those local updates applied */
  double *wk;            /* progress of the model it holds, epochs */
  double *wloss;         /* l(wk), kept so that a step costs no division */
  double *k_snap;        /* its progress when a keep_local all-reduce began; NULL until one
                            does */
  a_op *ops;
  int64_t cap_ops;
  double acc_samples, acc_wsamples, acc_cfactor; /* pushes accumulated for the next apply:
                                                    their samples, scaled by their weights */
  int64_t local_pending; /* local updates not yet averaged or pushed, over all workers */
} analytic;

/* Worker w holds the global model and has no local update pending. */
static void fresh_worker(analytic *a, int w) {
  a->last_batch[w] = 0;
  a->local_updates[w] = 0;
  a->local_samples[w] = 0;
  a->wk[w] = a->k;
  a->wloss[w] = hs_conv_loss(&a->c, a->k);
}

static int grow_workers(analytic *a, int w, hs_diag *d) {
  if (w < 0) return hs_diag_set(d, HS_ERUNTIME, "analytic convergence: worker %d", w);
  if (w < a->n) return 0;
  if (w >= a->cap) {
    int nc = a->cap ? a->cap : 16;
    while (nc <= w) nc *= 2;
    int ok = 1;
#define GROW(f)                                                   \
  do {                                                            \
    void *g = realloc(a->f, (size_t)nc * sizeof *a->f);           \
    if (g) a->f = g;                                              \
    else ok = 0;                                                  \
  } while (0)
    GROW(last_batch);
    GROW(local_updates);
    GROW(local_samples);
    GROW(wk);
    GROW(wloss);
    if (a->k_snap) GROW(k_snap);
#undef GROW
    if (!ok) return hs_diag_set(d, HS_ENOMEM, "out of memory for %d workers' convergence state", nc);
    a->cap = nc;
  }
  for (int i = a->n; i <= w; i++) fresh_worker(a, i);
  a->n = w + 1;
  return 0;
}

static int a_init(void *st, const hs_conv_config *c, hs_diag *d) {
  analytic *a = st;
  hs_conv_coef_from(c->params, &a->c);
  if (c->dataset_size < 1) return hs_diag_set(d, HS_EINVAL, "analytic convergence: data set size %lld", (long long)c->dataset_size);
  a->D = (double)c->dataset_size;
  a->classes = c->classes;
  a->acc_cfactor = 1.0;
  return c->n_workers > 0 ? grow_workers(a, c->n_workers - 1, d) : 0;
}

static void a_fini(void *st) {
  analytic *a = st;
  for (int64_t i = 0; i < a->cap_ops; i++) free(a->ops[i].ws);
  free(a->ops);
  free(a->last_batch);
  free(a->local_updates);
  free(a->local_samples);
  free(a->wk);
  free(a->wloss);
  free(a->k_snap);
}

static int a_add_worker(void *st, int w, hs_diag *d) {
  analytic *a = st;
  int rc = grow_workers(a, w, d);
  if (rc) return rc;
  a->local_pending -= a->local_updates[w];
  fresh_worker(a, w);
  return 0;
}

/* A step on a worker the model has not seen yet: out of the hot path below, so that the common
 * case needs no stack frame. */
__attribute__((noinline, cold)) static int a_step_new(analytic *a, int w, int batch, double *loss,
                                                       hs_diag *d) {
  int rc = grow_workers(a, w, d);
  if (rc) return rc;
  a->last_batch[w] = batch;
  *loss = a->wloss[w];
  return 0;
}

/* The hot path: once per simulated step. */
static int a_step(void *st, int w, int batch, double *loss, hs_diag *d) {
  analytic *a = st;
  if ((unsigned)w >= (unsigned)a->n) return a_step_new(a, w, batch, loss, d);
  a->last_batch[w] = batch;
  *loss = a->wloss[w];
  return 0;
}

static int a_local_update(void *st, int w, hs_diag *d) {
  analytic *a = st;
  int rc = grow_workers(a, w, d);
  if (rc) return rc;
  double b = a->last_batch[w];
  a->local_updates[w]++;
  a->local_samples[w] += b;
  a->local_pending++;
  a->wk[w] += b * hs_conv_efficiency(&a->c, b) / a->D;
  a->wloss[w] = hs_conv_loss(&a->c, a->wk[w]);
  return 0;
}

static int a_set_lr(void *st, int w, double lr, hs_diag *d) { return 0; }

/* Progress of S samples applied in tau local updates on each of the workers averaged. */
static double local_value(const analytic *a, double S, double tau) {
  if (!(tau > 0) || !(S > 0)) return 0;
  return S * hs_conv_efficiency(&a->c, S / tau) * hs_conv_local_factor(&a->c, tau) / a->D;
}

/* All-reduce issued: its participants, their batches (gradients) or the local updates they
 * send (models). One pass over the participants for gradients (synchronous SGD has no local
 * update pending, so the second pass is skipped). */
static int begin_allreduce(analytic *a, a_op *o, const hs_conv_op *op, hs_diag *d) {
  int n = op->n > 0 ? op->n : 0, rc;
  int *ws = realloc(o->ws, (size_t)(n > 0 ? n : 1) * sizeof *ws);
  if (!ws) return hs_diag_set(d, HS_ENOMEM, "out of memory for an all-reduce");
  o->ws = ws;
  o->n = n;
  if (n > 0) memcpy(ws, op->ws, (size_t)n * sizeof *ws);
  int64_t B = 0;
  for (int i = 0; i < n; i++) {
    if ((unsigned)ws[i] >= (unsigned)a->n && (rc = grow_workers(a, ws[i], d))) return rc;
    B += a->last_batch[ws[i]];
  }
  double S = 0, T = 0;
  for (int i = 0; a->local_pending > 0 && i < n; i++) {
    int w = ws[i];
    S += a->local_samples[w];
    T += a->local_updates[w];
    a->local_pending -= a->local_updates[w];
    a->local_samples[w] = 0;
    a->local_updates[w] = 0;
  }
  if (op->what == HS_COMM_GRAD) o->value = B > 0 ? (double)B * hs_conv_efficiency(&a->c, (double)B) / a->D : 0;
  else o->value = n > 0 ? local_value(a, S, T / n) : 0;
  o->value *= o->cfactor;
  if (!o->keep_local) return 0;
  if (!a->k_snap && !(a->k_snap = malloc((size_t)a->cap * sizeof *a->k_snap)))
    return hs_diag_set(d, HS_ENOMEM, "out of memory for the convergence state");
  for (int i = 0; i < n; i++) a->k_snap[ws[i]] = a->wk[ws[i]];
  return 0;
}

static int a_begin(void *st, int64_t id, const hs_conv_op *op, hs_diag *d) {
  analytic *a = st;
  if (id < 0) return hs_diag_set(d, HS_ERUNTIME, "analytic convergence: operation id %lld", (long long)id);
  if (id >= a->cap_ops) {
    int64_t nc = a->cap_ops ? a->cap_ops : 64;
    while (nc <= id) nc *= 2;
    a_op *o = realloc(a->ops, (size_t)nc * sizeof *o);
    if (!o) return hs_diag_set(d, HS_ENOMEM, "out of memory for communication records");
    memset(o + a->cap_ops, 0, (size_t)(nc - a->cap_ops) * sizeof *o);
    a->ops = o;
    a->cap_ops = nc;
  }
  a_op *o = &a->ops[id];
  int *keep = o->ws;
  *o = (a_op){.kind = op->kind, .worker = op->worker, .ps_mode = op->ps_mode, .ws = keep,
              .keep_local = op->kind == HS_OP_ALLREDUCE && op->what == HS_COMM_MODEL && op->keep_local,
              .weight = op->weight > 0 ? op->weight : 1.0,
              .cfactor = op->compressor ? hs_conv_compress_factor(&a->c, hs_compress_wire_ratio(op->compressor, op->ratio))
                                        : 1.0};
  int rc;
  switch (op->kind) {
  case HS_OP_ALLREDUCE:
    return begin_allreduce(a, o, op, d);
  case HS_OP_PUSH: {
    if ((rc = grow_workers(a, op->worker, d))) return rc;
    int w = op->worker;
    if (op->what == HS_COMM_GRAD) {
      double b = a->last_batch[w];
      o->samples = b;
      o->value = b > 0 ? b * hs_conv_efficiency(&a->c, b) / a->D : 0;
    } else {
      o->samples = a->local_samples[w];
      o->value = local_value(a, a->local_samples[w], a->local_updates[w]);
    }
    a->local_pending -= a->local_updates[w];
    a->local_samples[w] = 0;
    a->local_updates[w] = 0;
    /* The server scales the update by the push's weight p. A push applied on arrival with
     * p = 1/N is one worker's share of a model average over the N workers, which the
     * all-reduce row credits with all its samples; so such a push counts min(1, N p) of its
     * progress: shares summing to 1 over a round (ASHL's p_i, ADSP's 1/N) as much as an
     * average of the same local steps, smaller shares proportionally less, and a larger
     * weight, which moves the model further than an average would, no more (the model has
     * no penalty for overshooting). Accumulated pushes are averaged by the server, so there
     * the neutral weight is 1 (at the apply). docs/convergence.md. */
    double share = o->weight * (o->ps_mode == HS_PS_ACCUMULATE ? 1.0 : (double)a->n);
    o->value *= o->cfactor * (share < 1 ? share : 1.0);
    return 0;
  }
  case HS_OP_PULL:
    o->k = a->k;
    return 0;
  case HS_OP_APPLY:
    return 0;
  }
  return hs_diag_set(d, HS_ERUNTIME, "analytic convergence: unknown operation %d", (int)op->kind);
}

/* All-reduce completed: the participants take the global model. With keep_local each keeps
 * the progress of the local updates it made while the operation was in flight; without it
 * those updates are lost, so they no longer count toward the next average. */
static void end_allreduce(analytic *a, const a_op *o) {
  a->k += o->value;
  double k = a->k, l = hs_conv_loss(&a->c, k);
  double *wk = a->wk, *wloss = a->wloss;
  const int *ws = o->ws;
  if (!o->keep_local && a->local_pending == 0) {
    for (int i = 0; i < o->n; i++) {
      wk[ws[i]] = k;
      wloss[ws[i]] = l;
    }
    return;
  }
  for (int i = 0; i < o->n; i++) {
    int w = ws[i];
    if (o->keep_local) {
      double gain = wk[w] - a->k_snap[w];
      wk[w] = k + (gain > 0 ? gain : 0);
      wloss[w] = gain > 0 ? hs_conv_loss(&a->c, wk[w]) : l;
    } else {
      a->local_pending -= a->local_updates[w];
      a->local_updates[w] = 0;
      a->local_samples[w] = 0;
      wk[w] = k;
      wloss[w] = l;
    }
  }
}

static int a_end(void *st, int64_t id, int staleness, hs_diag *d) {
  analytic *a = st;
  if (id < 0 || id >= a->cap_ops)
    return hs_diag_set(d, HS_ERUNTIME, "analytic convergence: no operation %lld in flight", (long long)id);
  a_op *o = &a->ops[id];
  switch (o->kind) {
  case HS_OP_ALLREDUCE:
    end_allreduce(a, o);
    return 0;
  case HS_OP_PUSH:
    if (o->ps_mode == HS_PS_ACCUMULATE) {
      a->acc_samples += o->samples;
      a->acc_wsamples += o->samples * o->weight;
      if (o->cfactor < a->acc_cfactor) a->acc_cfactor = o->cfactor;
    } else {
      a->k += o->value * hs_conv_stale_factor(&a->c, staleness);
    }
    return 0;
  case HS_OP_PULL:
    if (o->worker >= 0 && o->worker < a->n) {
      a->wk[o->worker] = o->k;
      a->wloss[o->worker] = hs_conv_loss(&a->c, o->k);
    }
    return 0;
  case HS_OP_APPLY: {
    /* The server applies the weighted mean of the accumulated updates: their efficiency is
     * that of their total batch B, scaled by their mean weight. */
    double B = a->acc_samples, pbar = B > 0 ? a->acc_wsamples / B : 1;
    if (B > 0)
      a->k += B * hs_conv_efficiency(&a->c, B) * (pbar < 1 ? pbar : 1.0) * a->acc_cfactor / a->D;
    a->acc_samples = 0;
    a->acc_wsamples = 0;
    a->acc_cfactor = 1.0;
    return 0;
  }
  }
  return hs_diag_set(d, HS_ERUNTIME, "analytic convergence: unknown operation %d", (int)o->kind);
}

static int a_evaluate(void *st, double *loss, double *accuracy, hs_diag *d) {
  analytic *a = st;
  *loss = hs_conv_loss(&a->c, a->k);
  *accuracy = hs_conv_accuracy(&a->c, *loss, a->classes);
  return 0;
}

/* A real evaluation's accuracy is the map's plus noise of standard deviation acc_noise,
 * independent from one evaluation to the next (measured: docs/performance.md), so it meets a
 * target accuracy A with probability Phi((a - A) / acc_noise). The loss is taken as noise-free: a
 * target loss is met or not by the curve's value. */
static double a_target_chance(void *st, double loss, double acc, double target_loss, double target_accuracy) {
  const analytic *a = st;
  if (!(a->c.acc_noise > 0) || !(target_accuracy > 0)) return NAN;
  if (target_loss > 0 && loss > target_loss) return 0;
  return 0.5 * erfc((target_accuracy - acc) / (a->c.acc_noise * M_SQRT2));
}

/* The loss l(k) falls towards beta2 without reaching it, and the accuracy rises towards
 * acc_max, reaching it only when the map is constant (acc_alpha and acc_slope 0); a target past
 * either is never met, however long the run (with acc_noise too: a noisy evaluation may pass
 * acc_max, but the model's plateau is where the curves it was fitted to ended). */
static int a_check_target(const hs_params *p, int classes, double target_loss,
                          double target_accuracy, hs_diag *d) {
  hs_conv_coef c;
  hs_conv_coef_from(p, &c);
  if (target_loss > 0 && target_loss <= c.beta2)
    return hs_diag_set(d, HS_EINVAL, "--target-loss %g can never be reached with --convergence analytic: "
                       "its loss falls towards beta2 = %g without reaching it; give a target above %g "
                       "or another beta2", target_loss, c.beta2, c.beta2);
  if (!(target_accuracy > 0)) return 0;
  if (!(c.acc_max > 0))
    return hs_diag_set(d, HS_EINVAL, "--target-accuracy can never be reached with --convergence analytic "
                       "here: it has no accuracy map for this model (acc_max = 0); give acc_max and "
                       "acc_alpha (fitted by `hetsim fit-convergence`), a --target-loss, or "
                       "--convergence proxy");
  double chance = classes > 0 ? 1.0 / classes : 0;
  if (target_accuracy > c.acc_max ||
      (target_accuracy == c.acc_max && (c.acc_alpha > 0 || c.acc_slope > 0) && c.acc_max > chance))
    return hs_diag_set(d, HS_EINVAL, "--target-accuracy %g can never be reached with --convergence analytic: "
                       "its accuracy rises towards acc_max = %g without passing it; give a target "
                       "below %g or another acc_max", target_accuracy, c.acc_max, c.acc_max);
  return 0;
}

const hs_conv_model hs_conv_analytic = {
    .version = HS_CONV_VERSION,
    .name = "analytic",
    .description = "progress in effective samples (Pollux efficiency, staleness, local-step and "
                   "compression penalties) mapped to l(k) = 1/(beta0 k + beta1) + beta2",
    .params = analytic_params,
    .state_size = sizeof(analytic),
    .init = a_init,
    .fini = a_fini,
    .add_worker = a_add_worker,
    .step = a_step,
    .local_update = a_local_update,
    .set_lr = a_set_lr,
    .begin = a_begin,
    .end = a_end,
    .evaluate = a_evaluate,
    .check_target = a_check_target,
    .target_chance = a_target_chance,
};
