/* hetsim models: the model zoo with parameter counts, gradient bytes and FLOPs per sample. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/core_json.h"
#include "nn/nn_zoo.h"

int hs_cmd_models(int argc, char **argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: hetsim models [--json]\n\n"
             "Lists the models hetsim knows, computed from their layer graphs: trainable\n"
             "parameters, fp32 gradient bytes (4 per parameter, what one all-reduce moves),\n"
             "forward FLOPs per sample (a multiply-add counts 2), and the fp32 activation\n"
             "bytes per sample kept for the backward pass (used for memory limits).\n");
      return 0;
    } else {
      fprintf(stderr, "hetsim models: unknown argument \"%s\"\n", argv[i]);
      return 2;
    }
  }
  hs_json j;
  if (json) {
    hs_json_init(&j, stdout, 1);
    hs_json_array_begin(&j);
  } else {
    printf("%-12s %-14s %12s %14s %14s %14s\n", "model", "dataset", "params", "grad_bytes",
           "GFLOP/sample", "act_MiB/sample");
  }
  for (int i = 0; i < hs_zoo_count(); i++) {
    const hs_model_info *m = hs_zoo_info(i);
    hs_model_stats st;
    hs_diag d = {0};
    if (hs_zoo_stats(m->name, &st, &d)) {
      fprintf(stderr, "hetsim models: %s\n", d.msg);
      return 1;
    }
    if (json) {
      hs_json_object_begin(&j);
      hs_json_key(&j, "name");
      hs_json_string(&j, m->name);
      hs_json_key(&j, "description");
      hs_json_string(&j, m->description);
      hs_json_key(&j, "dataset");
      hs_json_string(&j, m->dataset);
      hs_json_key(&j, "params");
      hs_json_int(&j, st.params);
      hs_json_key(&j, "grad_bytes");
      hs_json_int(&j, st.grad_bytes);
      hs_json_key(&j, "flops_per_sample");
      hs_json_double(&j, st.flops_per_sample);
      hs_json_key(&j, "train_flops_per_sample");
      hs_json_double(&j, st.train_flops_per_sample);
      hs_json_key(&j, "act_bytes_per_sample");
      hs_json_double(&j, st.act_bytes_per_sample);
      hs_json_key(&j, "layers");
      hs_json_int(&j, st.layers);
      hs_json_object_end(&j);
    } else {
      printf("%-12s %-14s %12lld %14lld %14.4f %14.3f\n", m->name, m->dataset, (long long)st.params,
             (long long)st.grad_bytes, st.flops_per_sample / 1e9, st.act_bytes_per_sample / 1048576.0);
    }
  }
  if (json) hs_json_array_end(&j);
  return 0;
}
