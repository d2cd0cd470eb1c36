/* cli_format: numbers and parameter lists for people, without float noise.
 *
 * Canonical parameter strings (hs_params_format) write reals with 17 significant digits so that
 * they read back exactly, which shows 0.05 as 0.050000000000000003. These helpers print the
 * shortest decimal form that reads back as the same double instead (0.05), for tables, reports
 * and advice; the stored strings and the sweep's keys keep their canonical form. */
#ifndef HS_CLI_FORMAT_H
#define HS_CLI_FORMAT_H

#include <stddef.h>

/* The shortest of %.15g, %.16g, %.17g that reads back as v ("NaN", "Infinity" when not finite). */
void hs_fmt_real(char *buf, size_t n, double v);

/* params ("k=v,k=v", may be NULL) with every value that is a decimal number rewritten by
 * hs_fmt_real; other values are copied as they are. sep goes between items (",", or ", " so a
 * long list can wrap). out is always terminated; a list too long for it is cut. */
void hs_fmt_params(const char *params, const char *sep, char *out, size_t n);

#endif
