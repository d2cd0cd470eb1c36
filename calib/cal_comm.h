/* cal_comm: timing of the "cpu" communication backend, where workers are threads of one process
 * (the real runtime's cpu backend, real/real_cpu.c): an all-reduce over world_size threads, and
 * a point-to-point transfer, which between threads is what the backend's send and recv do: a
 * fresh message buffer, a copy into it and a copy out of it, then its release.
 *
 * All-reduce: each thread owns an fp32 buffer of `bytes`; the same two kernels the backend runs
 * (below): a shared-memory reduce-scatter, where thread i sums chunk i (1/N of the buffer) of
 * every buffer with its weight (1/N here) into its own buffer, then an all-gather, where each
 * thread copies the other chunks from their owners' buffers; a barrier before, between and
 * after, as the backend synchronises (up to HS_CAL_SERIAL_RANKS threads, thread 0 runs both
 * kernels for all between the barriers before and after, as the backend's last arrival does).
 * The time of one all-reduce is measured on thread 0 from the barrier before to the one after.
 * Before each repetition, untimed, every thread writes its own buffer (as a backward pass
 * leaves a gradient), so that the buffers are where a run finds them: in the cache of the core
 * that wrote each one (read from the timing thread's own cache, the all-reduce of 0.8 MB took
 * half the time it takes in a run). Threads are created once per message size and not timed;
 * unless no_pin, when the process may use at least world_size CPUs, thread i is pinned to the i-th, as
 * `hetsim real` pins its workers (real_run.h, hs_real_pins), and the caller is unpinned after.
 * Repetitions: `warmup` untimed, then timed ones until the rule of cal_time.h stops them.
 * Contract: allocates and frees its buffers and threads inside each call; *stop (may be NULL)
 * ends the repetitions early with HS_EINTR. Units: bytes, seconds. */
#ifndef HS_CAL_COMM_H
#define HS_CAL_COMM_H

#include <signal.h>
#include <stdint.h>

#include "calib/cal_time.h"
#include "core/core_error.h"

typedef struct hs_cal_comm_opts {
  hs_cal_rule rule;
  int warmup;                  /* untimed repetitions */
  volatile sig_atomic_t *stop; /* may be NULL */
  int no_pin;                  /* 1: the threads are not pinned */
} hs_cal_comm_opts;

int hs_cal_time_allreduce(int world_size, int64_t bytes, const hs_cal_comm_opts *o,
                          hs_cal_stats *out, hs_diag *d);

/* Lock-step timing of an operation that `world` threads run together (the all-reduce above, and
 * a backend's own operations in real/real_comm_calib.h): thread i (pinned to the i-th allowed
 * CPU unless no_pin or too few CPUs; thread 0 is the caller's) runs prepare(ctx, i) untimed (may
 * be NULL), waits at a barrier, runs op(ctx, i, rep, d) (rep counts the repetitions from 0,
 * warm-up included: an id that is the same for every thread of one repetition) and waits at a
 * barrier again; thread 0 times from its first barrier to its second, and after a third
 * (untimed) barrier every thread learns whether another repetition follows. `warmup` untimed
 * repetitions, then timed ones until the rule of cal_time.h stops them. An op that fails calls
 * abort(ctx) (may be NULL), so that the others return instead of waiting for it; the first
 * failure ends the timing and is returned, with its message. */
typedef struct hs_cal_lockstep {
  int world;                                              /* 1 to 1024 threads */
  void *ctx;
  void (*prepare)(void *ctx, int rank);
  int (*op)(void *ctx, int rank, uint64_t rep, hs_diag *d);
  void (*abort)(void *ctx);
} hs_cal_lockstep;
int hs_cal_time_lockstep(const hs_cal_lockstep *ls, const hs_cal_comm_opts *o, hs_cal_stats *out,
                         hs_diag *d);
int hs_cal_time_p2p(int64_t bytes, const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d);

/* Repetitions of one operation timed by its caller, one at a time: sample(ctx, rep, &t, d) runs
 * repetition rep (counted from 0, warm-up included) and gives its time; `warmup` untimed, then
 * timed ones until the rule of cal_time.h stops them; *stop (checked before each) ends them with
 * HS_EINTR, and a failing sample ends them with its code. */
typedef int hs_cal_sample_fn(void *ctx, int rep, double *t, hs_diag *d);
int hs_cal_time_series(hs_cal_sample_fn *sample, void *ctx, const hs_cal_comm_opts *o, hs_cal_stats *out,
                       hs_diag *d);

/* Hand-off latency ("wake"): how long a thread blocked on a condition variable takes to run
 * again once another thread signals it, as a lane of the real runtime (real/real_run.c) waits
 * for its next operation and the cpu backend's participants wait for each other. Two threads,
 * pinned to the first two allowed CPUs as the runtime pins two workers (unless no_pin, or
 * fewer than 2 CPUs): the waiter parks; the timer busy-waits HS_CAL_WAKE_IDLE_S (so that the
 * waiter's CPU goes idle, as a waiting worker's does), then takes the time, signals and
 * releases the mutex; the waiter takes the time once it holds the mutex again. One sample per
 * hand-off; `warmup` untimed, then the rule of cal_time.h. On this repository's VM the median
 * is some 40 us, a quarter of a 0.8 MB all-reduce (docs/performance.md). */
#define HS_CAL_WAKE_IDLE_S 200e-6
int hs_cal_time_wake(const hs_cal_comm_opts *o, hs_cal_stats *out, hs_diag *d);

/* The cpu all-reduce's kernels, shared with the backend so that calibration times what runs.
 * bufs[0..nranks) are n floats each; chunk i is [n*i/nranks, n*(i+1)/nranks).
 * reduce_chunk: bufs[me]'s chunk me = sum_j wts[j] * bufs[j]'s chunk me, in j order (fp32);
 *   it reads only chunk me of the others, so the participants may run it concurrently.
 * gather_chunks: copies chunk j of bufs[j] into bufs[me] for every j != me; run after every
 *   participant's reduce_chunk, and no buffer may change until every participant has run it. */
void hs_cal_reduce_chunk(float *const *bufs, const double *wts, int nranks, int me, int64_t n);
void hs_cal_gather_chunks(float *const *bufs, int nranks, int me, int64_t n);
/* Up to HS_CAL_SERIAL_RANKS participants, one thread runs both kernels for every participant
 * (hs_cal_reduce_all: every chunk's reduce, then every buffer's gather; the same sums, so the
 * same bits) while the others wait: the backend's last arrival does it, so that the others
 * are woken once, at the end, instead of three times (to help, after the reduce, after the
 * gather), each a wait for a core on a busy machine; with few participants the work that one
 * thread does alone is small. The timing above runs it on thread 0 for such world sizes. */
#define HS_CAL_SERIAL_RANKS 2
void hs_cal_reduce_all(float *const *bufs, const double *wts, int nranks, int64_t n);

/* Monotonic wall time in seconds. */
double hs_cal_now(void);

#endif
