/* report_svg: axes with round-number ticks, and the plot types of report_svg.h. */
#include "cli/report_svg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report_html.h"

/* Margins around the plotting area, px. */
enum { MARGIN_L = 64, MARGIN_R = 24, MARGIN_T = 28, MARGIN_B = 42, BAR_LABEL_W = 150 };

const char *hs_svg_color(int i) {
  static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  int n = (int)(sizeof palette / sizeof palette[0]);
  return palette[((i % n) + n) % n];
}

/* A plotting area and the data ranges it maps. */
typedef struct axes {
  double x0, x1, y0, y1;      /* data range shown */
  double left, top, w, h;     /* px */
} axes;

static double px(const axes *a, double x) { return a->left + (x - a->x0) / (a->x1 - a->x0) * a->w; }
static double py(const axes *a, double y) { return a->top + a->h - (y - a->y0) / (a->y1 - a->y0) * a->h; }

/* A step of 1, 2 or 5 times a power of ten giving about `target` ticks over range. */
static double nice_step(double range, int target) {
  double raw = range / target;
  double mag = pow(10.0, floor(log10(raw)));
  double r = raw / mag;
  return (r < 1.5 ? 1.0 : r < 3.0 ? 2.0 : r < 7.0 ? 5.0 : 10.0) * mag;
}

/* Widens [lo, hi] to tick multiples; a point range becomes a small interval around it. */
static void nice_range(double *lo, double *hi) {
  if (!isfinite(*lo) || !isfinite(*hi)) {
    *lo = 0.0;
    *hi = 1.0;
    return;
  }
  if (*hi <= *lo) {
    double pad = *lo != 0.0 ? fabs(*lo) * 0.5 : 1.0;
    *lo -= pad;
    *hi += pad;
  }
  double st = nice_step(*hi - *lo, 5);
  *lo = floor(*lo / st + 1e-9) * st;
  *hi = ceil(*hi / st - 1e-9) * st;
}

/* Writes text cut to about max_chars characters (an ellipsis marks the cut), so a long title
 * or label stays inside its plot. Cuts only between UTF-8 sequences. */
static void fit_text(FILE *f, const char *s, int max_chars) {
  size_t len = strlen(s);
  if (max_chars < 2 || (int)len <= max_chars) {
    hs_html_escape(f, s);
    return;
  }
  char buf[512];
  size_t n = (size_t)max_chars - 1;
  if (n >= sizeof buf) n = sizeof buf - 1;
  while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
  memcpy(buf, s, n);
  buf[n] = '\0';
  hs_html_escape(f, buf);
  fputs("\xe2\x80\xa6", f);
}

/* A tick label: fixed decimals enough to tell ticks `step` apart, %g for extreme sizes. */
static void tick_label(char *buf, size_t n, double t, double step) {
  if (fabs(t) < step * 1e-9) t = 0.0;
  double mag = fmax(fabs(t), step);
  if (mag >= 1e-4 && mag < 1e7) {
    int dec = (int)-floor(log10(step) + 1e-9);
    snprintf(buf, n, "%.*f", dec < 0 ? 0 : dec, t);
  } else {
    snprintf(buf, n, "%.3g", t);
  }
}

/* Opens the figure; height may exceed fr->height (a line plot's legend rows). */
static void frame_begin_h(FILE *f, const hs_svg_frame *fr, int height) {
  fprintf(f,
          "<svg class=\"plot\" data-plot=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
          "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n",
          fr->kind ? fr->kind : "plot", fr->width, height, fr->width, height);
  fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", fr->width, height);
  if (fr->title) {
    fprintf(f, "<text x=\"%d\" y=\"16\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">",
            fr->width / 2);
    fit_text(f, fr->title, fr->width / 7);
    fputs("</text>\n", f);
  }
}

static void frame_begin(FILE *f, const hs_svg_frame *fr) { frame_begin_h(f, fr, fr->height); }

static void no_data(FILE *f, const hs_svg_frame *fr) {
  fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#888\">no data</text>\n",
          fr->width / 2, fr->height / 2);
  fputs("</svg>\n", f);
}

