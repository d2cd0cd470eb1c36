/* core_runopts: the options of a run as its `run.options` JSON holds them (docs/schema.md),
 * typed, each kind with one writer and one reader: a real run's (written by `hetsim real`, read
 * by `hetsim validate`), a simulated run's (`hetsim sim`) and a validation's simulated run's
 * (`hetsim validate`).
 *
 * Contract:
 * - The keys and their order are those the commands have always written, so that databases
 *   written before and after hold the same text (`type_devices`, added later, comes last and
 *   only in runs that have per-worker devices); numbers keep every bit (%.17g, integers as
 *   integers; a double that is not finite is null), strings are escaped as JSON strings.
 * - The reader takes what any hetsim wrote, older ones included: a key that is missing, null or
 *   of another type reads as 0 (or the empty string), as SQLite's json_extract read it; keys it
 *   does not know (pid, host, sweep_point, ...) are ignored. Text that is not a JSON object is
 *   HS_EINVAL.
 * - Strings longer than their field are cut (the fields are sized for what hetsim writes).
 * - No allocation survives a call; thread-safe. */
#ifndef HS_CORE_RUNOPTS_H
#define HS_CORE_RUNOPTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/core_error.h"

/* The most device types with their own device (`real_device`) a real run records. */
#define HS_REAL_MAX_TYPE_DEVICES 64

/* A device type whose workers ran on their own device (the cluster file's `real_device`). */
typedef struct hs_real_type_device {
  char type[64];             /* the device type's name in the cluster file */
  char device[64];           /* as written: "cuda:0/sm=16" */
  char device_name[256];     /* its discovered name ("NAME (16 SMs)"), the calibration's key */
} hs_real_type_device;

typedef struct hs_real_options {
  char backend[16];          /* the comm table: "cpu" | "local" | "nccl" */
  char device[128];          /* as given: "cpu", "cuda:0", "cuda:0/sm=8" */
  char device_name[300];     /* the device's discovered name; the calibration's key */
  int workers;
  int64_t iterations;        /* stop conditions; 0 = none */
  double epochs, time_s, target_loss;
  double lr;
  int64_t eval_every, eval_samples, train_samples;
  double timeout_s;          /* s */
  char launch[16];           /* "none", or the launcher that started the ranks */
  char pin[8];               /* "auto" | "none" */
  int pinned;                /* whether the worker threads were pinned */
  double target_accuracy;    /* stop condition; 0 = none (the key is written only when set, so
                                that runs without it keep the text they always had) */
  int cpus;                  /* the CPUs the recording process (rank 0) could use; 0 = unknown
                                (runs before 2026-11-29; written only when known) */
  int local_ranks;           /* a multi-process run: the ranks on rank 0's machine, the server's
                                included, as the launcher said; 0 = unknown or a threads run */
  /* Per-worker devices (`type_devices`, written last and only when there are some): the
   * device types whose workers ran on a device of their own, in the cluster file's order. */
  int n_type_devices;
  hs_real_type_device type_devices[HS_REAL_MAX_TYPE_DEVICES];
} hs_real_options;

/* Writes o as the JSON object text of a real run's options into buf. HS_EINVAL (buf left a
 * valid empty string) when it does not fit. */
int hs_real_options_format(const hs_real_options *o, char *buf, size_t len, hs_diag *d);
/* Reads a real run's options JSON (NULL reads as "{}"): every field of *o is set. */
int hs_real_options_parse(const char *json, hs_real_options *o, hs_diag *d);

/* A simulated run's options (`hetsim sim`). */
typedef struct hs_sim_options {
  int64_t iterations;        /* stop conditions; 0 = none */
  double epochs, sim_time_s, target_loss, target_accuracy;
  int store_steps;           /* 1: "steps", 0: "summary" */
  char convergence[32];      /* the convergence model's name, "none" */
  char convergence_params[1024];  /* its parameters, canonical "k=v,k=v" */
  char events_csv[4096];     /* the --events file as given; "" = none (null) */
  int64_t grad_bytes;        /* bytes of one gradient */
  char convergence_source[1200];  /* where the convergence parameters came from; "" = null */
  int64_t convergence_fit_id;     /* the stored fit used; 0 = none (null) */
} hs_sim_options;
int hs_sim_options_format(const hs_sim_options *o, char *buf, size_t len, hs_diag *d);
int hs_sim_options_parse(const char *json, hs_sim_options *o, hs_diag *d);

/* The options of the simulated run `hetsim validate` stores for a real run. */
typedef struct hs_validate_options {
  int64_t validates;         /* the real run's id */
  int64_t iterations;
  char convergence[16];      /* "proxy" | "none" */
  double target_loss;        /* the real run's final loss; NaN = null (no convergence model) */
  int64_t grad_bytes;
  char validation_key[17];   /* 16 hex digits: the hash of the validation's inputs */
} hs_validate_options;
int hs_validate_options_format(const hs_validate_options *o, char *buf, size_t len, hs_diag *d);
/* A missing or null target_loss reads as NaN. */
int hs_validate_options_parse(const char *json, hs_validate_options *o, hs_diag *d);

#endif
