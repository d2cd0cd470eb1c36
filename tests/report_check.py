#!/usr/bin/env python3
"""Structure checks of a `hetsim report` page against its database (tests/cli_report.sh).

usage: report_check.py PAGE.html DB CHECK [ARGS...]
  batches RUN            the run's batch plot has one series per worker (the worker table's
                         count, or its step rows' when it has no worker rows)
  labels RUN             every timeline row label of the run is "wN TYPE (NODE)" as the worker
                         table says
  covers RUN             the run's overview timeline spans from 0 to its last step's end, and
                         drawn bins reach the right edge of its plotting area; the zoomed
                         timeline after it shows a window inside the run, at most a quarter of it
  legends                no legend of any plot overlaps its plotting area, and every drawn
                         point of a line plot lies inside that area (so no legend covers data)
  clipped N              the validation plot cut N points or more (N = 0: it cut none and has no
                         clipping group)
Prints one line saying what it found; exits 1 when the check fails."""
import re
import sqlite3
import sys
import xml.etree.ElementTree as ET

page, db_path, what, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
html = open(page, encoding="utf-8").read()
db = sqlite3.connect(db_path)
NS = "{http://www.w3.org/2000/svg}"


def svgs():
    """(kind, element, the run heading above it) for every plot of the page, in order."""
    out = []
    pos = 0
    heading = ""
    for m in re.finditer(r'<h3>(.*?)</h3>|<svg class="plot".*?</svg>', html, re.S):
        if m.group(1) is not None:
            heading = m.group(1)
            continue
        el = ET.fromstring(m.group(0))
        out.append((el.get("data-plot"), el, heading))
    return out


def area(el):
    r = el.find(NS + 'rect[@data-area="1"]')
    return float(r.get("x")), float(r.get("y")), float(r.get("width")), float(r.get("height"))


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run_label(run):
    return "Run #%d " % run


if what == "batches":
    run = int(args[0])
    n = db.execute("SELECT count(*) FROM worker WHERE run_id = ?", (run,)).fetchone()[0]
    if n == 0:
        n = db.execute("SELECT count(DISTINCT worker) FROM step WHERE run_id = ?", (run,)).fetchone()[0]
    plots = [el for kind, el, _ in svgs() if kind == "batches" and
             (el.findtext(NS + "text") or "").startswith("#%d " % run)]
    if len(plots) != 1:
        fail("run %d: %d batch plots" % (run, len(plots)))
    series = plots[0].findall(NS + "g[@data-series]")
    legend = plots[0].findall(NS + 'g[@data-legend="1"]/' + NS + "text")
    if len(series) != n or len(legend) != n:
        fail("run %d: %d series, %d legend entries, %d workers" % (run, len(series), len(legend), n))
    print("run %d: batch plot with %d series, one per worker" % (run, n))

elif what == "labels":
    run = int(args[0])
    want = {i: "w%d %s (%s)" % (i, t, nd) for i, t, nd in
            db.execute("SELECT idx, device_type, node FROM worker WHERE run_id = ?", (run,))}
    seen = 0
    for kind, el, head in svgs():
        if not kind.startswith("timeline") or not head.startswith(run_label(run)):
            continue
        for t in el.findall(NS + "text[@data-row]"):
            row = int(t.get("data-row"))
            if t.text != want.get(row):
                fail("run %d: row %d labelled %r, want %r" % (run, row, t.text, want.get(row)))
            seen += 1
    if seen == 0:
        fail("run %d: no timeline row labels" % run)
    print("run %d: %d row labels carry device type and node" % (run, seen))

