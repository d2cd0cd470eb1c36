/* report_svg: the few plot types `hetsim report` draws, written as inline SVG: lines and step
 * functions against a numeric x axis, a histogram, a horizontal bar chart and a timeline of
 * spans per row (the per-worker compute / communication / wait picture).
 *
 * Contract: each function writes one complete <svg class="plot" data-plot="KIND"> element to
 * f (which the caller owns and checks with ferror). Inputs are read, never kept. Values that
 * are NaN are skipped (a line breaks there). A plot with nothing to draw still gets its frame
 * and says "no data". Sizes are CSS pixels; data are in their own units (s, samples). Text is
 * escaped here. Not thread-safe per FILE.
 *
 * Legends never cover data: a line plot's legend goes in rows under its x axis (the figure
 * grows by their height), a timeline's in one line above its rows. For tests and readers of the
 * markup, the plotting area is the <rect data-area="1">, a legend is a <g data-legend="1">, and
 * the data are drawn inside <g data-series="I"> (line plots) or the timeline's kind groups. */
#ifndef HS_CLI_REPORT_SVG_H
#define HS_CLI_REPORT_SVG_H

#include <stddef.h>
#include <stdio.h>

typedef struct hs_svg_frame {
  const char *kind;           /* data-plot attribute: "timeline", "histogram", ... */
  const char *title;          /* above the plot; NULL for none */
  const char *xlabel, *ylabel;
  int width, height;          /* px of the figure, without a line plot's legend rows */
  int margin_left;            /* px left of the plotting area (row labels); 0: the default */
  double clip_quantile;       /* line plots, in (0, 1): when the largest y lies far above this
                               * quantile of all y (start-up spikes), the y axis ends a little
                               * above the quantile and lines are cut at its top (the clipping
                               * group's data-clipped says how many points; the function returns
                               * it for the caller to say so); 0: the y axis holds every value */
  int y_from_zero;            /* line plots: 1 = the y axis starts at 0 (counts, batch sizes) */
} hs_svg_frame;

typedef struct hs_svg_series {
  const char *label;          /* legend entry; NULL for none */
  const double *x, *y;        /* n points, x ascending */
  size_t n;
  int steps;                  /* 1: a step function, each y holds until the next x */
  int markers;                /* 1: a dot at each point */
  int color;                  /* index into the palette (wraps) */
  double nudge_px;            /* drawn this many px above its values (keeps series that
                               * coincide, such as equal batches, all visible); 0 for none */
} hs_svg_series;

/* The palette's colour i (wraps), as "#rrggbb"; shared so tables can name a run's colour. */
const char *hs_svg_color(int i);

/* Returns the number of points above the top of the y axis (fr->clip_quantile), else 0. A
 * series with no finite point gets no legend entry. */
size_t hs_svg_lines(FILE *f, const hs_svg_frame *fr, const hs_svg_series *s, int ns);

/* A point marked on a line plot (a ring in the series' colour), e.g. where a run met its
 * target. */
typedef struct hs_svg_mark {
  double x, y;
  int color;
} hs_svg_mark;

/* hs_svg_lines with horizontal reference lines (dashed, labelled, e.g. a target; the y range
 * includes them) and marked points. */
size_t hs_svg_lines_marked(FILE *f, const hs_svg_frame *fr, const hs_svg_series *s, int ns,
                         const double *ref_y, const char *const *ref_labels, int nref,
                         const hs_svg_mark *marks, int nmarks);

/* Histogram of the n values in `bins` equal-width bins from their minimum to maximum, or, with
 * fr->clip_quantile, to a little above that quantile when values far above it would squeeze
 * the rest (as hs_svg_lines' y axis). Returns how many values were left out (an empty
 * `<g data-clipped="N"/>` in the SVG says so too), for the caller to say so. */
size_t hs_svg_histogram(FILE *f, const hs_svg_frame *fr, const double *v, size_t n, int bins,
                        int color);

/* One horizontal bar per label, from 0 to values[i]. */
void hs_svg_bars(FILE *f, const hs_svg_frame *fr, const char *const *labels,
                 const double *values, const int *colors, int n);

/* hs_svg_bars with a whisker from lo[i] to hi[i] over each bar (the spread of the values the
 * bar is the mean of; NaN: none), and for a bar whose value is NaN the text notes[i] in its
 * place ("not reached"; notes may be NULL). */
void hs_svg_bars_range(FILE *f, const hs_svg_frame *fr, const char *const *labels,
                       const double *values, const double *lo, const double *hi,
                       const char *const *notes, const int *colors, int n);

typedef struct hs_svg_span {
  int row;                    /* 0 .. nrows-1, drawn top to bottom */
  int kind;                   /* 0 .. nkinds-1: the colour and legend entry */
  double t0, t1;              /* x from t0 to t1 */
} hs_svg_span;

/* Rows of spans between x = t_min and t_max (spans are clipped to it). The svg carries
 * data-t0 and data-t1, the range shown. */
void hs_svg_timeline(FILE *f, const hs_svg_frame *fr, const char *const *row_labels, int nrows,
                     const hs_svg_span *spans, size_t n, const char *const *kind_names,
                     const char *const *kind_colors, int nkinds, double t_min, double t_max);

/* A whole run at a glance: t_min..t_max cut into nbins equal bins, and in each row and bin a
 * stacked bar whose parts are the shares (0..1, summing to at most 1) of the bin the row spent
 * in each kind: share[((size_t)row * nbins + bin) * nkinds + kind]. The rest of the bin is left
 * blank. When zoom_t1 > zoom_t0 that window is outlined (data-zoom), for a zoomed timeline
 * drawn beside it. The svg carries data-t0 and data-t1. */
void hs_svg_timeline_shares(FILE *f, const hs_svg_frame *fr, const char *const *row_labels,
                            int nrows, const double *share, int nbins,
                            const char *const *kind_names, const char *const *kind_colors,
                            int nkinds, double t_min, double t_max, double zoom_t0,
                            double zoom_t1);

#endif
