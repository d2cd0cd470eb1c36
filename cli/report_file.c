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
  /* A device or a pipe (--trace-out /dev/null) is written in place: renaming a file over
   * /dev/null would replace the device for every process on the machine. */
  struct stat st;
  o->direct = stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
  if (o->direct) snprintf(o->tmp_path, n, "%s", path);
  else snprintf(o->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
  /* O_EXCL: never write through a link or into a file someone else is writing. 0666 lets the
   * umask decide the mode, as for any file the user creates. */
  int fd = o->direct ? open(path, O_WRONLY | O_CLOEXEC)
                     : open(o->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
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
  int bad = 0, e = 0;
  if (o->f) {
    /* fsync fails with EINVAL on a device or a pipe, which have nothing to sync. */
    bad = ferror(o->f) || fflush(o->f) != 0 || (!o->direct && fsync(fileno(o->f)) != 0);
    e = errno;
    if (fclose(o->f) != 0 && !bad) {
      bad = 1;
      e = errno;
    }
    o->f = NULL;
  } else if (!o->direct) {
    /* Written and closed by someone else (the trace writer): only its sync is left. */
    int fd = open(o->tmp_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
      bad = 1;
      e = errno;
    }
    if (fd >= 0) close(fd);
  }
  if (!bad && !o->direct && rename(o->tmp_path, o->path) != 0) {
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
  if (o->tmp_path && !o->direct) unlink(o->tmp_path);
  free(o->tmp_path);
  free(o->path);
  memset(o, 0, sizeof *o);
}

/* The canonical form of a path that may not exist yet: its folder resolved, then its name. */
static char *canonical(const char *path) {
  char *r = realpath(path, NULL);
  if (r) return r;
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, (size_t)(slash - path + (slash == path))) : strdup(".");
  char *rdir = dir ? realpath(dir, NULL) : NULL;
  free(dir);
  if (!rdir) return NULL;
  const char *base = slash ? slash + 1 : path;
  size_t n = strlen(rdir) + strlen(base) + 2;
  char *out = malloc(n);
  if (out) snprintf(out, n, "%s/%s", rdir, base);
  free(rdir);
  return out;
}

int hs_outfile_same(const char *a, const char *b) {
  struct stat sa, sb;
  if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (!strcmp(a, b)) return 1;
  char *ca = canonical(a), *cb = canonical(b);
  int same = ca && cb && !strcmp(ca, cb);
  free(ca);
  free(cb);
  return same;
}

int hs_outfile_is_db(const char *path, const char *db) {
  static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
  if (!db || !*db) return 0;
  size_t n = strlen(db) + 16;
  char *f = malloc(n);
  if (!f) return 0;
  int same = 0;
  for (size_t k = 0; k < sizeof suffix / sizeof suffix[0] && !same; k++) {
    snprintf(f, n, "%s%s", db, suffix[k]);
    same = hs_outfile_same(path, f);
  }
  free(f);
  return same;
}