elif what == "covers":
    run = int(args[0])
    t_end = db.execute("SELECT max(COALESCE(comm_end_s, compute_end_s)) FROM step WHERE run_id = ?",
                       (run,)).fetchone()[0]
    plots = [(kind, el) for kind, el, head in svgs() if head.startswith(run_label(run)) and kind.startswith("timeline")]
    kinds = [k for k, _ in plots]
    if kinds != ["timeline-overview", "timeline"]:
        fail("run %d: timelines %s, want an overview then a zoom" % (run, kinds))
    ov, zoom = plots[0][1], plots[1][1]
    d = ov.find(NS + "desc")
    t0, t1 = float(d.get("data-t0")), float(d.get("data-t1"))
    if t0 > 0 or abs(t1 - t_end) > 1e-6 * t_end:
        fail("run %d: overview shows %g..%g s, the run ends at %g s" % (run, t0, t1, t_end))
    x, y, w, h = area(ov)
    right = max(float(r.get("x")) + float(r.get("width")) for r in ov.iter(NS + "rect")
                if r.get("data-area") is None and r.get("data-zoom") is None and r.get("fill") is None)
    if abs(right - (x + w)) > 1.0:
        fail("run %d: overview bins end at x=%.1f, the area at %.1f" % (run, right, x + w))
    d = zoom.find(NS + "desc")
    z0, z1 = float(d.get("data-t0")), float(d.get("data-t1"))
    if not (0 <= z0 < z1 <= t_end and z1 - z0 <= t_end / 4):
        fail("run %d: zoom %g..%g s of a %g s run" % (run, z0, z1, t_end))
    if ov.find(NS + 'rect[@data-zoom="1"]') is None:
        fail("run %d: the overview does not outline the zoomed window" % run)
    spans = len(zoom.findall(NS + "g[@data-kind]/" + NS + "rect"))
    if spans < 8:
        fail("run %d: the zoom draws %d spans" % (run, spans))
    print("run %d: overview 0..%g s (last step ends at %g s), zoom %g..%g s with %d spans" %
          (run, t1, t_end, z0, z1, spans))

elif what == "legends":
    checked = points = 0
    for kind, el, _ in svgs():
        if el.find(NS + 'rect[@data-area="1"]') is None:
            continue
        x, y, w, h = area(el)
        for g in el.findall(NS + 'g[@data-legend="1"]'):
            for r in g.findall(NS + "rect"):
                rx, ry = float(r.get("x")), float(r.get("y"))
                if rx < x + w and rx + 10 > x and ry < y + h and ry + 10 > y:
                    fail("%s plot: a legend box at (%g, %g) lies in the plotting area" % (kind, rx, ry))
            for t in g.findall(NS + "text"):
                ty = float(t.get("y"))
                if y < ty < y + h + 9 and float(t.get("x")) < x + w:
                    fail("%s plot: legend text %r at y=%g lies in the plotting area" % (kind, t.text, ty))
            checked += 1
        # Points of lines: inside the area (a clipping group may cut them at its top).
        for g in el.iter(NS + "g"):
            if g.get("data-series") is None:
                continue
            dy = 0.0
            m = re.match(r"translate\(0 (-?[\d.]+)\)", g.get("transform") or "")
            if m:
                dy = float(m.group(1))
            for pl in g.findall(NS + "polyline"):
                for p in pl.get("points").split():
                    px, py = map(float, p.split(","))
                    points += 1
                    if not (x - 0.6 <= px <= x + w + 0.6 and py + dy <= y + h + 0.6 + abs(dy)):
                        fail("%s plot: point (%g, %g) outside the plotting area" % (kind, px, py))
    if checked == 0:
        fail("no legends found")
    print("%d legends outside their plotting areas; %d line points inside them" % (checked, points))

elif what == "clipped":
    n = int(args[0])
    plots = [el for kind, el, _ in svgs() if kind == "validation"]
    if not plots:
        fail("no validation plot")
    g = [x for x in plots[0].iter(NS + "g") if x.get("data-clipped") is not None]
    got = int(g[0].get("data-clipped")) if g else 0
    if (n == 0 and g) or (n > 0 and got < n):
        fail("the iteration-time plot cut %d points (clipping group: %s), want %s" %
             (got, bool(g), "none" if n == 0 else "%d or more" % n))
    print("the iteration-time plot cut %d points" % got)
else:
    fail("unknown check " + what)
