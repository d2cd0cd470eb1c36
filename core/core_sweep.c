#include "core/core_sweep.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int key_cmp(const void *a, const void *b) { return strcmp(a, b); }

/* Whether the SQLite file at path holds no table at all: a shard whose sweep was killed while
 * it created the file (before the schema's first transaction), which holds no point. */
static int no_tables(const char *path) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int empty = 0;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    empty = sqlite3_column_int(st, 0) == 0;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return empty;
}

int hs_sweep_keys_load(hs_sweep_keys *ks, const char *path, hs_diag *d) {
  if (access(path, F_OK) != 0 || no_tables(path)) return 0;
  /* A read-only store reads the file as immutable, without its write-ahead log; a shard whose
   * sweep was killed keeps its last commits there (its schema too), so it is opened to write,
   * which takes the log in. */
  char wal[4200];
  snprintf(wal, sizeof wal, "%s-wal", path);
  hs_store *s = NULL;
  int rc = hs_store_open(&s, path, access(wal, F_OK) == 0 ? 0 : HS_STORE_READONLY, d);
  if (rc) return rc;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(hs_store_db(s),
                         "SELECT DISTINCT json_extract(options, '$.sweep_point') FROM run"
                         " WHERE status = 'complete' AND options IS NOT NULL"
                         " AND json_extract(options, '$.sweep_point') IS NOT NULL",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = hs_diag_set(d, HS_EDB, "database %s: reading sweep points: %s", path,
                     sqlite3_errmsg(hs_store_db(s)));
    hs_store_close(s);
    return rc;
  }
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    const char *k = (const char *)sqlite3_column_text(st, 0);
    if (!k || strlen(k) != 16) continue;
    if (ks->n == ks->cap) {
      int nc = ks->cap ? 2 * ks->cap : 64;
      char(*nk)[17] = realloc(ks->k, (size_t)nc * sizeof *nk);
      if (!nk) {
        rc = hs_diag_set(d, HS_ENOMEM, "out of memory");
        break;
      }
      ks->k = nk;
      ks->cap = nc;
    }
    memcpy(ks->k[ks->n++], k, 17);
  }
  if (!rc && step != SQLITE_DONE)
    rc = hs_diag_set(d, HS_EDB, "database %s: reading sweep points: %s", path,
                     sqlite3_errmsg(hs_store_db(s)));
  sqlite3_finalize(st);
  hs_store_close(s);
  if (ks->n) qsort(ks->k, (size_t)ks->n, sizeof *ks->k, key_cmp);
  return rc;
}

int hs_sweep_keys_has(const hs_sweep_keys *ks, const char *key) {
  return ks->n && bsearch(key, ks->k, (size_t)ks->n, sizeof *ks->k, key_cmp) != NULL;
}

void hs_sweep_keys_free(hs_sweep_keys *ks) {
  free(ks->k);
  memset(ks, 0, sizeof *ks);
}

static int dbfail(sqlite3 *db, const char *path, const char *what, hs_diag *d) {
  return hs_diag_set(d, HS_EDB, "database %s: %s: %s", path, what, sqlite3_errmsg(db));
}

int hs_sweep_tag_last(hs_store *s, const char *key, const char *grid, int64_t *run_id,
                      char *status, hs_diag *d) {
  sqlite3 *db = hs_store_db(s);
  *run_id = 0;
  status[0] = '\0';
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db,
                         "UPDATE run SET options = json_set(COALESCE(options, '{}'),"
                         " '$.sweep_point', ?1, '$.sweep', ?2)"
                         " WHERE id = (SELECT max(id) FROM run)"
                         " AND json_extract(COALESCE(options, '{}'), '$.sweep_point') IS NULL"
                         " RETURNING id, status",
                         -1, &st, NULL) != SQLITE_OK)
    return dbfail(db, hs_store_path(s), "tagging the sweep run", d);
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, grid, -1, SQLITE_STATIC);
  int rc = 0, step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    *run_id = sqlite3_column_int64(st, 0);
    snprintf(status, 16, "%s", (const char *)sqlite3_column_text(st, 1));
    step = sqlite3_step(st);
  }
  if (step != SQLITE_DONE) rc = dbfail(db, hs_store_path(s), "tagging the sweep run", d);
  sqlite3_finalize(st);
  return rc;
}

/* "a,b,c": the columns of main.table except the excluded ones, in table order. */
static int columns(sqlite3 *db, const char *table, const char *ex1, const char *ex2, char *buf,
                   size_t len) {
  sqlite3_stmt *st = NULL;
  buf[0] = '\0';
  if (sqlite3_prepare_v2(db,
                         "SELECT group_concat(name, ',') FROM (SELECT name FROM"
                         " pragma_table_info(?1, 'main') WHERE name NOT IN (?2, ?3) ORDER BY cid)",
                         -1, &st, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, ex1, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, ex2, -1, SQLITE_STATIC);
  int ok = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0);
  if (ok) ok = (size_t)snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0)) < len;
  sqlite3_finalize(st);
  return ok ? 0 : -1;
}