static void init_axes(axes *a, const hs_svg_frame *fr, double left) {
  if (fr->margin_left > 0) left = fr->margin_left;
  a->left = left;
  a->top = MARGIN_T;
  a->w = fr->width - left - MARGIN_R;
  a->h = fr->height - MARGIN_T - MARGIN_B;
}

/* Frame, grid, ticks and axis labels. ticks_x = 0 leaves the x axis unlabelled (bars). */
static void draw_axes(FILE *f, const hs_svg_frame *fr, const axes *a, int ticks_x, int ticks_y) {
  fprintf(f, "<rect data-area=\"1\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
             "stroke=\"#999\"/>\n",
          a->left, a->top, a->w, a->h);
  char buf[64];
  if (ticks_x) {
    double st = nice_step(a->x1 - a->x0, 6);
    for (double t = ceil(a->x0 / st - 1e-9) * st; t <= a->x1 + st * 1e-9; t += st) {
      double x = px(a, t);
      tick_label(buf, sizeof buf, t, st);
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                 "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
              x, a->top, x, a->top + a->h, x, a->top + a->h + 14, buf);
    }
  }
  if (ticks_y) {
    double st = nice_step(a->y1 - a->y0, 5);
    for (double t = ceil(a->y0 / st - 1e-9) * st; t <= a->y1 + st * 1e-9; t += st) {
      double y = py(a, t);
      tick_label(buf, sizeof buf, t, st);
      fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                 "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
              a->left, y, a->left + a->w, y, a->left - 4, y + 4, buf);
    }
  }
  if (fr->xlabel) {
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", a->left + a->w / 2, fr->height - 6);
    hs_html_escape(f, fr->xlabel);
    fputs("</text>\n", f);
  }
  if (fr->ylabel) {
    fprintf(f, "<text transform=\"translate(12 %.1f) rotate(-90)\" text-anchor=\"middle\">",
            a->top + a->h / 2);
    hs_html_escape(f, fr->ylabel);
    fputs("</text>\n", f);
  }
}

/* A legend in rows under the x axis's label, as many entries per row as fit the figure's
 * width: it never covers the plotted data. legend_rows gives its number of rows, legend draws
 * it from y = top. Entries whose label is NULL are left out. */
enum { LEGEND_ROW = 15, LEGEND_MAX_CHARS = 40 };

static double legend_col_width(const char *const *labels, int n) {
  size_t longest = 0;
  for (int i = 0; i < n; i++)
    if (labels[i] && strlen(labels[i]) > longest) longest = strlen(labels[i]);
  if (longest > LEGEND_MAX_CHARS) longest = LEGEND_MAX_CHARS;
  return 24.0 + 6.2 * (double)longest;
}

static int legend_rows(const hs_svg_frame *fr, const char *const *labels, int n, int *per_row) {
  int shown = 0;
  for (int i = 0; i < n; i++) shown += labels[i] != NULL;
  int cols = (int)((fr->width - 16) / legend_col_width(labels, n));
  if (cols < 1) cols = 1;
  *per_row = cols;
  return (shown + cols - 1) / cols;
}

static void legend(FILE *f, const hs_svg_frame *fr, double top, const char *const *labels,
                   const char *const *colors, int n) {
  int per_row;
  if (legend_rows(fr, labels, n, &per_row) == 0) return;
  double colw = legend_col_width(labels, n);
  fputs("<g data-legend=\"1\">\n", f);
  int shown = 0;
  for (int i = 0; i < n; i++) {
    if (!labels[i]) continue;
    double x = 16 + colw * (shown % per_row), y = top + LEGEND_ROW * (shown / per_row);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
               "<text x=\"%.1f\" y=\"%.1f\">",
            x, y, colors[i], x + 14, y + 9);
    fit_text(f, labels[i], LEGEND_MAX_CHARS);
    fputs("</text>\n", f);
    shown++;
  }
  fputs("</g>\n", f);
}

