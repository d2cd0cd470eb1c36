/* core_perfmodel: fitted performance models t(b), evaluated by the simulator.
 *
 * The calibration (calib/) fits step times against batch size and stores the fits in the
 * perf_model table; this module is the evaluation side, kept in core/ so that the simulator
 * (which may not include calib/) can use it. Forms, with b the batch in samples and t in s:
 *   linear      t = t0 + k*b                                        params {t0, k}
 *   cubic       t = a0 + a1*b + a2*b^2 + a3*b^3 (as LBB fits)       params {a0, a1, a2, a3}
 *   piecewise   t = t0 + k1*b                  for b <= knee        params {t0, k1, k2, knee}
 *               t = t0 + k1*knee + k2*(b-knee) for b >  knee        (continuous at the knee)
 *   saturating  t = t0 + k*(b - b0*(1 - exp(-b/b0)))                params {t0, k, b0}
 *               a smooth knee: the fixed cost t0 dominates while b << b0 (the extra time grows
 *               like k*b^2/(2*b0)), and the time is linear with slope k once b >> b0; it is
 *               monotone increasing for k > 0, b0 > 0.
 * The params column holds a JSON object with exactly those keys (numbers).
 *
 * Contract: pure functions on caller-owned structs, except hs_perf_load, which reads the
 * database through the store handle (read-only SQL) and allocates nothing the caller keeps.
 * Units: seconds, samples. */
#ifndef HS_CORE_PERFMODEL_H
#define HS_CORE_PERFMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_config.h"
#include "core/core_error.h"
#include "core/core_store.h"

typedef enum hs_perf_form {
  HS_PERF_LINEAR = 0,
  HS_PERF_CUBIC = 1,
  HS_PERF_PIECEWISE = 2,
  HS_PERF_SATURATING = 3
} hs_perf_form;
#define HS_PERF_FORMS 4
#define HS_PERF_MAX_PARAMS 4

#define HS_PERF_MAX_POINTS 128

typedef struct hs_perf_model {
  hs_perf_form form;
  double p[HS_PERF_MAX_PARAMS]; /* in the order of the form's keys above */
  int max_batch;                /* samples; 0 = no limit known (no out-of-memory was seen) */
  /* Step times measured at single batch sizes (the calibration's medians), batches ascending:
   * at exactly such a batch hs_perf_eval returns the measurement, elsewhere the fit. A step can
   * cost more at a batch its kernels do not tile evenly (mlp on this repository's AVX-512 CPU:
   * 63 samples took 36% longer than 64; docs/performance.md, "Batch sizes the kernels do not
   * tile"), which no smooth form follows; a calibration of every batch size a run will use
   * gives them all. n_points = 0: the fit alone (hs_fit_form and hs_perf_params_parse set 0). */
  int n_points;
  int pt_batch[HS_PERF_MAX_POINTS];
  double pt_s[HS_PERF_MAX_POINTS];
} hs_perf_model;

/* "linear", "cubic", "piecewise", "saturating"; NULL for an unknown form. */
const char *hs_perf_form_name(hs_perf_form f);
/* Number of parameters of a form and the JSON key of parameter i. */
int hs_perf_form_nparams(hs_perf_form f);
const char *hs_perf_param_key(hs_perf_form f, int i);
/* 0, or HS_EINVAL for a name that is not a form. */
int hs_perf_form_parse(const char *name, hs_perf_form *out);

/* Time in seconds of one step at `batch` samples: a measured point's at exactly its batch, else
 * the fit's; below the smallest measured batch, at most that batch's measured time (a fit does
 * not extrapolate upwards as the batch shrinks). Never negative (clamped at 0). */
double hs_perf_eval(const hs_perf_model *m, double batch);

/* Writes the params JSON object ({"t0":...,"k":...}, shortest round-trip numbers). Returns the
 * length, or HS_ELIMIT if buf is too small. */
int hs_perf_params_json(const hs_perf_model *m, char *buf, size_t size);
/* Parses a params JSON object for form f into m->p; every key of the form must be present and
 * no other. HS_EINVAL with a message otherwise. */
