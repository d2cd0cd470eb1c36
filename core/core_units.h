/* core_units: quantities with units at the edges (YAML, CSV, CLI, output), SI base units inside.
 *
 * Contract: the parsers take one quantity such as "20us", "8GiB" or "10Gbps" and store it in SI
 * base units: seconds, bytes, bytes per second, FLOP per second. A plain number (no suffix) is already in base
 * units. Suffixes are case-sensitive where case carries meaning (b = bit, B = byte); SI prefixes
 * k/K, M, G, T are powers of 1000, binary prefixes Ki, Mi, Gi, Ti powers of 1024. Blanks around
 * the quantity and between number and suffix are allowed. Negative, NaN, infinite, empty,
 * unknown-suffix and trailing-garbage inputs are rejected with HS_EINVAL and no message: the
 * caller knows the field and writes the message. Zero is fine for times and sizes, not for
 * bandwidths (a link that never delivers is a mistake, not a setting).
 * The formatters write a short human form ("20us", "8GiB", "10Gbps") that the parsers read
 * back (to about four significant digits) and return buf. No state; thread-safe. */
#ifndef HS_CORE_UNITS_H
#define HS_CORE_UNITS_H

#include <stddef.h>

/* Plain non-negative finite number, no suffix ("2.5", "1e-3"). */
int hs_units_parse_number(const char *s, double *out);
/* Non-negative integer in decimal digits only ("100000"); at most max. */
int hs_units_parse_count(const char *s, long long max, long long *out);
/* ns, us (or µs), ms, s, min, h; plain = seconds. */
int hs_units_parse_time(const char *s, double *out_s);
/* B; kB/KB, MB, GB, TB (1000^n); KiB, MiB, GiB, TiB (1024^n); plain = bytes. */
int hs_units_parse_bytes(const char *s, double *out_bytes);
/* Bits: bps, kbps/Kbps, Mbps, Gbps, Tbps, and bit/s, kbit/s, ..., Gb/s forms (value / 8).
 * Bytes: B/s, kB/s, KB/s, MB/s, GB/s, TB/s, KiB/s ... TiB/s, and GBps forms. Plain = bytes/s.
 * Must be > 0. */
int hs_units_parse_bandwidth(const char *s, double *out_bytes_per_s);
/* FLOP per second: FLOPS, kFLOPS, MFLOPS, GFLOPS, TFLOPS, PFLOPS (1000^n; also written
 * FLOP/s or FLOPs); plain = FLOP/s. Must be > 0. */
int hs_units_parse_flops(const char *s, double *out_flop_per_s);

/* Human forms: times in ns/us/ms/s/min/h, sizes in B/KiB/MiB/GiB/TiB, bandwidths in bits per
 * second (bps/kbps/Mbps/Gbps/Tbps) as networks are usually quoted. Return buf. */
char *hs_units_format_time(double s, char *buf, size_t n);
char *hs_units_format_bytes(double bytes, char *buf, size_t n);
char *hs_units_format_bandwidth(double bytes_per_s, char *buf, size_t n);

#endif