static int cmp_double(const void *pa, const void *pb) {
  double a = *(const double *)pa, b = *(const double *)pb;
  return a < b ? -1 : a > b;
}

/* The top of the y axis that leaves out start-up spikes: a little above the q-quantile of the
 * finite y values when the largest lies far above it, else +INFINITY (keep every value). */
/* The top of an axis over the m finite values v (sorted in place) from lo to hi that leaves out
 * spikes far above their q-quantile, or INFINITY to keep them all. */
static double quantile_top(double *v, size_t m, double q, double lo, double hi) {
  if (m < 20) return INFINITY;
  qsort(v, m, sizeof *v, cmp_double);
  double at = v[(size_t)(q * (double)(m - 1))];
  /* "Far above": the spikes would take more than half of the axis away from the values below
   * the quantile. */
  return hi - lo > 2.0 * (at - lo) && at > lo ? at + 0.3 * (at - lo) : INFINITY;
}

static double robust_top(const hs_svg_series *s, int ns, double q, double lo, double hi) {
  size_t n = 0;
  for (int k = 0; k < ns; k++) n += s[k].n;
  double *v = n ? malloc(n * sizeof *v) : NULL;
  if (!v) return INFINITY;
  size_t m = 0;
  for (int k = 0; k < ns; k++)
    for (size_t i = 0; i < s[k].n; i++)
      if (isfinite(s[k].x[i]) && isfinite(s[k].y[i])) v[m++] = s[k].y[i];
  double top = quantile_top(v, m, q, lo, hi);
  free(v);
  return top;
}

size_t hs_svg_lines(FILE *f, const hs_svg_frame *fr, const hs_svg_series *s, int ns) {
  return hs_svg_lines_marked(f, fr, s, ns, NULL, NULL, 0, NULL, 0);
}

