/* nn_blas: OpenBLAS's kernel choice on CPUs that its own detection does not know (nn_blas.h). */
#include "nn/nn_blas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

extern char *openblas_get_corename(void);
extern int openblas_get_num_threads(void);

/* OpenBLAS's x86-64 fallbacks for a CPU it does not recognise (driver/others/dynamic.c). */
static int generic_core(const char *name) {
  static const char *const generic[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai",
                                        "Coppermine", "Northwood", "Banias", NULL};
  for (int i = 0; generic[i]; i++)
    if (!strcasecmp(name, generic[i])) return 1;
  return 0;
}

static const char *best_core(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  if (__builtin_cpu_supports("avx")) return "SandyBridge";
#endif
  return NULL;
}

/* Set in the environment of the process started again when it was started for the thread
 * pool's sake: the variables to take out again, so that what this process starts inherits the
 * user's environment. */
#define RESTARTED "HETSIM_BLAS_RESTARTED"

void hs_blas_choose_core(char **argv) {
  if (getenv(RESTARTED)) {
    unsetenv("OPENBLAS_NUM_THREADS");
    unsetenv(RESTARTED);
    return;
  }
  const char *preload = getenv("LD_PRELOAD");
  if (preload && strstr(preload, "vgpreload")) return; /* valgrind */
  /* The kernels: only where OpenBLAS fell back to generic ones and the user chose none. */
  const char *core = NULL, *chosen = NULL;
  if (!getenv("OPENBLAS_CORETYPE") && !getenv("HETSIM_BLAS_CORE")) {
    chosen = openblas_get_corename();
    if (chosen && generic_core(chosen)) core = best_core();
  }
  /* The thread pool: where the user set no size and OpenBLAS started threads of its own. */
  int pool = !getenv("OPENBLAS_NUM_THREADS") && !getenv("GOTO_NUM_THREADS") && !getenv("OMP_NUM_THREADS") &&
             openblas_get_num_threads() > 1;
  if (!core && !pool) return;
  char note[128];
  if (core) {
    snprintf(note, sizeof note, "%s (OpenBLAS chose %s)", core, chosen);
    if (setenv("OPENBLAS_CORETYPE", core, 1) || setenv("HETSIM_BLAS_CORE", note, 1)) return;
  }
  if (pool && (setenv("OPENBLAS_NUM_THREADS", "1", 1) || setenv(RESTARTED, "1", 1))) pool = 0;
  fflush(NULL);
  execv("/proc/self/exe", argv);
  /* The exec failed: go on with the generic kernels and the pool, without pretending otherwise. */
  if (core) {
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("HETSIM_BLAS_CORE");
  }
  if (pool) {
    unsetenv("OPENBLAS_NUM_THREADS");
    unsetenv(RESTARTED);
  }
}

const char *hs_blas_core_note(void) { return getenv("HETSIM_BLAS_CORE"); }
