/* report_html: escaping and the fixed parts of the report page. */
#include "cli/report_html.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void hs_html_escape(FILE *f, const char *s) {
  if (!s) return;
  for (; *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&#39;", f); break;
    default: fputc(*s, f); break;
    }
  }
}

void hs_html_begin(FILE *f, const char *title) {
  fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>", f);
  hs_html_escape(f, title);
  fputs("</title>\n<style>\n"
        "body{font-family:sans-serif;margin:1.5em;color:#222;background:#fff;max-width:1100px}\n"
        "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}\n"
        "h3{font-size:1em;margin-bottom:.3em}\n"
        "table{border-collapse:collapse;font-size:.85em;margin:.5em 0;max-width:100%}\n"
        "th,td{border:1px solid #ccc;padding:.2em .4em;text-align:left;max-width:24em;"
        "overflow-wrap:break-word}\n"
        /* anywhere: a long parameter list breaks inside a value if it must, so the table's
         * narrowest layout fits the page instead of running past its edge. */
        "td.params{max-width:18em;min-width:10em;overflow-wrap:anywhere}\n"
        "th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
        "tr.warn td{background:#fff3cd}\n"
        "p.note{color:#555;font-size:.9em}p.warn{background:#fff3cd;padding:.3em .6em}\n"
        "svg.plot{display:block;margin:.4em 0;background:#fff}\n"
        ".plots{display:flex;flex-wrap:wrap;gap:1em}\n"
        "</style>\n</head>\n<body>\n<h1>",
        f);
  hs_html_escape(f, title);
  fputs("</h1>\n", f);
}

void hs_html_end(FILE *f) { fputs("</body>\n</html>\n", f); }

void hs_html_heading(FILE *f, const char *anchor, const char *text) {
  fputs("<h2", f);
  if (anchor) {
    fputs(" id=\"", f);
    hs_html_escape(f, anchor);
    fputc('"', f);
  }
  fputc('>', f);
  hs_html_escape(f, text);
  fputs("</h2>\n", f);
}

void hs_html_para(FILE *f, const char *cls, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fputs("<p", f);
  if (cls) fprintf(f, " class=\"%s\"", cls);
  fputc('>', f);
  hs_html_escape(f, buf);
  fputs("</p>\n", f);
}

void hs_html_table_begin(FILE *f, const char *const *headers, int n) {
  fputs("<table>\n<tr>", f);
  for (int i = 0; i < n; i++) {
    fputs("<th>", f);
    hs_html_escape(f, headers[i]);
    fputs("</th>", f);
  }
  fputs("</tr>\n", f);
}

void hs_html_row_begin(FILE *f, const char *cls) {
  if (cls) fprintf(f, "<tr class=\"%s\">", cls);
  else fputs("<tr>", f);
}

static int looks_numeric(const char *s) {
  if (!s || !*s) return 0;
  char *end = NULL;
  strtod(s, &end);
  return *end == '\0';
}

void hs_html_cell(FILE *f, const char *text) {
  fputs(looks_numeric(text) ? "<td class=\"num\">" : "<td>", f);
  hs_html_escape(f, text);
  fputs("</td>", f);
}

void hs_html_cell_class(FILE *f, const char *cls, const char *text) {
  fputs("<td class=\"", f);
  hs_html_escape(f, cls);
  fputs("\">", f);
  hs_html_escape(f, text);
  fputs("</td>", f);
}

void hs_html_row_end(FILE *f) { fputs("</tr>\n", f); }

void hs_html_table_end(FILE *f) { fputs("</table>\n", f); }
