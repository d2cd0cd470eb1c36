/* fuzz_import: libFuzzer entry point for `hetsim calib import` (calib/cal_import.c), the
 * reader of profiles (docs/profile.md).
 *
 * Each input is one profile document, imported into an in-memory store (":memory:": no file
 * is written). Opening one costs its schema's migrations (about 20 ms under the sanitizers), so
 * a process opens one store and empties its calibration tables after every input: each input
 * starts from the rows of a fresh store. The contract of calib/cal_import.h must hold:
 * - a failure is HS_EINVAL with a message naming the document (rc == d.code), and stores no
 *   row in any calibration table (device, model, calib_sample, perf_model, comm_sample,
 *   comm_model);
 * - no import, good or bad, leaves a transaction open;
 * - hs_cal_import_check refuses exactly the documents that the import into a fresh store
 *   refuses, with the same message (the only refusal it cannot make, a contradiction with a
 *   model row already stored, cannot happen in a fresh store);
 * - a success imported a second time reports unchanged and stores nothing new;
 * - a success stores its calib_sample and comm_sample rows (as many as info counts) and a step
 *   fit, which loads with hs_perf_load (by device id) and gives finite, non-negative times at
 *   the batches measured and in between.
 * Any broken invariant traps. tests/fuzz/run.sh builds it; tests/test_fuzz_regress.c runs every
 * file of tests/fuzz/corpus/import/ and tests/fuzz/regress/import/ through this function
 * without libFuzzer. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "calib/cal_import.h"
#include "core/core_perfmodel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { FI_TABLES = 6 };

/* Row counts of the calibration tables; traps when one cannot be read. */
static void fi_counts(hs_store *s, int64_t out[FI_TABLES]) {
  static const char *const sql[FI_TABLES] = {
      "SELECT count(*) FROM device",       "SELECT count(*) FROM model",
      "SELECT count(*) FROM calib_sample", "SELECT count(*) FROM perf_model",
      "SELECT count(*) FROM comm_sample",  "SELECT count(*) FROM comm_model",
  };
  for (int i = 0; i < FI_TABLES; i++) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(hs_store_db(s), sql[i], -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW)
      __builtin_trap();
    out[i] = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
}

static int fi_same(const int64_t a[FI_TABLES], const int64_t b[FI_TABLES]) {
  return memcmp(a, b, FI_TABLES * sizeof a[0]) == 0;
}

/* The step fit stored for the import: it loads, and its times are finite and >= 0 from batch 1
 * to the largest measured batch. */
static void fi_check_perf(hs_store *s, const hs_cal_import_info *info) {
  char id[32];
  snprintf(id, sizeof id, "%lld", (long long)info->device_id);
  hs_perf_model m;
  int64_t dev = 0;
  hs_diag d = {0};
  if (hs_perf_load(s, id, info->model, &m, &dev, &d) || dev != info->device_id) __builtin_trap();
  int hi = 1;
  for (int i = 0; i < m.n_points; i++)
    if (m.pt_batch[i] > hi) hi = m.pt_batch[i];
  if (m.max_batch > hi) hi = m.max_batch;
  const double at[] = {1, 2, 0.25 * hi, 0.5 * hi, hi - 1, hi};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    if (at[i] < 1) continue;
    double t = hs_perf_eval(&m, floor(at[i]));
    if (!isfinite(t) || t < 0) __builtin_trap();
  }
  for (int i = 0; i < m.n_points; i++) {
    double t = hs_perf_eval(&m, m.pt_batch[i]);
    if (!isfinite(t) || t < 0) __builtin_trap();
  }
}

/* The process's store and its row counts when fresh. */
static hs_store *fi_store;
static int64_t fi_fresh[FI_TABLES];

/* Empties the calibration tables: the store is as fresh again. */
static void fi_wipe(hs_store *s) {
  if (sqlite3_exec(hs_store_db(s),
                   "DELETE FROM comm_model; DELETE FROM comm_sample; DELETE FROM perf_model;"
                   " DELETE FROM calib_sample; DELETE FROM device; DELETE FROM model;",
                   NULL, NULL, NULL) != SQLITE_OK)
    __builtin_trap();
  int64_t now[FI_TABLES];
  fi_counts(s, now);
  if (!fi_same(now, fi_fresh)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  hs_diag d = {0};
  if (!fi_store) {
    if (hs_store_open(&fi_store, ":memory:", 0, &d)) __builtin_trap();
    fi_counts(fi_store, fi_fresh);
  }
  hs_store *s = fi_store;
  int64_t after[FI_TABLES];

  hs_cal_import_info info, check_info;
  hs_diag cd = {0};
  int crc = hs_cal_import_check("fuzz.json", text, size, NULL, &check_info, &cd);
  int rc = hs_cal_import_text(s, "fuzz.json", text, size, &info, &d);
  if (!sqlite3_get_autocommit(hs_store_db(s))) __builtin_trap(); /* no transaction left open */
  fi_counts(s, after);
  if (rc) {
    /* A bad document: HS_EINVAL, a message that names it, nothing stored. */
    if (rc != HS_EINVAL || rc != d.code || strncmp(d.msg, "fuzz.json:", 10) != 0) __builtin_trap();
    if (!fi_same(fi_fresh, after)) __builtin_trap();
    /* The check refuses it too, with the same words. */
    if (crc != rc || strcmp(cd.msg, d.msg) != 0) __builtin_trap();
  } else {
    if (crc || info.unchanged || info.device_id <= 0) __builtin_trap();
    if (strcmp(check_info.hash, info.hash) != 0) __builtin_trap();
    if (info.samples < 1 || after[2] - fi_fresh[2] != info.samples) __builtin_trap();
    if (after[4] - fi_fresh[4] != info.comm_samples) __builtin_trap();
    if (!info.fitted[HS_CAL_STEP]) __builtin_trap(); /* the step phase must fit */
    fi_check_perf(s, &info);
    /* The same document again: unchanged, nothing new. */
    hs_cal_import_info again;
    int64_t third[FI_TABLES];
    if (hs_cal_import_text(s, "fuzz.json", text, size, &again, &d) || !again.unchanged ||
        again.device_id != info.device_id || !sqlite3_get_autocommit(hs_store_db(s)))
      __builtin_trap();
    fi_counts(s, third);
    if (!fi_same(after, third)) __builtin_trap();
    fi_wipe(s);
  }
  return 0;
}