size_t hs_svg_lines_marked(FILE *f, const hs_svg_frame *fr, const hs_svg_series *s, int ns,
                           const double *ref_y, const char *const *ref_labels, int nref,
                           const hs_svg_mark *marks, int nmarks) {
  enum { MAX_LEGEND = 32 };
  const char *labels[MAX_LEGEND] = {0}, *colors[MAX_LEGEND] = {0};
  int nl = ns < MAX_LEGEND ? ns : MAX_LEGEND;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  size_t points = 0;
  for (int k = 0; k < ns; k++) {
    size_t mine = 0;
    for (size_t i = 0; i < s[k].n; i++) {
      if (!isfinite(s[k].x[i]) || !isfinite(s[k].y[i])) continue;
      x0 = fmin(x0, s[k].x[i]);
      x1 = fmax(x1, s[k].x[i]);
      y0 = fmin(y0, s[k].y[i]);
      y1 = fmax(y1, s[k].y[i]);
      mine++;
    }
    points += mine;
    if (k < nl) {
      labels[k] = mine ? s[k].label : NULL;
      colors[k] = hs_svg_color(s[k].color);
    }
  }
  int per_row, rows = legend_rows(fr, labels, nl, &per_row);
  int legend_h = rows ? rows * LEGEND_ROW + 6 : 0;
  frame_begin_h(f, fr, fr->height + legend_h);
  if (points == 0) {
    no_data(f, fr);
    return 0;
  }
  double top = fr->clip_quantile > 0 && fr->clip_quantile < 1
                   ? robust_top(s, ns, fr->clip_quantile, y0, y1)
                   : INFINITY;
  if (isfinite(top)) y1 = top;
  for (int r = 0; r < nref; r++)
    if (isfinite(ref_y[r])) {
      y0 = fmin(y0, ref_y[r]);
      y1 = fmax(y1, ref_y[r]);
    }
  if (fr->y_from_zero) y0 = fmin(y0, 0.0);
  axes a;
  init_axes(&a, fr, MARGIN_L);
  nice_range(&x0, &x1);
  nice_range(&y0, &y1);
  a.x0 = x0, a.x1 = x1, a.y0 = y0, a.y1 = y1;
  draw_axes(f, fr, &a, 1, 1);
  size_t clipped = 0;
  if (isfinite(top)) {
    for (int k = 0; k < ns; k++)
      for (size_t i = 0; i < s[k].n; i++) clipped += isfinite(s[k].x[i]) && s[k].y[i] > a.y1;
    /* The clip path's id must be unique in the page; the file offset is. */
    long id = ftell(f);
    fprintf(f, "<clipPath id=\"area%ld\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>"
               "</clipPath>\n<g clip-path=\"url(#area%ld)\" data-clipped=\"%zu\">\n",
            id, a.left, a.top - 1, a.w, a.h + 1, id, clipped);
  }
  for (int r = 0; r < nref; r++) {
    if (!isfinite(ref_y[r])) continue;
    double y = py(&a, ref_y[r]);
    fprintf(f, "<line data-ref=\"target\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"#444\" stroke-dasharray=\"5 4\"/>\n", a.left, y, a.left + a.w, y);
    if (ref_labels && ref_labels[r]) {
      fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#444\" paint-order=\"stroke\" stroke=\"#fff\" "
                 "stroke-width=\"3\">", a.left + 4, y - 4);
      fit_text(f, ref_labels[r], 40);
      fputs("</text>\n", f);
    }
  }
  for (int k = 0; k < ns; k++) {
    const char *col = hs_svg_color(s[k].color);
    int open = 0;
    double prev_y = NAN;
    if (s[k].nudge_px != 0.0) fprintf(f, "<g data-series=\"%d\" transform=\"translate(0 %.1f)\">\n", k, -s[k].nudge_px);
    else fprintf(f, "<g data-series=\"%d\">\n", k);
    for (size_t i = 0; i < s[k].n; i++) {
      double x = s[k].x[i], y = s[k].y[i];
      if (!isfinite(x) || !isfinite(y)) {
        if (open) fputs("\"/>\n", f);
        open = 0;
        prev_y = NAN;
        continue;
      }
      if (!open) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", col);
        open = 1;
      } else if (s[k].steps && isfinite(prev_y)) {
        fprintf(f, "%.1f,%.1f ", px(&a, x), py(&a, prev_y));
      }
      fprintf(f, "%.1f,%.1f ", px(&a, x), py(&a, y));
      prev_y = y;
    }
    if (open) fputs("\"/>\n", f);
    if (s[k].markers)
      for (size_t i = 0; i < s[k].n; i++)
        if (isfinite(s[k].x[i]) && isfinite(s[k].y[i]))
          fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"%s\"/>\n", px(&a, s[k].x[i]),
                  py(&a, s[k].y[i]), col);
    fputs("</g>\n", f);
  }
  for (int m = 0; m < nmarks; m++)
    if (isfinite(marks[m].x) && isfinite(marks[m].y))
      fprintf(f, "<circle data-mark=\"crossing\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"none\" "
                 "stroke=\"%s\" stroke-width=\"2\"/>\n",
              px(&a, marks[m].x), py(&a, marks[m].y), hs_svg_color(marks[m].color));
  if (isfinite(top)) fputs("</g>\n", f);
  legend(f, fr, fr->height + 2, labels, colors, nl);
  fputs("</svg>\n", f);
  return clipped;
}

