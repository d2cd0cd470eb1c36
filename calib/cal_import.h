/* cal_import: measurements made elsewhere into the calibration tables — a profile (the JSON
 * document of docs/profile.md, written by tools/hetsim_profile.py or converted from published
 * measurements) becomes device, model, calib_sample and comm_sample rows, fitted exactly as
 * `hetsim calib` fits its own timings (cal_store.h, hs_cal_refit and hs_cal_refit_comm: the
 * same forms, the same held-out selection, the same stored errors).
 *
 * What is stored (calib/README.md, "Importing profiles", has the details):
 * - device: the profile's device under its name, or "NAME (N workers)" when execution.concurrent
 *   is N > 1 (the convention of `hetsim calib --concurrent`), or opts.device_name; source says
 *   where it was measured and carries the document's content hash.
 * - model: the row of a zoo model as the zoo computes it (the profile's parameter count must
 *   match); any other model with the profile's parameters, gradient bytes and training FLOPs
 *   per sample, source = the profile. A model already in the table is kept; a profile whose
 *   parameter count or gradient size contradicts it is refused.
 * - calib_sample: every compute entry; at a batch with forward, backward and update but no
 *   step, a step row whose median is their sum (p10, p90 NULL, count the smallest).
 * - perf_model: every phase with samples at 3 or more batch sizes, fitted; the step phase must
 *   fit. max_batch is the largest timed batch when the profile names an oom_batch.
 * - comm_sample, comm_model: every comm entry (with its mean_s where it gives one); alpha + n/beta
 *   per (backend, op, world size) with 2 or more message sizes (a group that does not fit is
 *   reported, not refused). An "allreduce_step" entry (the whole gradient's all-reduce as DDP
 *   issues it after a step; mean_s required, at most one per backend and world size) is stored
 *   and reported, never fitted: hs_comm_link_load takes its mean at the run's gradient.
 * Contract:
 * - One document is one transaction: on any failure nothing of it is stored. The document is
 *   checked whole before the database is written; a bad document is HS_EINVAL with
 *   "NAME: $.compute[3].median_s: expected ..., got ..." (the JSON path of the field) or
 *   "NAME:LINE:COL: ..." for a syntax error.
 * - Importing the same document twice (same content, same device name) stores nothing the
 *   second time: info->unchanged is 1.
 * - The caller owns the store. When it holds a transaction (hs_cal_tx_begin: `hetsim calib
 *   import A B` stores its files all or none), the import is a savepoint inside it. Nothing
 *   goes to stdio.
 * Units: seconds, bytes, samples, FLOP. */
#ifndef HS_CAL_IMPORT_H
#define HS_CAL_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "calib/cal_fit.h"
#include "calib/cal_store.h"
#include "core/core_error.h"
#include "core/core_store.h"

/* The profile format version this build reads. */
#define HS_PROFILE_VERSION 1
/* Longest device name a profile (or --as) may give, in bytes; the " (N workers)" suffix comes
 * on top. */
#define HS_CAL_IMPORT_NAME_MAX 100
/* The comm op of the whole gradient's all-reduce as DDP issues it after each training step. */
#define HS_CAL_OP_ALLREDUCE_STEP "allreduce_step"
/* Most (backend, op, world size) groups of communication timings in one profile. */
#define HS_CAL_IMPORT_MAX_COMM 32
/* Largest profile file read, in bytes. */
#define HS_CAL_IMPORT_MAX_BYTES (64 << 20)

typedef struct hs_cal_import_opts {
  const char *device_name; /* stored device name instead of the profile's; NULL = the profile's */
} hs_cal_import_opts;

typedef struct hs_cal_import_comm {
  char backend[8], op[16];
  int world_size;
  int sizes;                     /* distinct message sizes */
  int fitted;                    /* 1: a comm_model row was stored */
  double alpha_s, beta_bytes_per_s, r2;
  double mean_s;                 /* allreduce_step: its mean (s), at `bytes`; NaN otherwise */
  int64_t bytes;                 /* allreduce_step: its size; 0 otherwise */
  char why[256];                 /* when not fitted */
} hs_cal_import_comm;

typedef struct hs_cal_import_info {
  char device[128];              /* device.name stored */
  char model[64];                /* model name */
  int64_t device_id;
  char hash[17];                 /* the document's content hash, 16 hex digits */
  int unchanged;                 /* 1: this document was imported before; nothing was stored */
  int model_added;               /* 1: the model row was inserted now */
  int model_in_zoo;              /* 1: a model of the zoo */
  int samples;                   /* calib_sample rows stored (derived step rows included) */
  int derived_steps;             /* of which step rows summed from forward + backward + update */
  int comm_samples;              /* comm_sample rows stored */
  int fits;                      /* phases and comm groups fitted (perf_model / comm_model) */
  int batches;                   /* distinct batch sizes with a step time */
  int oom_batch, max_batch;      /* 0 = none */
  int fitted[HS_CAL_PHASES];     /* 1 when fits[phase] was stored */
  hs_fit_set fits_by_phase[HS_CAL_PHASES];
  int n_comm;
  hs_cal_import_comm comm[HS_CAL_IMPORT_MAX_COMM];
  char fit_notes[512];           /* phases that had samples but could not be fitted */
} hs_cal_import_info;

/* Reads one profile (format docs/profile.md) and stores it in st in one transaction: the
 * device (source = provenance text), the model (if absent; source = profile), calib_sample
 * rows, comm_sample rows, then fits perf models and comm models exactly as `hetsim calib`
 * does (same forms, held-out selection, stored errors, max_batch from oom_batch). Importing
 * the same document twice changes nothing (detected by device name + model + a content
 * hash). On a bad document returns HS_EINVAL with "FILE: $.compute[3].median_s: expected ...,
 * got ..." in d, and stores nothing. A file that cannot be read is HS_EIO. */
int hs_cal_import_file(hs_store *st, const char *path, hs_cal_import_info *info, hs_diag *d);
/* The same for a document in memory; name stands for the file in messages. */
int hs_cal_import_text(hs_store *st, const char *name, const char *json, size_t len,
                       hs_cal_import_info *info, hs_diag *d);
/* Both with options (o may be NULL). */
int hs_cal_import_file_opts(hs_store *st, const char *path, const hs_cal_import_opts *o,
                            hs_cal_import_info *info, hs_diag *d);
int hs_cal_import_text_opts(hs_store *st, const char *name, const char *json, size_t len,
                            const hs_cal_import_opts *o, hs_cal_import_info *info, hs_diag *d);

/* Parses and checks a document without a database: what hs_cal_import_text refuses as a bad
 * document, this refuses too, except a contradiction with a model row already stored. Fills
 * info's device, model, hash and model_in_zoo. */
int hs_cal_import_check(const char *name, const char *json, size_t len, const hs_cal_import_opts *o,
                        hs_cal_import_info *info, hs_diag *d);
/* Reads a whole file (at most HS_CAL_IMPORT_MAX_BYTES) into a fresh NUL-terminated buffer the
 * caller frees (*len excludes the NUL); HS_EIO when it cannot be read. */
int hs_cal_import_read(const char *path, char **text, size_t *len, hs_diag *d);

/* 1 when name is acceptable as a model name of a profile: 1 to 63 characters of letters,
 * digits and "._+-". */
int hs_cal_import_model_name_ok(const char *name);

#endif
