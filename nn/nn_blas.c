/* nn_blas: OpenBLAS's kernel choice on CPUs that its own detection does not know (nn_blas.h). */
#include "nn/nn_blas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

extern char *openblas_get_corename(void);

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

void hs_blas_choose_core(char **argv) {
  if (getenv("OPENBLAS_CORETYPE") || getenv("HETSIM_BLAS_CORE")) return;
  const char *preload = getenv("LD_PRELOAD");
  if (preload && strstr(preload, "vgpreload")) return; /* valgrind */
  const char *chosen = openblas_get_corename();
  if (!chosen || !generic_core(chosen)) return;
  const char *core = best_core();
  if (!core) return;
  char note[128];
  snprintf(note, sizeof note, "%s (OpenBLAS chose %s)", core, chosen);
  if (setenv("OPENBLAS_CORETYPE", core, 1) || setenv("HETSIM_BLAS_CORE", note, 1)) return;
  fflush(NULL);
  execv("/proc/self/exe", argv);
  /* The exec failed: go on with the generic kernels, without pretending otherwise. */
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("HETSIM_BLAS_CORE");
}

const char *hs_blas_core_note(void) { return getenv("HETSIM_BLAS_CORE"); }
