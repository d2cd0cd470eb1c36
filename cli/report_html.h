/* report_html: the pieces of the one self-contained HTML page `hetsim report` writes: escaping,
 * the head with its inline style sheet, headings, notes and tables. No JavaScript, no external
 * files: the page opens from disk, offline, in any browser, and prints.
 *
 * Contract: every function writes to a FILE the caller owns and checks later (ferror); text
 * arguments are plain text and are escaped here, never markup. Not thread-safe per FILE. */
#ifndef HS_CLI_REPORT_HTML_H
#define HS_CLI_REPORT_HTML_H

#include <stdio.h>

/* Writes s with & < > " ' escaped, so it is safe in element content and attribute values
 * (HTML and SVG). NULL writes nothing. */
void hs_html_escape(FILE *f, const char *s);
/* Doctype, head (title, style sheet) and the opening of body with an h1 of title. */
void hs_html_begin(FILE *f, const char *title);
void hs_html_end(FILE *f);
/* <h2 id="anchor">text</h2>; anchor may be NULL. */
void hs_html_heading(FILE *f, const char *anchor, const char *text);
/* A paragraph of the given class ("note", "warn" or NULL) holding printf-formatted text,
 * escaped after formatting. */
void hs_html_para(FILE *f, const char *cls, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A table: hs_html_table_begin with the header cells, then rows of cells, then end. A cell
 * whose text looks like a number is right-aligned. */
void hs_html_table_begin(FILE *f, const char *const *headers, int n);
void hs_html_row_begin(FILE *f, const char *cls);
void hs_html_cell(FILE *f, const char *text); /* NULL shows an empty cell */
/* A cell of class cls: "params" may break anywhere (a long unbroken list). */
void hs_html_cell_class(FILE *f, const char *cls, const char *text);
void hs_html_row_end(FILE *f);
void hs_html_table_end(FILE *f);

#endif
