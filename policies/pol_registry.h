/* pol_registry: every policy, listed once (as Lua's linit.c lists its libraries), and the
 * parsing of `--policy NAME[:key=value,...]`. */
#ifndef HS_POL_REGISTRY_H
#define HS_POL_REGISTRY_H

#include "policies/pol_policy.h"

extern const hs_policy hs_policy_ssgd;
extern const hs_policy hs_policy_ps_bsp;
extern const hs_policy hs_policy_asp;
extern const hs_policy hs_policy_ssp;
extern const hs_policy hs_policy_localsgd;
extern const hs_policy hs_policy_lbb;
extern const hs_policy hs_policy_lbcal;
extern const hs_policy hs_policy_predbatch;
extern const hs_policy hs_policy_dbs;
extern const hs_policy hs_policy_alloc_static;
extern const hs_policy hs_policy_alloc_adaptive;
extern const hs_policy hs_policy_ashl;
extern const hs_policy hs_policy_adsp;
extern const hs_policy hs_policy_ksync;
extern const hs_policy hs_policy_kasync;

/* NULL-terminated list, in the order `hetsim policies` prints them. */
const hs_policy *const *hs_policy_list(void);
const hs_policy *hs_policy_find(const char *name);
/* Parses "NAME" or "NAME:k=v,k=v". An unknown name lists the valid ones. */
int hs_policy_parse(const char *arg, const hs_policy **pol, hs_params *params, hs_diag *d);

#endif