/* The tables copied with a run, the columns left out of the copy (the run id, which is
 * remapped, and a table's own row id). */
static const struct {
  const char *table, *ex1, *ex2;
} child_tables[] = {
    {"summary", "run_id", "run_id"},
    {"worker", "run_id", "run_id"},
    {"step", "run_id", "run_id"},
    {"eval", "run_id", "id"},
};
enum { N_CHILD = (int)(sizeof child_tables / sizeof child_tables[0]) };

/* The tables a merge copies (run and child_tables) are the same in every schema version from
 * this one to the current: a shard an older hetsim wrote (a sweep resumed after an upgrade)
 * merges as it is. Raise it when a migration changes one of them. */
#define MERGE_SAME_SINCE 1

static int schema_version_of(sqlite3 *db, const char *schema, int *v) {
  char sql[96];
  snprintf(sql, sizeof sql, "SELECT version FROM %s.schema_version", schema);
  sqlite3_stmt *st = NULL;
  *v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
  if (sqlite3_step(st) == SQLITE_ROW) *v = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return *v < 0 ? -1 : 0;
}

int hs_sweep_merge(hs_store *s, const char *shard_path, int *merged, int *skipped, hs_diag *d) {
  sqlite3 *db = hs_store_db(s);
  const char *mpath = hs_store_path(s);
  *merged = *skipped = 0;
  if (access(shard_path, R_OK) != 0)
    return hs_diag_set(d, HS_ENOTFOUND, "shard %s: %s", shard_path, strerror(errno));
  sqlite3_stmt *att = NULL;
  if (sqlite3_prepare_v2(db, "ATTACH ?1 AS sh", -1, &att, NULL) != SQLITE_OK)
    return dbfail(db, mpath, "attaching the shard", d);
  sqlite3_bind_text(att, 1, shard_path, -1, SQLITE_STATIC);
  int step = sqlite3_step(att);
  sqlite3_finalize(att);
  if (step != SQLITE_DONE)
    return hs_diag_set(d, HS_EDB, "cannot open shard %s: %s", shard_path, sqlite3_errmsg(db));
  int rc = 0, vm = 0, vs = 0;
  sqlite3_stmt *list = NULL, *dup = NULL, *ins_run = NULL, *ins[N_CHILD] = {NULL};
  char cols[2048], sql[5120];
  if (no_tables(shard_path)) goto detach; /* killed while it was created: nothing to merge */
  if (schema_version_of(db, "sh", &vs)) {
    rc = hs_diag_set(d, HS_ESCHEMA, "shard %s is not a hetsim database", shard_path);
    goto detach;
  }
  if (schema_version_of(db, "main", &vm) || vs < MERGE_SAME_SINCE || vs > vm) {
    rc = hs_diag_set(d, HS_ESCHEMA,
                     "shard %s has schema version %d and %s has %d; merge with the hetsim that "
                     "wrote the shard",
                     shard_path, vs, mpath, vm);
    goto detach;
  }
  if (columns(db, "run", "id", "id", cols, sizeof cols)) {
    rc = dbfail(db, mpath, "reading the run columns", d);
    goto detach;
  }
  snprintf(sql, sizeof sql, "INSERT INTO main.run(%s) SELECT %s FROM sh.run WHERE id = ?1", cols, cols);
  if (sqlite3_prepare_v2(db, sql, -1, &ins_run, NULL) != SQLITE_OK) {
    rc = dbfail(db, mpath, "preparing the run copy", d);
    goto detach;
  }
  for (int t = 0; t < N_CHILD; t++) {
    if (columns(db, child_tables[t].table, child_tables[t].ex1, child_tables[t].ex2, cols,
                sizeof cols)) {
      rc = dbfail(db, mpath, "reading the columns", d);
      goto detach;
    }
    snprintf(sql, sizeof sql,
             "INSERT INTO main.%s(run_id, %s) SELECT ?2, %s FROM sh.%s WHERE run_id = ?1",
             child_tables[t].table, cols, cols, child_tables[t].table);
    if (sqlite3_prepare_v2(db, sql, -1, &ins[t], NULL) != SQLITE_OK) {
      rc = dbfail(db, mpath, "preparing the row copy", d);
      goto detach;
    }
  }
  if (sqlite3_prepare_v2(db,
                         "SELECT id, json_extract(options, '$.sweep_point'), started_at FROM sh.run"
                         " WHERE options IS NOT NULL"
                         " AND json_extract(options, '$.sweep_point') IS NOT NULL ORDER BY id",
                         -1, &list, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db,
                         "SELECT 1 FROM main.run WHERE options IS NOT NULL"
                         " AND json_extract(options, '$.sweep_point') = ?1"
                         " AND (status = 'complete' OR started_at = ?2) LIMIT 1",
                         -1, &dup, NULL) != SQLITE_OK) {
    rc = dbfail(db, mpath, "preparing the merge", d);
    goto detach;
  }
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
    rc = dbfail(db, mpath, "starting the merge", d);
    goto detach;
  }
  while (!rc && (step = sqlite3_step(list)) == SQLITE_ROW) {
    int64_t old = sqlite3_column_int64(list, 0);
    sqlite3_bind_value(dup, 1, sqlite3_column_value(list, 1));
    sqlite3_bind_value(dup, 2, sqlite3_column_value(list, 2));
    int ds = sqlite3_step(dup);
    sqlite3_reset(dup);
    if (ds == SQLITE_ROW) {
      (*skipped)++;
      continue;
    }
    if (ds != SQLITE_DONE) {
      rc = dbfail(db, mpath, "looking for a merged run", d);
      break;
    }
    sqlite3_bind_int64(ins_run, 1, old);
    int is = sqlite3_step(ins_run);
    sqlite3_reset(ins_run);
    if (is != SQLITE_DONE) {
      rc = dbfail(db, mpath, "copying a run", d);
      break;
    }
    int64_t nid = sqlite3_last_insert_rowid(db);
    for (int t = 0; t < N_CHILD && !rc; t++) {
      sqlite3_bind_int64(ins[t], 1, old);
      sqlite3_bind_int64(ins[t], 2, nid);
      if (sqlite3_step(ins[t]) != SQLITE_DONE) rc = dbfail(db, mpath, "copying a run's rows", d);
      sqlite3_reset(ins[t]);
    }
    if (!rc) (*merged)++;
  }
  if (!rc && step != SQLITE_DONE && step != SQLITE_ROW) rc = dbfail(db, mpath, "reading the shard", d);
  sqlite3_reset(list);
  if (!rc && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
    rc = dbfail(db, mpath, "committing the merge", d);
  if (rc) {
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    *merged = 0;
  }
detach:
  sqlite3_finalize(list);
  sqlite3_finalize(dup);
  sqlite3_finalize(ins_run);
  for (int t = 0; t < N_CHILD; t++) sqlite3_finalize(ins[t]);
  sqlite3_exec(db, "DETACH sh", NULL, NULL, NULL);
  return rc;
}

