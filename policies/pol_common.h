/* pol_common.h: the synchronous loop's callbacks, shared by the policies that drive an
 * hs_bal_sync (pol_balance.h) and differ only in how they place the batches.
 *
 * A policy supplies one place function that rebuilds the membership (hs_bal_sync_members) and
 * fills the batches; these helpers run it at the start and after a membership change, and
 * start the rounds. Contract as pol_balance.h: no globals, no I/O, negative HS_E* codes. */
#ifndef HS_POL_COMMON_H
#define HS_POL_COMMON_H

#include "policies/pol_balance.h"

/* Rebuilds the membership of the policy's hs_bal_sync and chooses the batches; state is the
 * policy's state. Returns 0 or a negative HS_E* code (with the message set on rt). */
typedef int hs_pol_place_fn(void *state, hs_runtime *rt);

/* The start callback's work: places, then starts the first round. */
int hs_pol_sync_start(hs_bal_sync *s, hs_runtime *rt, hs_pol_place_fn *place, void *state);
/* The on_comm callback's work: counts the finished iteration, places again when the membership
 * changed since the last round, then starts the next round. */
int hs_pol_sync_on_comm(hs_bal_sync *s, hs_runtime *rt, hs_pol_place_fn *place, void *state);
/* The on_cluster callback's work: a join or a leave (not a slowdown) marks the membership as
 * changed, to be rebuilt at the end of the current iteration. */
void hs_pol_sync_on_cluster(hs_bal_sync *s, const hs_cluster_obs *o);

#endif
