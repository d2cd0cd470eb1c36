/* report_file: temporary file + rename, so a report or export is never seen half written. */
#include "cli/report_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int hs_outfile_open(hs_outfile *o, const char *path, hs_diag *d) {
  memset(o, 0, sizeof *o);
  size_t n = strlen(path) + 32;
  o->path = strdup(path);
  o->tmp_path = malloc(n);
  if (!o->path || !o->tmp_path) {
    hs_outfile_abort(o);
    return hs_diag_set(d, HS_ENOMEM, "%s: out of memory", path);
  }
  snprintf(o->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
  /* O_EXCL: never write through a link or into a file someone else is writing. 0666 lets the
   * umask decide the mode, as for any file the user creates. */
  int fd = open(o->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    int e = errno;
    free(o->tmp_path);
    o->tmp_path = NULL;
    hs_outfile_abort(o);
    return hs_diag_set(d, e == ENOENT || e == ENOTDIR ? HS_ENOTFOUND : HS_EIO,
                       "%s: cannot create: %s", path, strerror(e));
  }
  o->f = fdopen(fd, "w");
  if (!o->f) {
    int e = errno;
    close(fd);
    hs_outfile_abort(o);
    return hs_diag_set(d, HS_EIO, "%s: %s", path, strerror(e));
  }
  return 0;
}

int hs_outfile_commit(hs_outfile *o, hs_diag *d) {
  int bad = ferror(o->f) || fflush(o->f) != 0 || fsync(fileno(o->f)) != 0;
  int e = errno;
  if (fclose(o->f) != 0 && !bad) {
    bad = 1;
    e = errno;
  }
  o->f = NULL;
  if (!bad && rename(o->tmp_path, o->path) != 0) {
    bad = 1;
    e = errno;
  }
  if (bad) {
    int rc = hs_diag_set(d, HS_EIO, "%s: writing failed: %s", o->path, e ? strerror(e) : "I/O error");
    hs_outfile_abort(o);
    return rc;
  }
  free(o->tmp_path);
  free(o->path);
  o->tmp_path = o->path = NULL;
  return 0;
}

void hs_outfile_abort(hs_outfile *o) {
  if (o->f) fclose(o->f);
  if (o->tmp_path) unlink(o->tmp_path);
  free(o->tmp_path);
  free(o->path);
  memset(o, 0, sizeof *o);
}
