/* sim_trace: a Chrome trace JSON writer (the format chrome://tracing and Perfetto open).
 *
 * Contract:
 * - Writes {"displayTimeUnit":"ms","traceEvents":[ ... ]} to a file, streaming: records are
 *   formatted into the writer's own buffers (a 4 KiB stage, then a 4 MiB chunk) and written a
 *   chunk at a time (with O_DIRECT on a regular file where the file system takes it), so memory
 *   stays constant however many slices are written. One record per line.
 * - Everything lives in process 1; a worker is a thread (tid). hs_trace_thread_name also
 *   writes a thread_sort_index equal to tid, so tracks appear in worker order.
 * - Times are given in seconds (simulated) and written in microseconds, the format's unit,
 *   with three decimals, character for character as printf("%.3f") would write them.
 *   A slice whose start or duration is not finite, or whose duration is negative, is skipped:
 *   one bad value must not make the whole file unreadable.
 * - Names and categories are JSON-escaped. Write errors are reported once, by hs_trace_close,
 *   which always frees the writer. Not thread-safe. */
#ifndef HS_SIM_TRACE_H
#define HS_SIM_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "core/core_error.h"

typedef struct hs_trace hs_trace;

/* HS_EIO with the path and strerror when the file cannot be created; HS_ENOMEM. */
int hs_trace_open(hs_trace **out, const char *path, hs_diag *d);
/* The same on a stream the caller opened for writing (nothing written to it yet), named path in
 * messages: the writer owns f from here, and closes it, on failure too. HS_ENOMEM. */
int hs_trace_open_file(hs_trace **out, FILE *f, const char *path, hs_diag *d);
/* Metadata "thread_name" (and "thread_sort_index") events for tid in pid 1. */
void hs_trace_thread_name(hs_trace *t, int tid, const char *name);
/* A complete event ("ph":"X") from start_s to start_s + dur_s. cat may be NULL. */
void hs_trace_slice(hs_trace *t, int tid, const char *name, const char *cat, double start_s,
                    double dur_s);
/* The same for name and cat that do not change while t is open (string literals, as Chrome's
 * own TRACE_EVENT macros require): the writer knows them by address, without comparing their
 * text at each slice. */
void hs_trace_slice_static(hs_trace *t, int tid, const char *name, const char *cat, double start_s,
                           double dur_s);
/* A kind of slice whose name and cat do not change while t is open, its record's text up to
 * the tid made once: its id (0, 1, ...) for hs_trace_slice_kind, or -1 where the writer holds
 * HS_TRACE_KINDS already or the names are too long (47 bytes each); hs_trace_slice then. */
#define HS_TRACE_KINDS 16
int hs_trace_kind(hs_trace *t, const char *name, const char *cat);
/* hs_trace_slice of a kind from hs_trace_kind (the same record, without finding its names);
 * an id the writer did not give is ignored. */
void hs_trace_slice_kind(hs_trace *t, int tid, int kind, double start_s, double dur_s);
uint64_t hs_trace_count(const hs_trace *t); /* events written so far, metadata included */
/* Finishes the JSON, closes the file and frees t (NULL allowed). HS_EIO with the path and
 * strerror when any write failed. */
int hs_trace_close(hs_trace *t, hs_diag *d);

#endif
