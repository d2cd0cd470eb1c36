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
 * - Errors: HS_EDB with sqlite3_errmsg; nothing goes to stdio. Units: s, bytes, samples. */
#ifndef HS_CAL_STORE_H
#define HS_CAL_STORE_H

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

int hs_cal_store_device(hs_store *s, const hs_cal_device *dev, int64_t *id, hs_diag *d);
/* Inserts the zoo model's row (parameters, gradient bytes, FLOPs) unless present. */
int hs_cal_store_model(hs_store *s, const char *model, hs_diag *d);

/* *stored = 1 when every phase of the point is in calib_sample. */
int hs_cal_point_stored(hs_store *s, int64_t dev, const char *model, int batch, int *stored,
                        hs_diag *d);
/* Replaces the point's rows with st[HS_CAL_PHASES] in one transaction. */
int hs_cal_store_point(hs_store *s, int64_t dev, const char *model, int batch,
                       const hs_cal_stats st[HS_CAL_PHASES], hs_diag *d);
/* Deletes every sample and fit of (device, model) (for --redo). */
int hs_cal_forget(hs_store *s, int64_t dev, const char *model, hs_diag *d);
/* The stored medians of one phase, by batch (the newest row of each batch); the caller frees
 * *batch and *time. *n may be 0. */
int hs_cal_load_samples(hs_store *s, int64_t dev, const char *model, hs_cal_phase phase,
                        double **batch, double **time, int *n, hs_diag *d);
/* Replaces the fits of (device, model, phase) with every form of fs that could be fitted;
 * fs->chosen gets chosen = 1. max_batch 0 = NULL (no limit seen). */
int hs_cal_store_fits(hs_store *s, int64_t dev, const char *model, hs_cal_phase phase,
                      const hs_fit_set *fs, int max_batch, hs_diag *d);

/* Communication: op is "allreduce", "p2p" or "wake" (bytes 0: the hand-off latency, no model),
 * backend "cpu" (threads in one process). */
typedef struct hs_comm_key {
  int64_t device;
  const char *backend, *op;
  int world_size;
} hs_comm_key;
int hs_cal_comm_stored(hs_store *s, const hs_comm_key *k, int64_t bytes, int *stored, hs_diag *d);
int hs_cal_store_comm_sample(hs_store *s, const hs_comm_key *k, int64_t bytes,
                             const hs_cal_stats *st, hs_diag *d);
int hs_cal_load_comm(hs_store *s, const hs_comm_key *k, double **bytes, double **time, int *n,
                     hs_diag *d);
int hs_cal_store_comm_model(hs_store *s, const hs_comm_key *k, double alpha_s, double beta,
                            double r2, hs_diag *d);

#endif
