/* cuda_emu: the scheduler behind cuda_emu.h (see there for the model and its limits).
 *
 * Each emulated thread of a block runs on a fiber (a stack of its own, started as a ucontext). A
 * fiber whose thread returns takes the next thread not yet started, on the same stack and without
 * a context switch, so a kernel without barriers costs a function call per thread; a thread that
 * waits at a barrier keeps its fiber, and another fiber starts the next thread. Switches go
 * straight from fiber to fiber (a _setjmp and a _longjmp each); the launching code's context is
 * resumed when the block is done or has failed. With a stream runner (cuda_emu.h) the launching
 * code is a stream's thread of the emulated runtime, one grid at a time under run_mu.
 *
 * Under AddressSanitizer every switch is announced with __sanitizer_start_switch_fiber and
 * __sanitizer_finish_switch_fiber, so that ASan knows which stack is current; fiber stacks are
 * mmap'd with a guard page below them, so an overflow faults instead of corrupting memory. */
#include "cuda_emu.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <mutex>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define HS_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HS_EMU_ASAN 1
#endif
#endif
#ifndef HS_EMU_ASAN
#define HS_EMU_ASAN 0
#endif
#if HS_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace {

constexpr int kWarp = 32;
constexpr int kMaxThreads = 1024;
/* The kernels' frames are small; ASan's redzones make them several times larger. */
constexpr size_t kStackBytes = HS_EMU_ASAN ? 256 * 1024 : 64 * 1024;

enum thread_state { T_UNSTARTED, T_RUNNING, T_READY, T_BARRIER, T_WARP, T_DONE };

struct fiber {
  ucontext_t ctx;
  char *map;          /* the mapping: a guard page, then the stack */
  size_t map_bytes;
  char *stack;
  size_t stack_bytes;
  int thread;         /* linear index of the thread it runs in the block; -1 when idle */
  bool started;       /* made (ctx, then jb); false: made afresh before its next use */
  bool jumped;        /* its state is in jb; false: fresh, entered through ctx (see switch_to) */
  jmp_buf jb;
  void *fake_stack;   /* ASan's fake stack of this fiber while it is switched out */
};

struct thread_rec {
  thread_state state;
  fiber *f;
  uint3 idx;
  /* the warp exchange it waits in */
  unsigned mask;
  int src;
  size_t size;
  unsigned char value[8], result[8];
  /* where it waits */
  const char *file;
  int line;
};

struct emu_state {
  /* the launch */
  const hs_emu_config *cfg;
  void (*fn)(void *);
  void *closure;
  uint3 block_idx, thread_idx;
  dim3 block_dim, grid_dim;
  /* the block */
  int nthreads;
  thread_rec threads[kMaxThreads];
  int started;         /* threads started so far, in start order */
  int done;            /* threads returned */
  int at_barrier;      /* threads waiting at __syncthreads */
  const char *bar_file;
  int bar_line;
  unsigned warp_arrived[kMaxThreads / kWarp]; /* lanes waiting in a warp exchange */
  int ready[kMaxThreads];                     /* FIFO of released threads */
  int ready_head, ready_count;
  bool failed;
  char failure[1024];
  /* fibers */
  std::vector<fiber *> fibers, idle;
  fiber *cur;          /* the fiber that runs now; nullptr: the launching context */
  jmp_buf main_jb;  /* the launching context, while a fiber runs */
  bool main_jumped; /* main_jb holds it */
  void *main_fake_stack;
  const void *main_stack_bottom;
  size_t main_stack_bytes;
  bool switch_from_main;
  /* knobs and counters */
  unsigned grid_limit;
  hs_emu_schedule schedule;
  bool reverse; /* schedule == HS_EMU_REVERSE_ORDER */
  cudaError_t last_error;
  long launches, failures;
  char last_failure[1024];
};

/* Never destroyed: fibers may still be parked on stream threads at exit, and LeakSanitizer,
 * which checks after static destructors, must still find them. */
emu_state &emu = *new emu_state();

