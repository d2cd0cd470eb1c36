/* FNV-1a 64. See core_hash.h. */
#include "core/core_hash.h"

uint64_t hs_fnv64(uint64_t h, const void *data, size_t len) {
  const unsigned char *p = data;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}
