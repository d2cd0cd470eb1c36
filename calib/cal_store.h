/* cal_store: the calibration's rows in the database (device, model, calib_sample, perf_model,
 * comm_sample, comm_model; docs/schema.md).
 *
 * Contract:
 * - A device row is reused when one with the same kind, name, host, ordinal, SM partition and
 *   UUID exists, so that rerunning a calibration adds to the same device (resume).
 * - A calibration point (device, model, batch) is written in one transaction with all four
 *   phases (forward, backward, update, step), so it is either wholly stored or absent; an
 *   interrupted calibration keeps every point it finished.
 * - Fits replace the earlier fits of the same (device, model, phase) in one transaction.
 * - Transactions: each writing function is one transaction of its own, or, inside one the caller
 *   opened with hs_cal_tx_begin, a savepoint within it: `hetsim calib import` stores a whole
 *   profile (device, model, samples, fits) in one transaction, through the same functions as
 *   `hetsim calib`, and rolls all of it back on the first failure.
 * - Provenance: device.source and model.source say where the numbers come from (docs/schema.md);
 *   NULL for a device timed here by `hetsim calib` and for a model of the zoo.
 * - Errors: HS_EDB with sqlite3_errmsg; nothing goes to stdio. Units: s, bytes, samples. */
#ifndef HS_CAL_STORE_H
#define HS_CAL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "calib/cal_device.h"
#include "calib/cal_fit.h"
#include "calib/cal_time.h"
#include "core/core_store.h"

/* The phases of a point, in calib_sample's vocabulary. */
typedef enum hs_cal_phase {
  HS_CAL_FORWARD = 0, HS_CAL_BACKWARD = 1, HS_CAL_UPDATE = 2, HS_CAL_STEP = 3, HS_CAL_PHASES = 4
} hs_cal_phase;
const char *hs_cal_phase_name(hs_cal_phase p);

/* A transaction around several of the functions below: BEGIN IMMEDIATE ... COMMIT, or, when
 * the caller already holds one, a savepoint in it (*nested = 1), to pass to the matching commit
 * or rollback. A failed commit is rolled back. */
int hs_cal_tx_begin(hs_store *s, int *nested, hs_diag *d);
int hs_cal_tx_commit(hs_store *s, int nested, hs_diag *d);
void hs_cal_tx_rollback(hs_store *s, int nested);

/* The id of the device row with dev's kind, name, host, ordinal, SM partition, UUID and source
 * (NULL: timed here), inserted when there is none. */
int hs_cal_store_device(hs_store *s, const hs_cal_device *dev, int64_t *id, hs_diag *d);
int hs_cal_store_device_from(hs_store *s, const hs_cal_device *dev, const char *source, int64_t *id,
                             hs_diag *d);

/* A row of the model table. */
typedef struct hs_cal_model_row {
  char name[64];
  int64_t params;           /* trainable parameters */
  int64_t grad_bytes;       /* bytes of one gradient as sent */
  double flops_per_sample;  /* FLOP per sample, forward + backward; NaN = unknown (NULL) */
  char description[256];    /* empty = NULL */
  char source[512];         /* where the numbers come from; empty = NULL (the zoo) */
} hs_cal_model_row;
/* Inserts the zoo model's row (parameters, gradient bytes, training FLOPs) unless present. */
int hs_cal_store_model(hs_store *s, const char *model, hs_diag *d);
/* Inserts m unless a model of that name is present (then nothing changes). */
int hs_cal_store_model_row(hs_store *s, const hs_cal_model_row *m, hs_diag *d);
/* Reads the row of model name; HS_ENOTFOUND when the table has none. */
int hs_cal_load_model(hs_store *s, const char *name, hs_cal_model_row *m, hs_diag *d);
/* Writes "a, b, ..." (the imported models: model.source not NULL) into buf, for messages;
 * empty when there are none or the table cannot be read. */
void hs_cal_imported_models(hs_store *s, char *buf, size_t size);

/* *stored = 1 when every phase of the point is in calib_sample. */
int hs_cal_point_stored(hs_store *s, int64_t dev, const char *model, int batch, int *stored,
                        hs_diag *d);
/* Replaces the point's rows with st[HS_CAL_PHASES] in one transaction. */
int hs_cal_store_point(hs_store *s, int64_t dev, const char *model, int batch,
                       const hs_cal_stats st[HS_CAL_PHASES], hs_diag *d);
/* Inserts one row of calib_sample (the point's other phases untouched). */
int hs_cal_store_sample(hs_store *s, int64_t dev, const char *model, int batch, hs_cal_phase phase,
                        const hs_cal_stats *cs, hs_diag *d);
