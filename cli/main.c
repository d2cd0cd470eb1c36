/* hetsim: one executable, one subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/core_buildinfo.h"
#include "core/core_rng.h"
#include "nn/nn_blas.h"

static const hs_cmd commands[] = {
    {"sim", "simulate a training run on a cluster under a policy", hs_cmd_sim},
    {"query", "list, show, compare runs, or run read-only SQL on the results database", hs_cmd_query},
    {"report", "write one HTML page with plots comparing runs (timelines, loss, validation)", hs_cmd_report},
    {"export", "write one run's rows as CSV files, one per table", hs_cmd_export},
    {"policies", "list the training policies and their parameters", hs_cmd_policies},
    {"models", "list the models with their parameters, gradient bytes and FLOPs", hs_cmd_models},
    {"calib", "time real training steps on a device and fit performance models", hs_cmd_calib},
    {"real", "train for real under a policy: cpu threads or processes, GPUs (local, nccl)", hs_cmd_real},
    {"validate", "simulate a real run and measure the prediction error", hs_cmd_validate},
    {"advise", "which policy reaches a target first on a cluster: grids of every policy, ranked", hs_cmd_advise},
    {"sweep", "run a grid of simulations in parallel and resumably, over MPI ranks under mpirun", hs_cmd_sweep},
    {"devices", "list the calibrated devices with their fitted models", hs_cmd_devices},
    {"doctor", "report what hetsim can do here: libraries, GPUs, probes that really run", hs_cmd_doctor},
    {"fit-convergence", "fit the analytic convergence model to recorded runs' evaluations", hs_cmd_fit},
    {NULL, NULL, NULL},
};

static void usage(FILE *out) {
  fprintf(out,
          "usage: hetsim COMMAND [OPTIONS]\n"
          "\n"
          "Simulates, calibrates and compares training policies for neural networks on\n"
          "heterogeneous GPU clusters. Results go to a SQLite database (default %s).\n"
          "\n"
          "commands:\n",
          HS_DEFAULT_DB);
  for (const hs_cmd *c = commands; c->name; c++) fprintf(out, "  %-15s %s\n", c->name, c->summary);
  fprintf(out,
          "\n"
          "`hetsim COMMAND --help` describes each command.\n"
          "exit status: 0 success, 1 runtime failure, 2 bad usage or bad input.\n");
}

int main(int argc, char **argv) {
  hs_blas_choose_core(argv); /* may start the program again with OPENBLAS_CORETYPE set */
  hs_gsl_init();
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("hetsim %s\n", HETSIM_VERSION);
    return 0;
  }
  for (const hs_cmd *c = commands; c->name; c++)
    if (!strcmp(argv[1], c->name)) return c->run(argc - 1, argv + 1);
  fprintf(stderr, "hetsim: unknown command \"%s\"; run `hetsim --help` for the list\n", argv[1]);
  return 2;
}