size_t hs_svg_histogram(FILE *f, const hs_svg_frame *fr, const double *v, size_t n, int bins,
                        int color) {
  frame_begin(f, fr);
  double lo = INFINITY, hi = -INFINITY;
  size_t finite = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(v[i])) {
      lo = fmin(lo, v[i]);
      hi = fmax(hi, v[i]);
      finite++;
    }
  if (finite == 0 || bins < 1) {
    no_data(f, fr);
    return 0;
  }
  /* Start-up spikes far above the rest would squeeze every other bar into the first bins:
   * with clip_quantile, the bins end a little above that quantile and the values beyond are
   * counted, not drawn. */
  size_t clipped = 0;
  if (fr->clip_quantile > 0 && fr->clip_quantile < 1) {
    double *sv = malloc(finite * sizeof *sv);
    size_t m = 0;
    for (size_t i = 0; sv && i < n; i++)
      if (isfinite(v[i])) sv[m++] = v[i];
    double top = sv ? quantile_top(sv, m, fr->clip_quantile, lo, hi) : INFINITY;
    free(sv);
    if (isfinite(top)) {
      for (size_t i = 0; i < n; i++) clipped += isfinite(v[i]) && v[i] > top;
      hi = top;
    }
  }
  enum { MAX_BINS = 200 };
  if (bins > MAX_BINS) bins = MAX_BINS;
  /* All values equal: one bin around them, so the bar is still visible. */
  /* The x axis; wider than the bins when all values are equal up to rounding (a synchronous
   * run's identical iterations): one narrow bar in the middle. */
  double ax0 = lo, ax1 = hi;
  if (hi - lo <= 1e-9 * fmax(fabs(hi), fabs(lo))) {
    double pad = lo != 0.0 ? fabs(lo) * 0.01 : 0.01;
    lo -= pad;
    hi += pad;
    ax0 = lo - 8 * pad;
    ax1 = hi + 8 * pad;
    bins = 1;
  }
  size_t count[MAX_BINS] = {0};
  double width = (hi - lo) / bins;
  size_t top = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(v[i]) || (clipped && v[i] > hi)) continue;
    int b = (int)((v[i] - lo) / width);
    if (b >= bins) b = bins - 1;
    if (b < 0) b = 0;
    count[b]++;
  }
  for (int b = 0; b < bins; b++)
    if (count[b] > top) top = count[b];
  axes a;
  init_axes(&a, fr, MARGIN_L);
  a.x0 = ax0, a.x1 = ax1, a.y0 = 0.0, a.y1 = (double)top;
  nice_range(&a.y0, &a.y1);
  draw_axes(f, fr, &a, 1, 1);
  const char *col = hs_svg_color(color);
  for (int b = 0; b < bins; b++) {
    if (!count[b]) continue;
    double xl = px(&a, lo + b * width), xr = px(&a, lo + (b + 1) * width);
    double yt = py(&a, (double)count[b]);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" "
               "stroke=\"#fff\" stroke-width=\"0.5\"/>\n",
            xl, yt, fmax(xr - xl, 0.5), a.top + a.h - yt, col);
  }
  if (clipped) fprintf(f, "<g data-clipped=\"%zu\"/>\n", clipped);
  fputs("</svg>\n", f);
  return clipped;
}

/* A bar's label, right-aligned in the margin left of the axes, on the bar's slot at y. */
static void bar_label(FILE *f, const axes *a, double y, double slot, const char *label) {
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", a->left - 4, y + slot / 2 + 4);
  fit_text(f, label, (BAR_LABEL_W - 8) / 6);
  fputs("</text>\n", f);
}

void hs_svg_bars(FILE *f, const hs_svg_frame *fr, const char *const *labels,
                 const double *values, const int *colors, int n) {
  frame_begin(f, fr);
  double hi = -INFINITY, lo = 0.0;
  int finite = 0;
  for (int i = 0; i < n; i++)
    if (isfinite(values[i])) {
      hi = fmax(hi, values[i]);
      lo = fmin(lo, values[i]);
      finite++;
    }
  if (!finite) {
    no_data(f, fr);
    return;
  }
  axes a;
  init_axes(&a, fr, BAR_LABEL_W);
  a.x0 = lo, a.x1 = fmax(hi, 0.0), a.y0 = 0.0, a.y1 = (double)n;
  nice_range(&a.x0, &a.x1);
  draw_axes(f, fr, &a, 1, 0);
  double slot = a.h / n;
  for (int i = 0; i < n; i++) {
    double y = a.top + slot * i;
    bar_label(f, &a, y, slot, labels[i]);
    if (!isfinite(values[i])) continue;
    double xa = px(&a, fmin(0.0, values[i])), xb = px(&a, fmax(0.0, values[i]));
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", xa,
            y + slot * 0.15, fmax(xb - xa, 0.5), slot * 0.7, hs_svg_color(colors ? colors[i] : 0));
  }
  fputs("</svg>\n", f);
}