int hs_perf_params_parse(hs_perf_form f, const char *json, hs_perf_model *m, hs_diag *d);

/* Loads the chosen fit of phase "step" for a model on a calibrated device, with the device's
 * measured step medians (calib_sample, the newest per batch; the HS_PERF_MAX_POINTS smallest
 * batches when there are more) as its points. `device` is a device
 * name (device.name) or a device id in decimal; when several devices share a name the newest
 * one that has a chosen step fit for the model wins. HS_ENOTFOUND with a message that lists
 * what the database holds (devices and their calibrated models) when there is no such device
 * or the model was not calibrated on it. */
int hs_perf_load(hs_store *s, const char *device, const char *model, hs_perf_model *out,
                 int64_t *device_id, hs_diag *d);

/* Steps st, whose rows are (bytes, median_s) ordered by bytes (the newest first within a size),
 * and sets *t to the time at `bytes` by log-log interpolation between the two measured sizes
 * around it (the nearest two at either end when extrapolate is set; outside the measured sizes
 * it returns 0 otherwise). Between threads or processes the time per byte changes as a message
 * leaves the caches or switches protocol, so the fitted alpha + n/beta line misses single sizes
 * by up to 3x; the measurements do not. Returns 1 when *t was set. */
struct sqlite3_stmt;
int hs_comm_time_interp(struct sqlite3_stmt *st, double bytes, int extrapolate, double *t);

/* The inverse of the simulator's ring all-reduce for n > 1 participants over equal links (a
 * ring of n ranks costs 2(n-1)(a + m/(n b))): the link whose ring takes alpha + m/beta for every
 * m, i.e. latency alpha / (2(n-1)) and bandwidth beta * 2(n-1) / n — a measured all-reduce of n
 * ranks to be replayed as a ring (hs_comm_link_load, hetsim validate). */
hs_link_spec hs_ring_link(double alpha, double beta, int n);

/* A link's latency and bandwidth from the device's measured communication (`network:` or
 * `link: {calib: NAME}` in a cluster file) for a run of `world` workers, of `backend` only
 * (`{calib: NAME, backend: B}`; NULL or "": any, the newest first): its fitted all-reduce
 * model of that world size, else its p2p model, else its all-reduce model of the nearest world
 * size. An all-reduce model of w ranks becomes the link that a ring all-reduce of w ranks needs
 * to take the measured time, so that the simulated ring of `world` reproduces the measurement.
 * Where msg_bytes lies within the measured sizes, the time measured there (log-log
 * interpolated) sets the bandwidth. Where that same device (the chosen model's device row) has
 * an 'allreduce_step' sample of the chosen backend at exactly `world` ranks and within 1% of
 * msg_bytes (the whole gradient's all-reduce as DDP issues it after a step), the newest one's
 * mean (its median when it has none) is the time instead, and the link is the one whose ring of
 * `world` ranks takes exactly that time at msg_bytes (alpha kept when below it). `how` (may be
 * NULL) says which. HS_ENOTFOUND when the device has no such model. */
int hs_comm_link_load(hs_store *s, const char *device, const char *backend, int world, double msg_bytes,
                      hs_link_spec *out, char *how, size_t how_len, hs_diag *d);

/* The spread of the device's measured steps of the model as the coefficient of variation of
 * the simulator's lognormal jitter (mean 1): per measured batch size, the lognormal through its
 * 10th and 90th percentiles has sigma = ln(p90/p10) / (2 z90), z90 = 1.2816; the median sigma
 * over the batch sizes, as cv = sqrt(exp(sigma^2) - 1). `jitter: {calib: NAME}` in a cluster
 * file, and `hetsim validate`. HS_ENOTFOUND when no step has both percentiles. */
int hs_perf_jitter_load(hs_store *s, const char *device, const char *model, double *cv, hs_diag *d);

/* Writes "NAME (id N: model, model), ..." or "no calibrated devices" into buf, for messages. */
void hs_perf_describe_db(hs_store *s, char *buf, size_t size);

#endif