int linear_tid(const uint3 &t) {
  return (int)(t.x + emu.block_dim.x * (t.y + emu.block_dim.y * t.z));
}

void set_error(cudaError_t e) {
  if (e != cudaSuccess) emu.last_error = e;
}

[[noreturn]] __attribute__((format(printf, 1, 2))) void fatal(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("cuda_emu: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}

/* Describes the failing launch and block in emu.failure (first failure of the block wins). */
__attribute__((format(printf, 1, 2))) void fail(const char *fmt, ...) {
  if (emu.failed) return;
  emu.failed = true;
  int k = snprintf(emu.failure, sizeof emu.failure, "%s:%d: block (%u,%u,%u): ", emu.cfg->file,
                   emu.cfg->line, emu.block_idx.x, emu.block_idx.y, emu.block_idx.z);
  if (k < 0 || (size_t)k >= sizeof emu.failure) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(emu.failure + k, sizeof emu.failure - (size_t)k, fmt, ap);
  va_end(ap);
}

/* --- fibers ----------------------------------------------------------------------------------- */

void fiber_entry(void);

fiber *fiber_new(void) {
  fiber *f = new fiber();
  long page = sysconf(_SC_PAGESIZE);
  f->map_bytes = kStackBytes + (size_t)page;
  void *m = mmap(nullptr, f->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) fatal("mmap of a %zu-byte fiber stack failed", f->map_bytes);
  f->map = static_cast<char *>(m);
  if (mprotect(f->map, (size_t)page, PROT_NONE) != 0) fatal("mprotect of a guard page failed");
  f->stack = f->map + page;
  f->stack_bytes = kStackBytes;
  f->thread = -1;
  emu.fibers.push_back(f);
  return f;
}

/* An idle fiber (or a new one), ready to be switched to. */
fiber *fiber_get(void) {
  fiber *f;
  if (!emu.idle.empty()) {
    f = emu.idle.back();
    emu.idle.pop_back();
  } else {
    f = fiber_new();
  }
  if (!f->started) {
#if HS_EMU_ASAN
    __asan_unpoison_memory_region(f->stack, f->stack_bytes);
#endif
    if (getcontext(&f->ctx) != 0) fatal("getcontext failed");
    f->ctx.uc_stack.ss_sp = f->stack;
    f->ctx.uc_stack.ss_size = f->stack_bytes;
    f->ctx.uc_link = nullptr; /* fiber_entry never returns */
    makecontext(&f->ctx, fiber_entry, 0);
    f->started = true;
    f->jumped = false;
    f->fake_stack = nullptr;
  }
  return f;
}

#if HS_EMU_ASAN
/* After a switch lands: ASan's bookkeeping, and the launching context's stack bounds, which the
 * switches back to it need. */
void landed(void *fake_stack) {
  const void *bottom = nullptr;
  size_t bytes = 0;
  __sanitizer_finish_switch_fiber(fake_stack, &bottom, &bytes);
  if (emu.switch_from_main) {
    emu.main_stack_bottom = bottom;
    emu.main_stack_bytes = bytes;
  }
}
#endif

/* Switches from `from` to `to` (nullptr: the launching context). `from_ends`: `from` is never
 * resumed (a failed block abandons it).
 *
 * Every context is saved by _setjmp and resumed by _longjmp; only a fresh fiber, which a
 * ucontext alone can start, is entered by setcontext. (swapcontext would save and restore the
 * signal mask, a system call each way: it made the deviceless GPU tests three times slower.)
 * Under ASan the switches are announced to it as fiber switches, before and after. */
void switch_to(fiber *from, fiber *to, bool from_ends) {
  emu.switch_from_main = from == nullptr;
  emu.cur = to;
#if HS_EMU_ASAN
  void **save = from_ends ? nullptr : from ? &from->fake_stack : &emu.main_fake_stack;
  if (to)
    __sanitizer_start_switch_fiber(save, to->stack, to->stack_bytes);
  else
    __sanitizer_start_switch_fiber(save, emu.main_stack_bottom, emu.main_stack_bytes);
#else
  (void)from_ends;
#endif
  bool to_jumped = to ? to->jumped : emu.main_jumped;
  if (from) from->jumped = true;
  else emu.main_jumped = true;
  if (_setjmp(from ? from->jb : emu.main_jb) == 0) {
    if (to_jumped) _longjmp(to ? to->jb : emu.main_jb, 1);
    if (!to) fatal("the launching context was never saved");
    setcontext(&to->ctx);
    fatal("setcontext failed");
  }
#if HS_EMU_ASAN
  landed(from ? from->fake_stack : emu.main_fake_stack);
#endif
}

void describe_waiters(char *buf, size_t len);

/* Makes thread t the running one (its indices become threadIdx). */
void become(int t) {
  emu.threads[t].state = T_RUNNING;
  emu.thread_idx = emu.threads[t].idx;
}

/* Gives fiber f the next thread to start, in the schedule's order. */
void start_next(fiber *f) {
  int k = emu.started++;
  int t = emu.reverse ? emu.nthreads - 1 - k : k;
  f->thread = t;
  emu.threads[t].f = f;
  become(t);
}

/* Picks what runs after `from` stopped (its thread waits, or it went idle) and switches to it. */
void dispatch(fiber *from) {
  fiber *to = nullptr;
  if (!emu.failed) {
    if (emu.ready_count > 0) {
      int t;
      if (emu.schedule == HS_EMU_LAST_RELEASED_FIRST) {
        t = emu.ready[(emu.ready_head + emu.ready_count - 1) % kMaxThreads];
      } else {
        t = emu.ready[emu.ready_head];
        emu.ready_head = (emu.ready_head + 1) % kMaxThreads;
      }
      emu.ready_count--;
      to = emu.threads[t].f;
      become(t);
    } else if (emu.started < emu.nthreads) {
      to = fiber_get();
      start_next(to);
    } else if (emu.done < emu.nthreads) {
      char what[768];
      describe_waiters(what, sizeof what);
      fail("deadlock: %s", what);
    }
  }
  if (to == from) return;
  switch_to(from, to, emu.failed && from != nullptr);
}

/* The running thread waits (state st) until another thread releases it. */
void wait_here(thread_state st, const char *file, int line) {
  fiber *self = emu.cur;
  thread_rec &t = emu.threads[self->thread];
  t.state = st;
  t.file = file;
  t.line = line;
  dispatch(self);
  if (emu.failed) fatal("a thread of a failed block was resumed");
}

/* Released threads are queued in the order threads start; dispatch takes the first (FIFO) or,
 * under HS_EMU_LAST_RELEASED_FIRST, the last (LIFO). */
void make_ready(int t) {
  emu.threads[t].state = T_READY;
  emu.ready[(emu.ready_head + emu.ready_count) % kMaxThreads] = t;
  emu.ready_count++;
}

/* Runs threads until none is left to start, then idles until the next block needs the fiber. */
void fiber_entry(void) {
#if HS_EMU_ASAN
  landed(nullptr);
#endif
  fiber *self = emu.cur;
  for (;;) {
    thread_rec &t = emu.threads[self->thread];
    emu.fn(emu.closure);
    t.state = T_DONE;
    emu.done++;
    if (!emu.failed && emu.ready_count == 0 && emu.started < emu.nthreads) {
      start_next(self); /* on this stack, without a switch */
      continue;
    }
    self->thread = -1;
    emu.idle.push_back(self);
    dispatch(self);
    /* resumed with a thread of a later block */
  }
}

const char *state_name(thread_state s) {
  switch (s) {
  case T_UNSTARTED: return "not started";
  case T_RUNNING: return "running";
  case T_READY: return "ready";
  case T_BARRIER: return "at __syncthreads";
  case T_WARP: return "in a warp shuffle";
  case T_DONE: return "returned";
  }
  return "?";
}

/* "N threads returned (first (x,y,z)); N at __syncthreads (file:line) ..." */
void describe_waiters(char *buf, size_t len) {
  size_t k = 0;
  buf[0] = '\0';
  for (int s = T_UNSTARTED; s <= T_DONE; s++) {
    int count = 0, first = -1;
    for (int t = 0; t < emu.nthreads; t++)
      if (emu.threads[t].state == s) {
        if (first < 0) first = t;
        count++;
      }
    if (!count || k >= len) continue;
    const thread_rec &r = emu.threads[first];
    int w;
    if (s == T_BARRIER || s == T_WARP)
      w = snprintf(buf + k, len - k, "%s%d thread(s) %s (first: thread (%u,%u,%u) at %s:%d)",
                   k ? "; " : "", count, state_name((thread_state)s), r.idx.x, r.idx.y, r.idx.z,
                   r.file, r.line);
    else
      w = snprintf(buf + k, len - k, "%s%d thread(s) %s (first: thread (%u,%u,%u))",
                   k ? "; " : "", count, state_name((thread_state)s), r.idx.x, r.idx.y, r.idx.z);
    if (w < 0) break;
    k += (size_t)w;
  }
}

/* Runs the block emu.block_idx to its end or its failure. */
void run_block(void) {
  int n = emu.nthreads;
  for (int t = 0; t < n; t++) {
    thread_rec &r = emu.threads[t];
    r.state = T_UNSTARTED;
    r.f = nullptr;
    r.idx = uint3{(unsigned)t % emu.block_dim.x, (unsigned)t / emu.block_dim.x % emu.block_dim.y,
                  (unsigned)t / (emu.block_dim.x * emu.block_dim.y)};
  }
  emu.started = emu.done = emu.at_barrier = 0;
  emu.ready_head = emu.ready_count = 0;
  memset(emu.warp_arrived, 0, sizeof emu.warp_arrived);
  dispatch(nullptr);
}

/* After a failed block: fibers that were running a thread are abandoned where they stand and
 * made afresh before their next use. */
void recover(void) {
  for (fiber *f : emu.fibers)
    if (f->thread >= 0) {
      f->thread = -1;
      f->started = false;
      emu.idle.push_back(f);
    }
}

bool config_ok(const hs_emu_config &c) {
  const dim3 &g = c.grid, &b = c.block;
  uint64_t threads = (uint64_t)b.x * b.y * b.z;
  return g.x >= 1 && g.x <= 0x7fffffffu && g.y >= 1 && g.y <= 65535 && g.z >= 1 &&
         g.z <= 65535 && b.x >= 1 && b.x <= 1024 && b.y >= 1 && b.y <= 1024 && b.z >= 1 &&
         b.z <= 64 && threads <= kMaxThreads;
}

} // namespace

const uint3 &threadIdx = emu.thread_idx;
const uint3 &blockIdx = emu.block_idx;
const dim3 &blockDim = emu.block_dim;
const dim3 &gridDim = emu.grid_dim;

namespace {

/* Launches on streams (hs_emu_set_stream_runner): plain globals, set by a constructor of the
 * test, perhaps before emu's own constructor has run. */
hs_emu_submit_fn runner_submit;
void (*runner_set_error)(cudaError_t);
std::mutex run_mu; /* one grid at a time, and the counters */
thread_local bool running_grid; /* this OS thread runs a grid now: a launch from it is a kernel's */

/* Runs a launch whose configuration is valid (run_mu held when on a stream). */
cudaError_t run_grid(const hs_emu_config &cfg, void (*fn)(void *), void *closure) {
  running_grid = true;
  emu.cfg = &cfg;
  emu.failed = false;
  if (cfg.shmem != 0) {
    fail("dynamic shared memory (%zu bytes) is not emulated", cfg.shmem);
  } else {
    emu.fn = fn;
    emu.closure = closure;
    emu.grid_dim = cfg.grid;
    if (emu.grid_limit && emu.grid_dim.x > emu.grid_limit) emu.grid_dim.x = emu.grid_limit;
    emu.block_dim = cfg.block;
    emu.nthreads = (int)(cfg.block.x * cfg.block.y * cfg.block.z);
    uint64_t gx = emu.grid_dim.x, gy = emu.grid_dim.y, blocks = gx * gy * emu.grid_dim.z;
    for (uint64_t k = 0; k < blocks && !emu.failed; k++) {
      uint64_t b = emu.reverse ? blocks - 1 - k : k;
      emu.block_idx = uint3{(unsigned)(b % gx), (unsigned)(b / gx % gy), (unsigned)(b / (gx * gy))};
      run_block();
    }
  }
  emu.cfg = nullptr;
  running_grid = false;
  if (!emu.failed) return cudaSuccess;
  recover();
  emu.failures++;
  snprintf(emu.last_failure, sizeof emu.last_failure, "%s", emu.failure);
  fprintf(stderr, "cuda_emu: %s\n", emu.failure);
  return cudaErrorLaunchFailure;
}

/* A launch handed to its stream: its configuration (copied: the caller's is a temporary) and its
 * closure, which it owns. */
struct stream_launch {
  hs_emu_config cfg;
  void (*fn)(void *);
  void *closure;
  void (*release)(void *);
};

void stream_launch_run(void *p) {
  stream_launch *l = static_cast<stream_launch *>(p);
  std::lock_guard<std::mutex> hold(run_mu);
  if (run_grid(l->cfg, l->fn, l->closure) != cudaSuccess)
    fatal("%s:%d: a kernel failed on its stream (see above): on a GPU every later call would "
          "report it",
          l->cfg.file, l->cfg.line);
}

void stream_launch_release(void *p) {
  stream_launch *l = static_cast<stream_launch *>(p);
  if (l->release) l->release(l->closure);
  delete l;
}

} // namespace

void hs_emu_set_stream_runner(hs_emu_submit_fn submit, void (*on_error)(cudaError_t)) {
  runner_submit = submit;
  runner_set_error = on_error;
}

cudaError_t hs_emu_run(const hs_emu_config &cfg, void (*fn)(void *), void *closure,
                       void (*release)(void *)) {
  if (running_grid)
    fatal("%s:%d: a launch from inside a kernel (not emulated)", cfg.file, cfg.line);
  cudaError_t e = cudaSuccess;
  {
    std::lock_guard<std::mutex> hold(run_mu);
    emu.launches++;
    if (!config_ok(cfg)) e = cudaErrorInvalidConfiguration;
  }
  if (e == cudaSuccess && runner_submit) {
    stream_launch *l = new stream_launch{cfg, fn, closure, release};
    e = runner_submit(cfg.stream, stream_launch_run, l, stream_launch_release);
    if (e != cudaSuccess) runner_set_error(e);
    return e;
  }
  if (e == cudaSuccess) e = run_grid(cfg, fn, closure);
  if (release) release(closure);
  if (e == cudaSuccess) return e;
  if (runner_set_error) runner_set_error(e);
  else set_error(e);
  return e;
}

int hs_emu_lane(void) {
  if (!emu.cur) fatal("a warp function called outside a kernel");
  return linear_tid(emu.thread_idx) % kWarp;
}

void __syncthreads(const char *file, int line) {
  fiber *self = emu.cur;
  if (!self) fatal("%s:%d: __syncthreads outside a kernel", file, line);
  if (emu.at_barrier == 0) {
    emu.bar_file = file;
    emu.bar_line = line;
  } else if (line != emu.bar_line || strcmp(file, emu.bar_file) != 0) {
    fail("divergent __syncthreads: thread (%u,%u,%u) at %s:%d while others wait at %s:%d",
         emu.thread_idx.x, emu.thread_idx.y, emu.thread_idx.z, file, line, emu.bar_file,
         emu.bar_line);
    wait_here(T_BARRIER, file, line);
  }
  if (++emu.at_barrier == emu.nthreads) {
    emu.at_barrier = 0;
    int me = self->thread;
    for (int k = 0; k < emu.nthreads; k++) {
      int t = emu.reverse ? emu.nthreads - 1 - k : k;
      if (t != me) make_ready(t);
    }
    return;
  }
  wait_here(T_BARRIER, file, line);
}

void hs_emu_warp_exchange(unsigned mask, const void *value, void *result, size_t size, int src,
                          const char *file, int line) {
  fiber *self = emu.cur;
  if (!self) fatal("%s:%d: a warp function outside a kernel", file, line);
  int me = self->thread, warp = me / kWarp, lane = me % kWarp;
  int lanes = emu.nthreads - warp * kWarp < kWarp ? emu.nthreads - warp * kWarp : kWarp;
  unsigned present = lanes == kWarp ? 0xffffffffu : (1u << lanes) - 1u;
  thread_rec &t = emu.threads[me];
  if (!(mask >> lane & 1u))
    fail("%s:%d: thread (%u,%u,%u) (lane %d) calls a warp function whose mask 0x%08x omits it",
         file, line, t.idx.x, t.idx.y, t.idx.z, lane, mask);
  else if (mask & ~present)
    fail("%s:%d: mask 0x%08x names lanes the warp does not have (0x%08x)", file, line, mask,
         present);
  if (emu.failed) wait_here(T_WARP, file, line);
  t.mask = mask;
  t.src = src;
  t.size = size;
  if (size) memcpy(t.value, value, size);
  emu.warp_arrived[warp] |= 1u << lane;
  if ((emu.warp_arrived[warp] & mask) != mask) {
    wait_here(T_WARP, file, line);
  } else {
    /* Every lane is here: each receives its source lane's value before any may move on. */
    for (int l = 0; l < kWarp; l++) {
      if (!(mask >> l & 1u)) continue;
      thread_rec &r = emu.threads[warp * kWarp + l];
      if (r.mask != mask || r.size != size) {
        fail("%s:%d: lanes %d and %d of warp %d meet in a warp function with masks 0x%08x and "
             "0x%08x, sizes %zu and %zu",
             file, line, lane, l, warp, mask, r.mask, size, r.size);
      } else if (r.src < 0 || r.src >= kWarp || !(mask >> r.src & 1u)) {
        fail("%s:%d: lane %d of warp %d reads lane %d, outside the mask 0x%08x", file, line, l,
             warp, r.src, mask);
      } else if (size) {
        memcpy(r.result, emu.threads[warp * kWarp + r.src].value, size);
      }
    }
    if (emu.failed) wait_here(T_WARP, file, line);
    emu.warp_arrived[warp] &= ~mask;
    for (int k = 0; k < kWarp; k++) {
      int l = emu.reverse ? kWarp - 1 - k : k;
      if ((mask >> l & 1u) && l != lane) make_ready(warp * kWarp + l);
    }
  }
  if (size) memcpy(result, t.result, size);
}

void hs_emu_set_grid_limit(unsigned max_x) { emu.grid_limit = max_x; }
void hs_emu_set_schedule(hs_emu_schedule schedule) {
  emu.schedule = schedule;
  emu.reverse = schedule == HS_EMU_REVERSE_ORDER;
}
long hs_emu_launches(void) { return emu.launches; }
long hs_emu_failures(void) { return emu.failures; }
const char *hs_emu_last_failure(void) { return emu.last_failure; }

void hs_emu_shutdown(void) {
  if (emu.cur) fatal("hs_emu_shutdown inside a kernel");
  for (fiber *f : emu.fibers) {
    munmap(f->map, f->map_bytes);
    delete f;
  }
  emu.fibers.clear();
  emu.idle.clear();
}

/* The launch errors of the kernels test; weak, because a test built on the emulated runtime
 * (tests/gpu_emu) has that runtime's, which then win. */
extern "C" {

__attribute__((weak)) cudaError_t cudaGetLastError(void) {
  cudaError_t e = emu.last_error;
  emu.last_error = cudaSuccess;
  return e;
}

__attribute__((weak)) cudaError_t cudaPeekAtLastError(void) { return emu.last_error; }

__attribute__((weak)) const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess: return "no error";
  case cudaErrorInvalidValue: return "invalid argument";
  case cudaErrorInvalidConfiguration: return "invalid configuration argument";
  case cudaErrorLaunchFailure: return "unspecified launch failure (cuda_emu: see its message)";
  }
  return "unknown error";
}

} // extern "C"
