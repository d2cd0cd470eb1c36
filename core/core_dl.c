/* core_dl: find and open a shared library through hetsim's ordered search (see core_dl.h). */
#define _GNU_SOURCE /* dlinfo and struct link_map, to report which file the loader chose */
#include "core/core_dl.h"

#include <dlfcn.h>
#include <glob.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Appends a formatted piece to buf (capacity cap), separated by "; " from what is there. A full
 * buffer keeps what fits and ends in "...". */
static void append(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...) {
  size_t len = strlen(buf);
  if (len + 8 >= cap) return;
  if (len) {
    memcpy(buf + len, "; ", 3);
    len += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + len, cap - len, fmt, ap);
  va_end(ap);
  if (n < 0) buf[len] = '\0';
  else if ((size_t)n >= cap - len) memcpy(buf + cap - 4, "...", 4);
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* What one search has seen so far. */
typedef struct dl_search {
  char searched[1400]; /* places where the file was not */
  char failed[1400];   /* files that exist but did not load, with dlerror */
} dl_search;

/* Tries one file. Returns the handle or NULL, noting why in s. */
static void *try_file(const char *path, dl_search *s) {
  if (!exists(path)) return NULL;
  dlerror();
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    append(s->failed, sizeof s->failed, "%s", e ? e : path);
  }
  return h;
}

static void *try_dir(const char *dir, const char *label, const char *soname, dl_search *s,
                     char *path, size_t path_cap) {
  int n = snprintf(path, path_cap, "%s/%s", dir, soname);
  if (n < 0 || (size_t)n >= path_cap) return NULL;
  if (!exists(path)) {
    append(s->searched, sizeof s->searched, "%s", label ? label : dir);
    return NULL;
  }
  return try_file(path, s);
}

static void *try_pip(const char *soname, dl_search *s, char *path, size_t path_cap) {
  char *sites[HS_DL_MAX_SITES];
  int n = hs_dl_python_sites(sites, HS_DL_MAX_SITES);
  void *h = NULL;
  for (int i = 0; i < n; i++) {
    if (!h) {
      char pattern[HS_DL_PATH_MAX];
      int len = snprintf(pattern, sizeof pattern, "%s/nvidia/*/lib/%s", sites[i], soname);
      glob_t g;
      if (len > 0 && (size_t)len < sizeof pattern && glob(pattern, 0, NULL, &g) == 0) {
        for (size_t k = 0; k < g.gl_pathc && !h; k++) {
          h = try_file(g.gl_pathv[k], s);
          if (h) snprintf(path, path_cap, "%s", g.gl_pathv[k]);
        }
        globfree(&g);
      } else {
        append(s->searched, sizeof s->searched, "%s/nvidia/*/lib", sites[i]);
      }
    }
    free(sites[i]);
  }
  return h;
}

/* The default loader path: LD_LIBRARY_PATH, RUNPATH, ld.so.cache. A soname the loader cannot
 * find is "searched"; one it finds but cannot load is "failed". */
static void *try_default(const char *soname, dl_search *s, char *path, size_t path_cap) {
  dlerror();
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    if (!e || strstr(e, "No such file or directory"))
      append(s->searched, sizeof s->searched, "the default loader path");
    else
      append(s->failed, sizeof s->failed, "%s", e);
    return NULL;
  }
  struct link_map *lm = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
    snprintf(path, path_cap, "%s", lm->l_name);
  else
    snprintf(path, path_cap, "%s", soname);
  return h;
}

