/* report_file: an output file that appears whole or not at all, for `hetsim report` and
 * `hetsim export`.
 *
 * Contract: hs_outfile_open creates "PATH.tmp.PID" beside PATH (same directory, so the final
 * rename stays on one file system); the caller writes to ->f; hs_outfile_commit flushes,
 * fsyncs, closes and renames it over PATH (when a writer of its own wrote tmp_path and closed
 * it, the caller sets f to NULL first and commit only syncs and renames); hs_outfile_abort closes and removes it. A failure
 * at any point leaves PATH as it was (absent, or the previous complete file). Write errors
 * on ->f are sticky, so the caller need not check each fprintf: commit sees them (ferror) and
 * fails. The struct owns its path copies; commit and abort free them. Not thread-safe.
 * A PATH that exists and is not a regular file (/dev/null, a terminal, a pipe) is written in
 * place: no temporary file, no sync, and nothing is ever renamed over it or removed. */
#ifndef HS_CLI_REPORT_FILE_H
#define HS_CLI_REPORT_FILE_H

#include <stdio.h>

#include "core/core_error.h"

typedef struct hs_outfile {
  FILE *f;        /* write here between open and commit */
  char *path;     /* final path */
  char *tmp_path; /* where the bytes go until commit (PATH itself when direct) */
  int direct;     /* PATH is not a regular file: written in place */
} hs_outfile;

/* HS_ENOTFOUND when PATH's directory does not exist, HS_EIO for other failures. */
int hs_outfile_open(hs_outfile *o, const char *path, hs_diag *d);
/* Returns 0, or HS_EIO (disk full, I/O error) after removing the temporary file. */
int hs_outfile_commit(hs_outfile *o, hs_diag *d);
/* Safe on an outfile that was never opened (zeroed) or already committed. */
void hs_outfile_abort(hs_outfile *o);
/* 1 when paths a and b name one file: the same inode when both exist, else the same canonical
 * path (the folder resolved through links, then the name). */
int hs_outfile_same(const char *a, const char *b);
/* 1 when path is the database db or one of its -wal, -shm, -journal files, which an output
 * must never replace. */
int hs_outfile_is_db(const char *path, const char *db);

#endif
