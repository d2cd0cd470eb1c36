/* hetsim policies: every registered policy with its description, parameters and source. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/core_json.h"
#include "policies/pol_registry.h"

static const char *type_name(hs_param_type t) {
  switch (t) {
  case HS_PARAM_INT: return "int";
  case HS_PARAM_DOUBLE: return "number";
  case HS_PARAM_BOOL: return "bool";
  case HS_PARAM_BYTES: return "bytes";
  case HS_PARAM_TIME: return "time";
  case HS_PARAM_ENUM: return "enum";
  }
  return "?";
}

int hs_cmd_policies(int argc, char **argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = 1;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: hetsim policies [--json]\n\n"
             "Lists the training policies: name, what it does, its parameters (type, default,\n"
             "range) and where the algorithm comes from. Give parameters to `hetsim sim` as\n"
             "--policy NAME:key=value,key=value. docs/policies.md has each algorithm in full.\n");
      return 0;
    } else {
      fprintf(stderr, "hetsim policies: unknown argument \"%s\"\n", argv[i]);
      return 2;
    }
  }
  const hs_policy *const *list = hs_policy_list();
  if (json) {
    hs_json j;
    hs_json_init(&j, stdout, 1);
    hs_json_array_begin(&j);
    for (int i = 0; list[i]; i++) {
      hs_json_object_begin(&j);
      hs_json_key(&j, "name");
      hs_json_string(&j, list[i]->name);
      hs_json_key(&j, "description");
      hs_json_string(&j, list[i]->description);
      hs_json_key(&j, "source");
      hs_json_string(&j, list[i]->source);
      hs_json_key(&j, "params");
      hs_json_array_begin(&j);
      for (const hs_param_spec *p = list[i]->params; p && p->name; p++) {
        hs_json_object_begin(&j);
        hs_json_key(&j, "name");
        hs_json_string(&j, p->name);
        hs_json_key(&j, "type");
        hs_json_string(&j, type_name(p->type));
        hs_json_key(&j, "default");
        hs_json_string(&j, p->def);
        if (p->type == HS_PARAM_ENUM) {
          hs_json_key(&j, "choices");
          hs_json_string(&j, p->choices);
        } else if (p->min <= p->max) {
          hs_json_key(&j, "min");
          hs_json_double(&j, p->min);
          hs_json_key(&j, "max");
          hs_json_double(&j, p->max);
        }
        hs_json_key(&j, "help");
        hs_json_string(&j, p->help);
        hs_json_object_end(&j);
      }
      hs_json_array_end(&j);
      hs_json_object_end(&j);
    }
    hs_json_array_end(&j);
    return 0;
  }
  for (int i = 0; list[i]; i++) {
    printf("%-10s %s\n", list[i]->name, list[i]->description);
    for (const hs_param_spec *p = list[i]->params; p && p->name; p++) {
      char range[96] = "";
      if (p->type == HS_PARAM_ENUM) snprintf(range, sizeof range, " (%s)", p->choices);
      else if (p->min <= p->max && p->type != HS_PARAM_BOOL)
        snprintf(range, sizeof range, " [%g, %g]", p->min, p->max);
      printf("           %s=%s  %s, %s%s\n", p->name, p->def, type_name(p->type), p->help, range);
    }
    printf("           source: %s\n", list[i]->source);
  }
  return 0;
}