/* Deletes every sample and fit of (device, model) (for --redo). */
int hs_cal_forget(hs_store *s, int64_t dev, const char *model, hs_diag *d);
/* Deletes every comm_sample and comm_model row of (device, backend) (for --redo). */
int hs_cal_forget_comm(hs_store *s, int64_t dev, const char *backend, hs_diag *d);
/* The stored medians of one phase, by batch (the newest row of each batch); the caller frees
 * *batch and *time. *n may be 0. */
int hs_cal_load_samples(hs_store *s, int64_t dev, const char *model, hs_cal_phase phase,
                        double **batch, double **time, int *n, hs_diag *d);
/* Replaces the fits of (device, model, phase) with every form of fs that could be fitted;
 * fs->chosen gets chosen = 1. max_batch 0 = NULL (no limit seen). */
int hs_cal_store_fits(hs_store *s, int64_t dev, const char *model, hs_cal_phase phase,
                      const hs_fit_set *fs, int max_batch, hs_diag *d);
/* The fit of one phase's medians t[i] at batches b[i] (n of them, ascending, distinct): leaves
 * out batches >= oom_batch (0: none; b and t are compacted in place), fits every form and chooses
 * one (hs_fit_select); for the step phase, 1 or 2 batch sizes below a memory limit (max_batch >
 * 0) take the line through them. *fitted 0 with why when they cannot be fitted (the result is
 * then 0). Pure: hs_cal_refit stores what this fits, and `hetsim calib import` checks with it
 * that a profile's step times fit before it writes anything. */
int hs_cal_fit_points(hs_cal_phase phase, double *b, double *t, int n, int oom_batch, int max_batch,
                      hs_fit_set *fs, int *fitted, char *why, size_t why_size, hs_diag *d);
/* The one fitting path of `hetsim calib` and `hetsim calib import`: loads the stored medians of
 * (device, model, phase), leaves out batches >= oom_batch (0: none), fits every form and
 * chooses one (hs_fit_select), and stores the fits with max_batch (hs_cal_store_fits). When the
 * samples cannot be fitted (too few batch sizes, ...) *fitted is 0, why says why, and the
 * result is 0; errors of the database are returned. */
int hs_cal_refit(hs_store *s, int64_t dev, const char *model, hs_cal_phase phase, int oom_batch,
                 int max_batch, hs_fit_set *fs, int *fitted, char *why, size_t why_size, hs_diag *d);

/* Communication: op is "allreduce", "p2p" or "wake" (bytes 0: the hand-off latency, no model)
 * for backend "cpu" (threads in one process); an imported profile also brings "broadcast",
 * "allgather", "reducescatter" and "allreduce_step" (the whole gradient's all-reduce as DDP
 * issues it after a training step, one size, no model) for backends "nccl" and "gloo". */
typedef struct hs_comm_key {
  int64_t device;
  const char *backend, *op;
  int world_size;
} hs_comm_key;
int hs_cal_comm_stored(hs_store *s, const hs_comm_key *k, int64_t bytes, int *stored, hs_diag *d);
int hs_cal_store_comm_sample(hs_store *s, const hs_comm_key *k, int64_t bytes,
                             const hs_cal_stats *st, hs_diag *d);
/* The same with the timings' mean (s; NaN = not known, stored as NULL). */
int hs_cal_store_comm_sample_mean(hs_store *s, const hs_comm_key *k, int64_t bytes,
                                  const hs_cal_stats *st, double mean_s, hs_diag *d);
int hs_cal_load_comm(hs_store *s, const hs_comm_key *k, double **bytes, double **time, int *n,
                     hs_diag *d);
int hs_cal_store_comm_model(hs_store *s, const hs_comm_key *k, double alpha_s, double beta,
                            double r2, hs_diag *d);
/* Fits alpha + n/beta to the stored samples of k (hs_fit_comm) and stores the model; as
 * hs_cal_refit, *fitted 0 with why when they cannot be fitted. */
int hs_cal_refit_comm(hs_store *s, const hs_comm_key *k, double *alpha_s, double *beta, double *r2,
                      int *fitted, char *why, size_t why_size, hs_diag *d);

/* compress_sample (cal_compress.h): the device's rows deleted (redo); whether a sample of
 * compressor at setting on elems floats is stored; one stored. */
int hs_cal_forget_compress(hs_store *s, int64_t dev, hs_diag *d);
int hs_cal_compress_stored(hs_store *s, int64_t dev, const char *compressor, double setting, int64_t elems,
                           int *stored, hs_diag *d);
int hs_cal_store_compress_sample(hs_store *s, int64_t dev, const char *compressor, double setting, int64_t elems,
                                 const hs_cal_stats *cs, hs_diag *d);

#endif
