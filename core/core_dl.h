/* core_dl: find and open a shared library by soname through an ordered search, and say why each
 * candidate failed.
 *
 * hetsim opens the GPU libraries (CUDA driver, cuBLAS, cuDNN, NCCL) at run time so that one binary
 * starts on any machine and reports what is missing. hs_dl_open tries, in this order:
 *   1. the folder named by the spec's environment variable (HETSIM_CUDNN_PATH, ...). When that
 *      variable is set, it is the only place tried: an explicit choice never falls back silently
 *      to another copy of the library;
 *   2. the pip-installed NVIDIA wheels: <site>/nvidia/<any>/lib/<soname> for every Python site
 *      folder hs_dl_python_sites lists (found by scanning, without running python);
 *   3. $CUDA_HOME/lib64 and $CUDA_PATH/lib64 when set, then /usr/local/cuda/lib64;
 *   4. the default loader path (LD_LIBRARY_PATH, the executable's RUNPATH, ld.so.cache).
 * A spec with system_only set (the CUDA driver, which must match the kernel module) skips 2 and 3.
 *
 * Contract: handles are never closed (the GPU libraries keep process-wide state and do not support
 * being unloaded); paths are absolute where the search built them. Thread-safe as far as dlopen
 * and dlerror are (glibc keeps dlerror per thread); no state is kept here. */
#ifndef HS_CORE_DL_H
#define HS_CORE_DL_H

#include "core/core_error.h"

#define HS_DL_PATH_MAX 4096
#define HS_DL_WHY_MAX 3072
#define HS_DL_MAX_SITES 32

typedef struct hs_dl_spec {
  const char *soname;  /* "libcudnn.so.9" */
  const char *env_var; /* "HETSIM_CUDNN_PATH", or NULL for none */
  int system_only;     /* 1: only the env folder and the default loader path */
} hs_dl_spec;

typedef struct hs_dl_lib {
  void *handle;              /* NULL when no candidate could be opened */
  char path[HS_DL_PATH_MAX]; /* the file opened (resolved through dlinfo when found by soname) */
  char why[HS_DL_WHY_MAX];   /* each failed candidate and its dlerror, "; "-separated */
} hs_dl_lib;

/* Opens spec->soname through the search above. On success lib->handle is set and 0 returned
 * (lib->why still lists the candidates that failed before it); otherwise HS_ENOTFOUND with d
 * saying "libcudnn.so.9 not found (searched: ...)" or "... could not be loaded: <dlerror>". */
int hs_dl_open(const hs_dl_spec *spec, hs_dl_lib *lib, hs_diag *d);

/* Resolves a symbol; NULL with d set ("libcudnn.so.9: cudnnCreate: undefined symbol") if absent. */
void *hs_dl_sym(const hs_dl_lib *lib, const char *name, hs_diag *d);

/* The Python site folders that exist, in search order: each entry of $HETSIM_PYTHON_SITE
 * (colon-separated), $VIRTUAL_ENV and $CONDA_PREFIX's lib/python3.x/site-packages,
 * ~/.local/lib/python3.x/site-packages, /usr/local/lib/python3.x/{dist,site}-packages,
 * /usr/lib/python3/dist-packages, /usr/lib/python3.x/{dist,site}-packages. Writes at most max
 * malloc'd strings into out and returns how many; the caller frees each. */
int hs_dl_python_sites(char **out, int max);

#endif
