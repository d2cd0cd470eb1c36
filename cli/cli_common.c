/* cli_common: what several subcommands share: usage errors and integer arguments. */
#include <stdarg.h>
#include <stdlib.h>

#include "cli/cli.h"

int hs_cli_usage(const char *cmd, int help, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "hetsim %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (help) fprintf(stderr, "\nrun `hetsim %s --help` for the options", cmd);
  fputc('\n', stderr);
  return 2;
}

int hs_cli_parse_int64(const char *s, int64_t min, int64_t *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || v < min) return -1;
  *out = v;
  return 0;
}
