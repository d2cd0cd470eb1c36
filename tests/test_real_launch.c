/* Tests of how a process learns its launch (real_comm.h, hs_real_launch_read): where its ranks
 * run (local_rank, local_world) from mpirun's or torchrun's variables or a loopback MASTER_ADDR,
 * and which ranks pin their executor (real_rank.h, hs_real_rank_pins). */
#define _GNU_SOURCE /* setenv, unsetenv */
#include <stdlib.h>
#include <string.h>

#include "hs_test.h"
#include "real/real_comm.h"
#include "real/real_rank.h"

static const char *const launch_vars[] = {
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_USE_AGENT_STORE", NULL};

/* Sets the launch's environment to exactly the NAME=VALUE pairs of `env` (NULL-terminated). */
static void launch_env(const char *const *env) {
  for (int i = 0; launch_vars[i]; i++) unsetenv(launch_vars[i]);
  for (int i = 0; env[i]; i += 2) setenv(env[i], env[i + 1], 1);
}

/* Reads the launch under `env`; the local placement in *lr, *lw. */
static int read_under(const char *const *env, int *lr, int *lw) {
  launch_env(env);
  hs_real_launch l;
  hs_diag d = {0};
  int rc = hs_real_launch_read(&l, 0, &d);
  *lr = l.local_rank;
  *lw = l.local_world;
  return rc;
}

static void test_torchrun_says_where(void) {
  int lr, lw;
  ASSERT_EQ(read_under((const char *const[]){"RANK", "5", "WORLD_SIZE", "8", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "4",
                                             "MASTER_ADDR", "node0", "MASTER_PORT", "29500", NULL},
                       &lr, &lw), 0);
  ASSERT_EQ(lr, 1);
  ASSERT_EQ(lw, 4);
}

static void test_mpirun_says_where(void) {
  int lr, lw;
  ASSERT_EQ(read_under((const char *const[]){"OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "4",
                                             "OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_COMM_WORLD_LOCAL_SIZE", "2", NULL},
                       &lr, &lw), 0);
  ASSERT_EQ(lr, 1);
  ASSERT_EQ(lw, 2);
  /* torchrun's names do not count under mpirun */
  ASSERT_EQ(read_under((const char *const[]){"OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "4", "LOCAL_RANK", "1",
                                             "LOCAL_WORLD_SIZE", "2", "MASTER_ADDR", "node0", NULL},
                       &lr, &lw), 0);
  ASSERT_EQ(lw, -1);
}

static void test_loopback_means_all_here(void) {
  int lr, lw;
  const char *const addrs[] = {"127.0.0.1", "127.0.1.1", "localhost", "::1", NULL};
  for (int i = 0; addrs[i]; i++) {
    ASSERT_EQ(read_under((const char *const[]){"RANK", "2", "WORLD_SIZE", "3", "MASTER_ADDR", addrs[i], "MASTER_PORT",
                                               "29500", NULL},
                         &lr, &lw), 0);
    ASSERT_EQ(lr, 2);
    ASSERT_EQ(lw, 3);
  }
  /* mpirun without MASTER_ADDR rendezvouses on 127.0.0.1: all here too */
  ASSERT_EQ(read_under((const char *const[]){"OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", NULL}, &lr, &lw), 0);
  ASSERT_EQ(lr, 1);
  ASSERT_EQ(lw, 2);
}

static void test_unknown_placement(void) {
  int lr, lw;
  /* another host, and nothing said */
  ASSERT_EQ(read_under((const char *const[]){"RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "10.0.0.7", "MASTER_PORT",
                                             "29500", NULL},
                       &lr, &lw), 0);
  ASSERT_EQ(lr, -1);
  ASSERT_EQ(lw, -1);
  /* malformed, half said or out of range: unknown, and the launch itself still reads */
  const char *const bad[][4] = {{"LOCAL_RANK", "x", "LOCAL_WORLD_SIZE", "2"},
                                {"LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", ""},
                                {"LOCAL_RANK", "2", "LOCAL_WORLD_SIZE", "2"},
                                {"LOCAL_RANK", "-1", "LOCAL_WORLD_SIZE", "2"},
                                {"LOCAL_WORLD_SIZE", "2", NULL, NULL}};
  for (int i = 0; i < 5; i++) {
    const char *env[] = {"RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "29500",
                         bad[i][0], bad[i][1], bad[i][2], bad[i][3], NULL};
    ASSERT_EQ(read_under(env, &lr, &lw), 0);
    ASSERT_EQ(lw, -1);
  }
}

static void test_which_ranks_pin(void) {
  hs_cpus cpus;
  int k = -1, ncpu = hs_cpus_allowed(&cpus);
  hs_real_config cfg = {.device = "cpu", .pin = HS_PIN_AUTO};
  hs_real_launch l = {.rank = 1, .world = 2, .local_rank = 1, .local_world = 2, .source = "torchrun"};
  ASSERT_EQ(hs_real_rank_pins(&cfg, &l, 0, &cpus, &k), ncpu >= 2);
  if (ncpu >= 2) ASSERT_EQ(k, 1);
  /* the server's executor floats; --pin none; a GPU's nets; more ranks here than CPUs; one rank
   * here; an unknown placement */
  ASSERT_EQ(hs_real_rank_pins(&cfg, &l, 1, &cpus, &k), 0);
  cfg.pin = HS_PIN_NONE;
  ASSERT_EQ(hs_real_rank_pins(&cfg, &l, 0, &cpus, &k), 0);
  cfg = (hs_real_config){.device = "cuda:0", .pin = HS_PIN_AUTO};
  ASSERT_EQ(hs_real_rank_pins(&cfg, &l, 0, &cpus, &k), 0);
  cfg.device = "cpu";
  l.local_world = ncpu + 1;
  ASSERT_EQ(hs_real_rank_pins(&cfg, &l, 0, &cpus, &k), 0);
  l.local_world = 1, l.local_rank = 0;
  ASSERT_EQ(hs_real_rank_pins(&cfg, &l, 0, &cpus, &k), 0);
  l.local_world = l.local_rank = -1;
  ASSERT_EQ(hs_real_rank_pins(&cfg, &l, 0, &cpus, &k), 0);
}

int main(int argc, char **argv) {
  static const hs_test_case cases[] = {
      {"torchrun_says_where", test_torchrun_says_where},
      {"mpirun_says_where", test_mpirun_says_where},
      {"loopback_means_all_here", test_loopback_means_all_here},
      {"unknown_placement", test_unknown_placement},
      {"which_ranks_pin", test_which_ranks_pin},
      {NULL, NULL},
  };
  return hs_test_main("real_launch", cases, argc, argv);
}
