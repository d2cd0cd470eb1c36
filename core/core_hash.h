/* core_hash: FNV-1a 64, the hash hetsim names inputs by (a sweep's points and files, a
 * convergence fit's curves and their seed labels, validation's inputs). Not cryptographic. */
#ifndef HS_CORE_HASH_H
#define HS_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a 64 of len bytes, continuing from h (start with HS_FNV64_INIT). */
#define HS_FNV64_INIT 0xcbf29ce484222325ULL
uint64_t hs_fnv64(uint64_t h, const void *data, size_t len);

#endif
