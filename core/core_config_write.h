/* core_config_write: an hs_cluster_spec written back as a cluster file (YAML), the inverse of
 * hs_cluster_parse (core_config.h).
 *
 * Contract:
 * - Parsing the text gives back the same spec: every quantity is written with the unit and the
 *   digits that read back as the very same double (the shortest such form: "1ms", "10Gbps",
 *   "8GiB"; a plain number in base units when no unit gives the value exactly); names and
 *   strings are quoted only where plain YAML would read them otherwise. Source positions, the
 *   file's path and text are not written.
 * - The layout is fixed: name, network, parameter_server (when present), device_types (one flow
 *   mapping per type), nodes (block sequence; each node's workers as `devices` groups of equal
 *   consecutive workers, count always written), jitter (when not 0 or calibrated), events (flow
 *   mappings). Keys that hold their default are left out (memory 0, max_batch 0, real_device
 *   "", slowdowns 1).
 *   `hetsim validate` hashes the text of the clusters it writes, so this layout is a contract:
 *   change it only with a new validation key.
 * - A spec whose workers are not in file order (nodes in order) cannot be written: HS_EINVAL.
 * - No state; thread-safe. */
#ifndef HS_CORE_CONFIG_WRITE_H
#define HS_CORE_CONFIG_WRITE_H

#include <stddef.h>

#include "core/core_config.h"
#include "core/core_error.h"

/* Writes spec as YAML into a malloc'd *text (NUL-terminated; the caller frees it, *text NULL
 * after a failure) of *len bytes (len may be NULL). */
int hs_cluster_write_yaml(const hs_cluster_spec *spec, char **text, size_t *len, hs_diag *d);

#endif