void hs_svg_bars_range(FILE *f, const hs_svg_frame *fr, const char *const *labels,
                       const double *values, const double *lo, const double *hi,
                       const char *const *notes, const int *colors, int n) {
  frame_begin(f, fr);
  double top = -INFINITY;
  int finite = 0;
  for (int i = 0; i < n; i++) {
    if (isfinite(values[i])) top = fmax(top, values[i]), finite++;
    if (hi && isfinite(hi[i])) top = fmax(top, hi[i]);
  }
  if (!finite) {
    no_data(f, fr);
    return;
  }
  axes a;
  init_axes(&a, fr, BAR_LABEL_W);
  a.x0 = 0.0, a.x1 = fmax(top, 0.0), a.y0 = 0.0, a.y1 = (double)n;
  nice_range(&a.x0, &a.x1);
  draw_axes(f, fr, &a, 1, 0);
  double slot = a.h / n;
  for (int i = 0; i < n; i++) {
    double y = a.top + slot * i;
    bar_label(f, &a, y, slot, labels[i]);
    if (!isfinite(values[i])) {
      if (notes && notes[i]) {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#a00\">", a.left + 6, y + slot / 2 + 4);
        fit_text(f, notes[i], (int)(a.w / 7));
        fputs("</text>\n", f);
      }
      continue;
    }
    double xb = px(&a, fmax(0.0, values[i]));
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n",
            a.left, y + slot * 0.15, fmax(xb - a.left, 0.5), slot * 0.7,
            hs_svg_color(colors ? colors[i] : 0));
    if (lo && hi && isfinite(lo[i]) && isfinite(hi[i]) && hi[i] > lo[i]) {
      double xl = px(&a, lo[i]), xh = px(&a, hi[i]), ym = y + slot / 2;
      fprintf(f, "<path data-range=\"spread\" d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fV%.1f\" "
                 "stroke=\"#222\" stroke-width=\"1.2\" fill=\"none\"/>\n",
              xl, ym - slot * 0.2, ym + slot * 0.2, xl, ym, xh, xh, ym - slot * 0.2, ym + slot * 0.2);
    }
  }
  fputs("</svg>\n", f);
}

/* The parts every timeline shares: the frame (with the range shown as data-t0 and data-t1),
 * axes below a line for the legend, and row labels where they do not collide. Returns 0, or -1
 * after writing "no data". */
static int timeline_begin(FILE *f, const hs_svg_frame *fr, axes *a, const char *const *row_labels,
                          int nrows, int have_data, double t_min, double t_max) {
  frame_begin(f, fr);
  if (!have_data || nrows < 1 || !(t_max > t_min)) {
    no_data(f, fr);
    return -1;
  }
  fprintf(f, "<desc data-t0=\"%.9g\" data-t1=\"%.9g\">time from %.9g s to %.9g s</desc>\n", t_min,
          t_max, t_min, t_max);
  init_axes(a, fr, MARGIN_L);
  a->x0 = t_min, a->x1 = t_max, a->y0 = 0.0, a->y1 = (double)nrows;
  /* Leave room at the top for the legend so it never covers a worker's row. */
  a->top += 14;
  a->h -= 14;
  draw_axes(f, fr, a, 1, 0);
  double slot = a->h / nrows;
  int every = slot >= 9.0 ? 1 : (int)ceil(9.0 / slot);
  int chars = (int)((a->left - 8) / 6.0);
  for (int r = 0; r < nrows; r += every) {
    fprintf(f, "<text data-row=\"%d\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", r, a->left - 4,
            a->top + slot * r + slot / 2 + 4);
    fit_text(f, row_labels[r], chars);
    fputs("</text>\n", f);
  }
  return 0;
}