int hs_dl_open(const hs_dl_spec *spec, hs_dl_lib *lib, hs_diag *d) {
  memset(lib, 0, sizeof *lib);
  if (!spec || !spec->soname || !spec->soname[0])
    return hs_diag_set(d, HS_EINVAL, "hs_dl_open: no library name given");
  dl_search *s = calloc(1, sizeof *s);
  if (!s) return hs_diag_set(d, HS_ENOMEM, "%s: out of memory", spec->soname);
  void *h = NULL;
  const char *env = spec->env_var ? getenv(spec->env_var) : NULL;
  if (env && env[0]) {
    /* An explicit folder is the only place tried. */
    char label[HS_DL_PATH_MAX + 64];
    snprintf(label, sizeof label, "$%s=%s", spec->env_var, env);
    if (!is_dir(env)) append(s->searched, sizeof s->searched, "%s (not a folder)", label);
    else h = try_dir(env, label, spec->soname, s, lib->path, sizeof lib->path);
  } else {
    if (!spec->system_only) {
      h = try_pip(spec->soname, s, lib->path, sizeof lib->path);
      const char *homes[] = {"CUDA_HOME", "CUDA_PATH"};
      for (size_t i = 0; i < sizeof homes / sizeof homes[0] && !h; i++) {
        const char *home = getenv(homes[i]);
        if (!home || !home[0]) continue;
        char dir[HS_DL_PATH_MAX];
        int n = snprintf(dir, sizeof dir, "%s/lib64", home);
        if (n > 0 && (size_t)n < sizeof dir)
          h = try_dir(dir, NULL, spec->soname, s, lib->path, sizeof lib->path);
      }
      if (!h) h = try_dir("/usr/local/cuda/lib64", NULL, spec->soname, s, lib->path, sizeof lib->path);
    }
    if (!h) h = try_default(spec->soname, s, lib->path, sizeof lib->path);
  }
  int rc = 0;
  if (h) {
    lib->handle = h;
    snprintf(lib->why, sizeof lib->why, "%s", s->failed);
  } else {
    lib->path[0] = '\0';
    if (s->failed[0]) {
      snprintf(lib->why, sizeof lib->why, "%s could not be loaded: %s%s%s%s", spec->soname,
               s->failed, s->searched[0] ? " (also searched: " : "", s->searched,
               s->searched[0] ? ")" : "");
    } else {
      snprintf(lib->why, sizeof lib->why, "%s not found (searched: %s)", spec->soname,
               s->searched[0] ? s->searched : "nothing");
    }
    rc = hs_diag_set(d, HS_ENOTFOUND, "%s", lib->why);
  }
  free(s);
  return rc;
}

void *hs_dl_sym(const hs_dl_lib *lib, const char *name, hs_diag *d) {
  if (!lib || !lib->handle) {
    hs_diag_set(d, HS_EINVAL, "%s: library not open", name);
    return NULL;
  }
  dlerror();
  void *p = dlsym(lib->handle, name);
  if (!p) {
    const char *e = dlerror();
    hs_diag_set(d, HS_ENOTFOUND, "%s: %s", lib->path, e ? e : "undefined symbol");
  }
  return p;
}

/* Adds every existing folder matching pattern (a glob) to out, skipping ones already there. */
static int add_sites(const char *pattern, char **out, int n, int max) {
  glob_t g;
  if (glob(pattern, GLOB_ONLYDIR, NULL, &g) != 0) return n;
  for (size_t k = 0; k < g.gl_pathc && n < max; k++) {
    char real[PATH_MAX];
    if (!is_dir(g.gl_pathv[k]) || !realpath(g.gl_pathv[k], real)) continue;
    int dup = 0;
    for (int i = 0; i < n && !dup; i++) dup = !strcmp(out[i], real);
    if (dup) continue;
    char *copy = strdup(real);
    if (copy) out[n++] = copy;
  }
  globfree(&g);
  return n;
}

int hs_dl_python_sites(char **out, int max) {
  int n = 0;
  char pattern[HS_DL_PATH_MAX];
  const char *env = getenv("HETSIM_PYTHON_SITE");
  if (env && env[0]) {
    char *list = strdup(env), *save = NULL;
    for (char *p = list ? strtok_r(list, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save))
      n = add_sites(p, out, n, max);
    free(list);
  }
  const char *prefixes[] = {"VIRTUAL_ENV", "CONDA_PREFIX"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
    const char *pre = getenv(prefixes[i]);
    if (!pre || !pre[0]) continue;
    snprintf(pattern, sizeof pattern, "%s/lib/python3*/site-packages", pre);
    n = add_sites(pattern, out, n, max);
  }
  const char *home = getenv("HOME");
  if (home && home[0]) {
    snprintf(pattern, sizeof pattern, "%s/.local/lib/python3*/site-packages", home);
    n = add_sites(pattern, out, n, max);
  }
  const char *system[] = {"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
                          "/usr/lib/python3/dist-packages", "/usr/lib/python3*/dist-packages",
                          "/usr/lib/python3*/site-packages"};
  for (size_t i = 0; i < sizeof system / sizeof system[0]; i++) n = add_sites(system[i], out, n, max);
  return n;
}
