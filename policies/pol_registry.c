#include "policies/pol_registry.h"

#include <stdio.h>
#include <string.h>

static const hs_policy *const policies[] = {
    &hs_policy_ssgd, &hs_policy_ps_bsp, &hs_policy_asp, &hs_policy_ssp, &hs_policy_localsgd,
    &hs_policy_lbb, &hs_policy_lbcal, &hs_policy_predbatch, &hs_policy_dbs,
    &hs_policy_alloc_static, &hs_policy_alloc_adaptive, &hs_policy_ashl, &hs_policy_adsp,
    &hs_policy_ksync, &hs_policy_kasync, NULL,
};

const hs_policy *const *hs_policy_list(void) { return policies; }

const hs_policy *hs_policy_find(const char *name) {
  for (int i = 0; policies[i]; i++)
    if (!strcmp(policies[i]->name, name)) return policies[i];
  return NULL;
}

int hs_policy_parse(const char *arg, const hs_policy **pol, hs_params *params, hs_diag *d) {
  char name[64];
  const char *colon = strchr(arg, ':');
  size_t len = colon ? (size_t)(colon - arg) : strlen(arg);
  if (len == 0 || len >= sizeof name)
    return hs_diag_set(d, HS_EINVAL, "--policy: expected NAME[:key=value,...], got \"%s\"", arg);
  memcpy(name, arg, len);
  name[len] = '\0';
  *pol = hs_policy_find(name);
  if (!*pol) {
    char names[512] = "";
    size_t used = 0;
    for (int i = 0; policies[i]; i++) {
      int k = snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", policies[i]->name);
      if (k < 0 || (size_t)k >= sizeof names - used) break;
      used += (size_t)k;
    }
    return hs_diag_set(d, HS_EINVAL, "--policy: unknown policy \"%s\"; valid: %s", name, names);
  }
  if (colon && !colon[1])
    return hs_diag_set(d, HS_EINVAL, "--policy: nothing after \"%s:\"; give key=value pairs after the "
                       "colon, or no colon", name);
  return hs_params_parse(params, (*pol)->params, (*pol)->name, colon ? colon + 1 : NULL, d);
}