/* The kinds' legend in one line above the plotting area. */
static void timeline_legend(FILE *f, const axes *a, const char *const *kind_names,
                            const char *const *kind_colors, int nkinds) {
  double x = a->left;
  fputs("<g data-legend=\"1\">\n", f);
  for (int k = 0; k < nkinds; k++) {
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
               "<text x=\"%.1f\" y=\"%.1f\">",
            x, a->top - 14, kind_colors[k], x + 13, a->top - 5);
    hs_html_escape(f, kind_names[k]);
    fputs("</text>\n", f);
    x += 24 + 7 * (double)strlen(kind_names[k]);
  }
  fputs("</g>\n", f);
}

void hs_svg_timeline(FILE *f, const hs_svg_frame *fr, const char *const *row_labels, int nrows,
                     const hs_svg_span *spans, size_t n, const char *const *kind_names,
                     const char *const *kind_colors, int nkinds, double t_min, double t_max) {
  axes a;
  if (timeline_begin(f, fr, &a, row_labels, nrows, n > 0, t_min, t_max)) return;
  double slot = a.h / nrows;
  /* One group per kind so each rectangle needs no fill attribute of its own. */
  for (int k = 0; k < nkinds; k++) {
    fprintf(f, "<g data-kind=\"%d\" fill=\"%s\">\n", k, kind_colors[k]);
    for (size_t i = 0; i < n; i++) {
      const hs_svg_span *sp = &spans[i];
      if (sp->kind != k || sp->row < 0 || sp->row >= nrows) continue;
      double t0 = fmax(sp->t0, t_min), t1 = fmin(sp->t1, t_max);
      if (!(t1 > t0)) continue;
      double x0 = px(&a, t0), x1 = px(&a, t1);
      fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\"/>\n", x0,
              a.top + slot * sp->row + slot * 0.1, fmax(x1 - x0, 0.3), slot * 0.8);
    }
    fputs("</g>\n", f);
  }
  timeline_legend(f, &a, kind_names, kind_colors, nkinds);
  fputs("</svg>\n", f);
}

void hs_svg_timeline_shares(FILE *f, const hs_svg_frame *fr, const char *const *row_labels,
                            int nrows, const double *share, int nbins,
                            const char *const *kind_names, const char *const *kind_colors,
                            int nkinds, double t_min, double t_max, double zoom_t0,
                            double zoom_t1) {
  axes a;
  if (timeline_begin(f, fr, &a, row_labels, nrows, nbins > 0, t_min, t_max)) return;
  double slot = a.h / nrows, bw = a.w / nbins, full = slot * 0.8;
  for (int k = 0; k < nkinds; k++) {
    /* Crisp edges: antialiased neighbouring bins would show hairlines between them. */
    fprintf(f, "<g data-kind=\"%d\" fill=\"%s\" shape-rendering=\"crispEdges\">\n", k, kind_colors[k]);
    for (int r = 0; r < nrows; r++) {
      double bottom = a.top + slot * r + slot * 0.9;
      for (int b = 0; b < nbins; b++) {
        const double *sh = &share[((size_t)r * (size_t)nbins + (size_t)b) * (size_t)nkinds];
        /* Kinds stack from the bottom of the row in their order. */
        double below = 0.0;
        for (int j = 0; j < k; j++) below += fmin(fmax(sh[j], 0.0), 1.0);
        double h = fmin(fmax(sh[k], 0.0), fmax(1.0 - below, 0.0)) * full;
        if (h < 0.05) continue;
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>\n", a.left + bw * b,
                bottom - below * full - h, bw, h);
      }
    }
    fputs("</g>\n", f);
  }
  if (zoom_t1 > zoom_t0) {
    double x0 = px(&a, fmax(zoom_t0, t_min)), x1 = px(&a, fmin(zoom_t1, t_max));
    if (x1 - x0 < 3.0) x0 = (x0 + x1) / 2 - 1.5, x1 = x0 + 3.0;
    fprintf(f, "<rect data-zoom=\"1\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
               "stroke=\"#000\" stroke-width=\"1.5\" stroke-dasharray=\"3 2\"/>\n",
            x0, a.top - 2, x1 - x0, a.h + 4);
  }
  timeline_legend(f, &a, kind_names, kind_colors, nkinds);
  fputs("</svg>\n", f);
}