int hs_sweep_shard_remove(const char *path, hs_diag *d) {
  static const char *const sfx[3] = {"-wal", "-shm", ""};
  for (int i = 0; i < 3; i++) {
    char p[4096];
    if ((size_t)snprintf(p, sizeof p, "%s%s", path, sfx[i]) >= sizeof p)
      return hs_diag_set(d, HS_EINVAL, "shard path too long: %s", path);
    if (unlink(p) != 0 && errno != ENOENT)
      return hs_diag_set(d, HS_EIO, "cannot remove %s: %s", p, strerror(errno));
  }
  return 0;
}

int hs_sweep_runs_each(hs_store *s, int (*fn)(void *ctx, const hs_sweep_run *r), void *ctx,
                       hs_diag *d) {
  sqlite3 *db = hs_store_db(s);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db,
                         "SELECT json_extract(r.options, '$.sweep_point'), r.id, r.status = 'complete',"
                         " r.error, s.time_to_target_s, s.final_loss, s.final_accuracy,"
                         " s.samples_per_s, s.wait_fraction, s.sim_time_s"
                         " FROM run r LEFT JOIN summary s ON s.run_id = r.id"
                         " WHERE r.options IS NOT NULL AND json_valid(r.options)"
                         " AND json_extract(r.options, '$.sweep_point') IS NOT NULL ORDER BY r.id",
                         -1, &st, NULL) != SQLITE_OK)
    return hs_diag_set(d, HS_EDB, "%s: reading the runs: %s", hs_store_path(s), sqlite3_errmsg(db));
  int rc = 0, step;
  while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
    hs_sweep_run r = {.key = (const char *)sqlite3_column_text(st, 0), .id = sqlite3_column_int64(st, 1),
                      .complete = sqlite3_column_int(st, 2), .error = (const char *)sqlite3_column_text(st, 3)};
    double *v[6] = {&r.time_to_target_s, &r.final_loss, &r.final_accuracy, &r.samples_per_s, &r.wait_fraction,
                    &r.sim_time_s};
    for (int c = 0; c < 6; c++)
      *v[c] = sqlite3_column_type(st, 4 + c) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 4 + c);
    rc = fn(ctx, &r);
  }
  if (!rc && step != SQLITE_DONE)
    rc = hs_diag_set(d, HS_EDB, "%s: reading the runs: %s", hs_store_path(s), sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return rc;
}
