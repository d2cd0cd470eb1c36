/* nn_blas: OpenBLAS's kernel choice on CPUs that its own detection does not know.
 *
 * Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernels once, in a constructor that runs
 * when the library loads, from the CPU's family and model numbers. A CPU newer than the
 * library (Emerald Rapids, family 6 model 207, say) is not in its tables and gets the generic
 * `Prescott` (SSE3) kernels: sgemm runs about 4x slower than with the AVX-512 ones the CPU
 * has (docs/performance.md, "OpenBLAS kernels"). OpenBLAS reads OPENBLAS_CORETYPE in that
 * constructor, so the only remedy once the process runs is to set it and start again.
 *
 * hs_blas_choose_core: when OpenBLAS chose a generic core, OPENBLAS_CORETYPE is unset, and the
 * CPU (with the OS's support for the registers) has AVX-512 F/BW/DQ/VL ("SkylakeX"), else AVX2
 * and FMA ("Haswell"), else AVX ("SandyBridge"), sets OPENBLAS_CORETYPE to that core and
 * HETSIM_BLAS_CORE to "NAME (OpenBLAS chose GENERIC)", and replaces the process by the same
 * program with the same arguments (execv of /proc/self/exe); returns only when nothing is to be
 * done, or when the exec failed (the process then runs on the generic kernels). Call it first
 * in main, before any thread or file is opened. Not under valgrind (which would not follow the
 * exec and has no AVX-512): there it does nothing.
 *
 * The same start again also sizes OpenBLAS's thread pool to one thread when the user set none
 * (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS, OMP_NUM_THREADS): the pthreads build starts a
 * thread per core in that constructor, and each spins in sched_yield for about 2^28 cycles
 * before it sleeps, about 60 ms of a second core's CPU in every hetsim process (a 1,024-worker
 * simulation took 0.124 s of CPU with the pool, 0.064 s without; docs/performance.md). Every
 * net runs its BLAS on one thread anyway (nn_cpu.h: hs_net_options.threads), and
 * openblas_set_num_threads(N) grows the pool when a calibration asks for more. The started
 * process removes OPENBLAS_NUM_THREADS again (HETSIM_BLAS_RESTARTED says it was hetsim's), so
 * the programs it starts inherit the user's environment.
 * hs_blas_core_note: HETSIM_BLAS_CORE of a process started again this way, or NULL. */
#ifndef HS_NN_BLAS_H
#define HS_NN_BLAS_H

void hs_blas_choose_core(char **argv);
const char *hs_blas_core_note(void);

#endif
