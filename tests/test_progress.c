/* Tests of the progress display, with an injected clock so that nothing sleeps. */
#include <stdlib.h>

#include "core/core_progress.h"
#include "hs_test.h"

typedef struct fake_clock {
  double t; /* s */
} fake_clock;

static double fake_now(void *ctx) { return ((fake_clock *)ctx)->t; }

static long run(FILE *f, fake_clock *clk, double seconds) {
  hs_progress p;
  hs_progress_init_clock(&p, f, "sim", 1000.0, fake_now, clk);
  for (int i = 0; i < 1000; i++) {
    clk->t += seconds / 1000.0;
    hs_progress_update(&p, (double)i);
  }
  long drawn = ftell(f);
  hs_progress_finish(&p);
  return drawn;
}

static void test_env_off_writes_nothing(void) {
  setenv("HETSIM_PROGRESS", "0", 1);
  FILE *f = tmpfile();
  fake_clock clk = {0};
  ASSERT_EQ(run(f, &clk, 10.0), 0);
  ASSERT_EQ(ftell(f), 0);
  fclose(f);
}

static void test_not_a_tty_writes_nothing(void) {
  unsetenv("HETSIM_PROGRESS");
  FILE *f = tmpfile();
  fake_clock clk = {0};
  ASSERT_EQ(run(f, &clk, 10.0), 0);
  ASSERT_EQ(ftell(f), 0);
  fclose(f);
}

static void test_forced_on_draws_after_delay(void) {
  setenv("HETSIM_PROGRESS", "1", 1);
  FILE *f = tmpfile();
  fake_clock clk = {0};
  long n = run(f, &clk, 5.0);
  ASSERT(n > 0);
  rewind(f);
  char buf[4096] = {0};
  size_t got = fread(buf, 1, sizeof buf - 1, f);
  ASSERT(got > 0);
  ASSERT_CONTAINS(buf, "\rsim ");
  ASSERT_CONTAINS(buf, "events/s");
  ASSERT_CONTAINS(buf, "ETA");
  /* At most ~10 draws per second over 4 s of drawing, each well under 100 characters. */
  ASSERT(n < 60 * 100);
  fclose(f);
  unsetenv("HETSIM_PROGRESS");
}

static void test_short_run_silent(void) {
  setenv("HETSIM_PROGRESS", "1", 1);
  FILE *f = tmpfile();
  fake_clock clk = {0};
  ASSERT_EQ(run(f, &clk, 0.5), 0);
  ASSERT_EQ(ftell(f), 0); /* finish clears nothing when nothing was drawn */
  fclose(f);
  unsetenv("HETSIM_PROGRESS");
}

static const hs_test_case cases[] = {
    {"env_off_writes_nothing", test_env_off_writes_nothing},
    {"not_a_tty_writes_nothing", test_not_a_tty_writes_nothing},
    {"forced_on_draws_after_delay", test_forced_on_draws_after_delay},
    {"short_run_silent", test_short_run_silent},
    {NULL, NULL},
};

int main(int argc, char **argv) { return hs_test_main("progress", cases, argc, argv); }
