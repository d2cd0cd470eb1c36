#include "core/core_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *hs_err_name(int code) {
  switch (code) {
  case HS_OK: return "OK";
#define HS_ERR_NAME(name, val, desc) case HS_##name: return #name;
    HS_ERRNO_MAP(HS_ERR_NAME)
#undef HS_ERR_NAME
  default: return "EUNKNOWN";
  }
}

const char *hs_strerror(int code) {
  switch (code) {
  case HS_OK: return "success";
#define HS_ERR_DESC(name, val, desc) case HS_##name: return desc;
    HS_ERRNO_MAP(HS_ERR_DESC)
#undef HS_ERR_DESC
  default: return "unknown error";
  }
}

int hs_diag_vset(hs_diag *d, int code, const char *fmt, va_list ap) {
  if (d) {
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    d->code = code;
  }
  return code;
}

int hs_diag_set(hs_diag *d, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  hs_diag_vset(d, code, fmt, ap);
  va_end(ap);
  return code;
}

void hs_diag_prefix(hs_diag *d, const char *fmt, ...) {
  if (!d) return;
  char prefix[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  size_t pl = strlen(prefix), ml = strlen(d->msg), cap = sizeof d->msg - 1;
  if (pl + 2 > cap) return;
  if (pl + 2 + ml > cap) ml = cap - pl - 2; /* keep the prefix; cut the old message's tail */
  memmove(d->msg + pl + 2, d->msg, ml);
  memcpy(d->msg, prefix, pl);
  d->msg[pl] = ':';
  d->msg[pl + 1] = ' ';
  d->msg[pl + 2 + ml] = '\0';
}

void hs_diag_clear(hs_diag *d) {
  if (!d) return;
  d->code = 0;
  d->msg[0] = '\0';
}

int hs_exit_code(int code) {
  if (code == HS_OK) return 0;
  if (code == HS_EINVAL || code == HS_EUSAGE) return 2;
  return 1;
}
