#!/usr/bin/env python3
"""Plots of pkvsim runs and sweeps, each into one PNG.

  plot.py curve SWEEP.h5 [--x FIG] [--y FIG] [--by AXIS] [--logx] [--logy]
                [--hline VALUE[:LABEL]]...
      a throughput-latency curve across a sweep: one point per sweep point (x and y
      figures of /sweep/index; default achieved output throughput against TPOT p50),
      one line per value of an axis (default route.policy when it is swept), tracing
      one other swept axis (a sweep of two others is refused: name one with --by);
      --hline draws an SLO's limit
  plot.py threshold SWEEP.h5 --x AXIS --ratio A/B [--y FIG] [--by AXIS] [--logx] [--logy]
      the ratio of a figure (default decode_tok_s) between two policies across a swept
      threshold, one line per value of another axis (an arrival process, a load); points
      that differ in an axis neither --x nor --by names are refused, not averaged
  plot.py cdf RUN.h5... [--metric ttft|tpot|e2el] [--linear]
      the distribution of a latency over the requests of several runs (or sweep
      points, FILE.h5:N, labelled by their swept values), one curve each

The figures --x and --y take (a sweep's /sweep/index, besides its axes): FIGURES.
  plot.py steps RUN.h5
      each step's time coloured by its route, and its launches and merge bytes
  plot.py timeline RUN.h5
      active rows, waiting requests and the KV pool (pages in use, held by the prefix
      cache alone, free) over simulated time; a fleet's: one line a replica (at most
      16, the busiest), its KV pages in use against its pool's capacity (the waiting
      panel left out where no replica queued)
  plot.py plan PLAN_OUT.json
      pkvsim plan's --json: USD an hour against the load, one line per candidate (its
      fewest replicas meeting the SLOs), each load's plan starred with its replicas
  plot.py replicas RUN.h5
      a fleet's per-replica load (requests routed, the share of the run its GPU was
      busy, replica-seconds) and, autoscaled, its replicas over time with the metric

Every command takes -o OUT.png (default: the input's name with the command's). Needs
only a python3 with h5py and matplotlib (Debian: apt install python3-h5py
python3-matplotlib; elsewhere pip install h5py matplotlib). Reads the datasets pkvsim
writes (README.md, "Reading the output"); changes nothing.
"""
import argparse
import json
import os
import sys

try:
    import h5py
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
except ImportError as exc:  # run under an interpreter that has them, else say what to install
    here = os.path.realpath(sys.executable)
    for other in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(other) and os.path.realpath(other) != here and os.environ.get(
                "PKV_PLOT_REEXEC") is None and os.system(
                f"{other} -c 'import h5py, matplotlib' 2>/dev/null") == 0:
            print(f"plot.py: {sys.executable} has no {exc.name}; running under {other}, which has",
                  file=sys.stderr)
            os.environ["PKV_PLOT_REEXEC"] = "1"
            os.execv(other, [other] + sys.argv)
    sys.exit(f"plot.py: {exc.name} is missing for {sys.executable} (Python "
             f"{sys.version_info.major}.{sys.version_info.minor}): apt install python3-h5py "
             f"python3-matplotlib (Debian, Ubuntu, for /usr/bin/python3) or {sys.executable} -m "
             f"pip install h5py matplotlib")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pkvh5  # noqa: E402

MAX_POINTS = 20000  # a scatter of more steps is decimated to this many
# A figure's unit: the one the sweep index records beside it (the summary table's,
# analysis/summary.c), else none (an axis).
UNITS = {}
# The summary figures every sweep index carries (analysis/summary.c, the rows marked
# `index`; tests/plot.sh checks this list against a sweep file).
FIGURES = ["steps", "finished", "preemptions", "prefills", "request_throughput",
           "request_goodput", "output_throughput", "slo_attainment", "mean_ttft", "mean_tpot",
           "mean_itl", "median_itl", "mean_e2el", "median_e2el", "decode_tok_s",
           "decode_tok_s_wall", "decode_tok_s_device", "mean_rows", "ttft_p50", "ttft_p90",
           "ttft_p99", "tpot_p50", "tpot_p90", "tpot_p99", "itl_p50", "itl_p99", "e2el_p50",
           "e2el_p99", "prefix_hit_rate", "prefix_unbounded_hit_rate"]
__doc__ = __doc__.replace("FIGURES", ", ".join(FIGURES))


def fail(msg):
    sys.exit(f"plot.py: {msg}")


def unit(fig):
    return UNITS.get(fig, "")


def label(fig):
    u = unit(fig)
    return f"{fig} ({u})" if u else fig


def open_file(path):
    try:
        return h5py.File(path, "r")
    except OSError as e:
        fail(f"{path}: not a readable HDF5 file ({e})")


def sweep_index(path):
    f = open_file(path)
    if "sweep/index" not in f:
        fail(f"{path}: not a sweep file (no /sweep/index)")
    g = f["sweep/index"]
    ix = {}
    for k in g:
        if "unit" in g[k].attrs:
            u = g[k].attrs["unit"]
            UNITS[k] = u.decode() if isinstance(u, bytes) else str(u)
        v = g[k][:]
        if v.dtype.kind in "SO":
            v = np.array([x.decode() if isinstance(x, bytes) else str(x) for x in v])
        ix[k] = v
    done = ix["status"] == "done"
    return {k: v[done] for k, v in ix.items()}


def column(ix, name, path, what):
    if name not in ix:
        # A key inside an object-valued axis (workload.arrival.process of an axis
        # workload.arrival whose values are objects).
        for axis in [k for k in ix if name.startswith(k + ".")]:
            try:
                objs = [json.loads(v) for v in ix[axis]]
                sub = name[len(axis) + 1:].split(".")
                vals = []
                for o in objs:
                    for k in sub:
                        o = o.get(k) if isinstance(o, dict) else None
                    vals.append("—" if o is None else str(o))
                return np.array(vals)
            except (ValueError, TypeError, AttributeError):
                pass
        axes = [k for k in ix if "." in k]
        fail(f"{path}: no {what} \"{name}\" in /sweep/index (axes: {', '.join(axes) or 'none'}; "
             f"figures: decode_tok_s, output_throughput, ttft_p50, tpot_p50, ...)")
    return ix[name]


def numeric(v):
    try:
        return v.astype(float), True
    except ValueError:
        return v, False


def groups(values):
    """Distinct values in order (numeric ones sorted as numbers)."""
    u = list(dict.fromkeys(values.tolist()))
    try:
        return sorted(u, key=float)
    except ValueError:
        return u


def legend(ax, n):
    """A legend that fits: inside for a few entries, beside the plot in columns for more."""
    if n <= 6:
        ax.legend(fontsize=8)
    else:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1),
                  ncol=1 if n <= 16 else 2, borderaxespad=0)


def scales(ax, a):
    """Log axes where asked, with plain numbers at every decade and between decades where
    an axis spans less than two (matplotlib's default labels one tick of such an axis)."""
    from matplotlib.ticker import LogLocator, FuncFormatter
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    for on, axis, setter in ((getattr(a, "logx", False), ax.xaxis, ax.set_xscale),
                             (getattr(a, "logy", False), ax.yaxis, ax.set_yscale)):
        if not on:
            continue
        setter("log")
        lo, hi = (ax.get_xlim() if axis is ax.xaxis else ax.get_ylim())
        axis.set_major_locator(LogLocator(base=10, subs=(1.0,) if hi / lo > 100 else (1, 2, 5)))
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def hlines(ax, a):
    """--hline VALUE[:LABEL] (repeatable): horizontal lines, an SLO's limit, in the y
    axis's units."""
    for h in getattr(a, "hline", None) or []:
        v, _, text = h.partition(":")
        try:
            y = float(v)
        except ValueError:
            fail(f"--hline {h}: a number, optionally :LABEL")
        ax.axhline(y, color="crimson", ls="--", lw=1, label=text or f"{y:g}")


def short(v):
    """A swept value as a legend label: an object's keys and values, compactly; whole
    numbers without a decimal point."""
    try:
        o = json.loads(v)
    except (TypeError, ValueError):
        try:
            f = float(v)
            return f"{f:g}"
        except (TypeError, ValueError):
            return str(v)
    if isinstance(o, dict):
        return ", ".join(f"{k} {short(json.dumps(x))}" for k, x in o.items())
    if isinstance(o, list) and o and all(isinstance(x, dict) and "name" in x for x in o):
        return " + ".join(f"{x['name']} {x.get('replicas', 1)} {x.get('role', 'mixed')}" for x in o)
    if isinstance(o, float):
        return f"{o:g}"
    return str(o)


def axis_name(path):
    """An axis as a legend or label names it: its last key (fleet.router: router)."""
    return path.rsplit(".", 1)[-1] if path else path


def sweep_name(path):
    """A sweep's experiment name (its file's when it has none)."""
    try:
        with h5py.File(path) as f:
            raw = f["sweep/experiment"][()]
        return json.loads(raw.decode() if isinstance(raw, bytes) else raw).get(
            "name", os.path.basename(path))
    except (KeyError, OSError, ValueError):
        return os.path.basename(path)


def unnamed_axes(ix, path, named, traced):
    """The swept axes besides `named` along which points of one line would be joined
    although the line traces at most one (`traced`: the figure the x axis is, or an
    axis): refused, as threshold refuses them."""
    others = [k for k in ix if "." in k and k not in named and not any(
        n and (n.startswith(k + ".") or k.startswith(n + ".")) for n in named)]
    varying = [k for k in others if len(set(ix[k].tolist())) > 1]
    return varying if len(varying) > traced else []


def save(fig, out):
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def cmd_curve(a):
    ix = sweep_index(a.input)
    by = a.by or ("route.policy" if "route.policy" in ix else None)
    byv = column(ix, by, a.input, "axis") if by else None
    # A line joins the points of one --by value: across one swept axis (the load it
    # traces); a second one would zig-zag between its values.
    extra = unnamed_axes(ix, a.input, {by}, 1)
    if extra:
        fail(f"{a.input}: the points of one line differ in {', '.join(extra)}; a curve traces "
             f"one of them: name another with --by (or plot a sweep that fixes it)")
    x, _ = numeric(column(ix, a.x, a.input, "figure"))
    y, _ = numeric(column(ix, a.y, a.input, "figure"))
    # Latencies in milliseconds, as serving benchmarks give them.
    xs, ys = (1e3 if unit(a.x) == "s" else 1), (1e3 if unit(a.y) == "s" else 1)
    x, y = x * xs, y * ys
    fig, ax = plt.subplots(figsize=(7, 4.5))
    keys = groups(byv) if by else [None]
    for k in keys:
        m = np.ones(len(x), bool) if k is None else byv == k
        order = np.argsort(x[m])
        ax.plot(x[m][order], y[m][order], "o-",
                label=f"{axis_name(by)} {short(k)}" if by else None)
    ax.set_xlabel(label(a.x).replace("(s)", "(ms)") if xs != 1 else label(a.x))
    ax.set_ylabel(label(a.y).replace("(s)", "(ms)") if ys != 1 else label(a.y))
    ax.set_title(f"{sweep_name(a.input)}: {a.y} against {a.x}")
    hlines(ax, a)
    if by or getattr(a, "hline", None):
        legend(ax, len(keys) + len(a.hline or []))
    scales(ax, a)
    ax.grid(alpha=0.3)
    save(fig, a.output)


def cmd_threshold(a):
    ix = sweep_index(a.input)
    if "/" not in a.ratio:
        fail("--ratio takes POLICY_A/POLICY_B (route.policy values of the sweep)")
    pa, pb = a.ratio.split("/", 1)
    pol = column(ix, "route.policy", a.input, "axis")
    xs = column(ix, a.x, a.input, "axis")
    ys, _ = numeric(column(ix, a.y, a.input, "figure"))
    by = column(ix, a.by, a.input, "axis") if a.by else np.array(["all"] * len(xs))
    # Points that differ in an axis --x, --by and the policy do not name would be averaged
    # into one ratio: refuse, naming those axes.
    named = {a.x, a.by, "route.policy"}
    others = unnamed_axes(ix, a.input, named, 0)
    merged = [k for k in others if any(
        len(set(ix[k][(xs == xv) & (by == bv) & (pol == pv)].tolist())) > 1
        for xv in groups(xs) for bv in groups(by) for pv in (pa, pb))]
    if merged:
        fail(f"{a.input}: the points at one {a.x} and {a.by or 'plot'} differ in "
             f"{', '.join(merged)}, which would be averaged; name it with --by (or plot a sweep "
             "that fixes it)")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = 0
    for k in groups(by):
        pts = []
        for xv in groups(xs):
            m = (xs == xv) & (by == k)
            va, vb = ys[m & (pol == pa)], ys[m & (pol == pb)]
            if len(va) and len(vb) and vb.mean() > 0:
                pts.append((float(xv) if numeric(np.array([xv]))[1] else xv, va.mean() / vb.mean()))
        if pts:
            drawn += 1
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-",
                    label=f"{axis_name(a.by)} {short(k)}" if a.by else None)
    if not drawn:
        fail(f"{a.input}: no point has both route.policy {pa} and {pb} at the same {a.x}")
    ax.axhline(1, color="grey", lw=0.8)
    ax.set_xlabel(a.x)
    ax.set_ylabel(f"{a.y}: {pa} / {pb}")
    ax.set_title(f"{sweep_name(a.input)}: {pa} over {pb} across {axis_name(a.x)}", fontsize=10)
    if a.by:
        legend(ax, drawn)
    scales(ax, a)
    ax.grid(alpha=0.3)
    save(fig, a.output)


def run_group(spec, need="requests"):
    """FILE.h5 or FILE.h5:N (sweep point N): the run's group, which must hold `need`."""
    path, point = spec, None
    if not os.path.exists(spec) and ":" in spec:
        path, point = spec.rsplit(":", 1)
    f = open_file(path)
    g = f if point is None else f.get(f"points/{int(point):05d}")
    if g is None or need not in g:
        fail(f"{spec}: no /{need} (not a run, or recorded below run.record \"{need}\")")
    return g


def run_label(spec):
    """A run's label: a sweep point's swept values (axis = value, the axes that vary),
    else the experiment's name, its model and route policy."""
    path, point = spec, None
    if not os.path.exists(spec) and ":" in spec:
        path, point = spec.rsplit(":", 1)
    f = open_file(path)
    if point is not None and "sweep/index" in f:
        g = f["sweep/index"]
        pts = g["point"][:]
        row = np.nonzero(pts == int(point))[0]
        vary = []
        for k in g:
            if "." not in k or not len(row):
                continue
            v = g[k][:]
            v = [x.decode() if isinstance(x, bytes) else str(x) for x in v]
            if len(set(v)) > 1:
                vary.append(f"{k.rsplit('.', 1)[-1]} = {short(v[row[0]])}")
        if vary:
            return "; ".join(vary)
    g = f if point is None else f.get(f"points/{int(point):05d}")
    try:
        raw = g["config/resolved"][()]
        cfg = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
        return f"{cfg['name']}, {cfg['model']['name']}, {cfg['route']['policy']}"
    except (KeyError, TypeError, ValueError):
        return os.path.basename(spec)


def cmd_cdf(a):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for spec in a.input:
        r = pkvh5.table(run_group(spec), "requests")
        first, arr, fin = r["t_first_token"], r["t_arrival"], r["t_finish"]
        if a.metric == "ttft":
            v = first - arr
        elif a.metric == "e2el":
            v = fin - arr
        else:  # vLLM's TPOT: (E2E - TTFT) / (n - 1), requests of two tokens or more
            n = r["generated"].astype(float)
            v = np.where(n > 1, (fin - first) / np.maximum(n - 1, 1), np.nan)
        v = np.sort(v[np.isfinite(v)])
        if len(v) == 0:
            continue
        ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post",
                label=f"{run_label(spec)} ({len(v)} requests)")
    ax.set_xlabel(f"{a.metric} (s)")
    ax.set_ylabel("fraction of requests")
    if not a.linear:
        ax.set_xscale("log")
    ax.set_title(f"{a.metric.upper()} over the requests")
    legend(ax, len(a.input))
    ax.grid(alpha=0.3)
    save(fig, a.output)


def steps_of(path):
    g = run_group(path, "steps")
    s = pkvh5.table(g, "steps")
    if len(s["index"]) == 0:
        fail(f"{path}: the run has no decode steps")
    return g, s


def decimate(n):
    return np.arange(n) if n <= MAX_POINTS else np.linspace(0, n - 1, MAX_POINTS).astype(int)


def cmd_steps(a):
    g, s = steps_of(a.input)
    names = pkvh5.enum_names(g, "steps", "route")
    t = s["t_wall"] if "t_wall" in s else s["t_predicted"]
    what = "measured wall" if "t_wall" in s else "predicted"
    k = decimate(len(t))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for code in sorted(set(s["route"][k].tolist())):
        m = s["route"][k] == code
        ax1.scatter(s["index"][k][m], t[k][m] * 1e6, s=3, label=names.get(code, str(code)))
    ax1.set_ylabel(f"step time, {what} (us)")
    ax1.set_yscale("log")
    ax1.legend(markerscale=4, fontsize=8)
    ax1.set_title(os.path.basename(a.input) + (f" ({len(k)} of {len(t)} steps shown)"
                                               if len(k) < len(t) else ""))
    ax2.plot(s["index"][k], s["launches"][k], lw=0.8, label="launches per step")
    ax2.set_ylabel("launches")
    ax3 = ax2.twinx()
    ax3.plot(s["index"][k], s["merge_bytes"][k] / 1e6, lw=0.8, color="tab:red",
             label="merge MB per step")
    ax3.set_ylabel("merge traffic (MB)")
    ax2.set_xlabel("step")
    ax2.legend(loc="upper left", fontsize=8)
    ax3.legend(loc="upper right", fontsize=8)
    save(fig, a.output)


MAX_REPLICAS = 16  # a fleet's timeline draws the busiest this many


def fleet_timeline(a, g, s):
    rep = pkvh5.table(g, "replicas") if "replicas" in g else None
    ids = np.unique(s["replica"])
    if len(ids) > MAX_REPLICAS:  # the busiest
        ids = np.sort(ids[np.argsort(-np.bincount(s["replica"])[ids])[:MAX_REPLICAS]])
    # panels: active rows; waiting requests (left out where no replica ever queued); the KV
    # pages in use against each replica's pool (its capacity, dashed)
    queued = bool(np.any(s["queue_depth"][np.isin(s["replica"], ids)] > 0))
    names = ["rows", "queue", "kv"] if queued else ["rows", "kv"]
    fig, axs = plt.subplots(len(names), 1, figsize=(9, 2.4 * len(names) + 0.5), sharex=True)
    ax = dict(zip(names, axs))
    caps = set()
    for i in ids:
        m = s["replica"] == i
        k = np.flatnonzero(m)[decimate(int(m.sum()))]
        t = s["t_sim"][k]
        line, = ax["rows"].plot(t, s["rows"][k], lw=0.7, label=f"replica {i}")
        if queued:
            ax["queue"].plot(t, s["queue_depth"][k], lw=0.7, color=line.get_color())
        if rep is not None:
            used = rep["kv_pages"][i] - s["pages_free"][k].astype(float) - s["pages_cached"][k]
            ax["kv"].plot(t, used, lw=0.7, color=line.get_color())
            caps.add(int(rep["kv_pages"][i]))
    for c in sorted(caps):
        ax["kv"].axhline(c, color="grey", ls="--", lw=0.8,
                         label=f"pool of {c} pages" if len(caps) < 4 else None)
    if caps and len(caps) < 4:
        ax["kv"].legend(fontsize=7, loc="lower right")
    ax["rows"].set_ylabel("active rows")
    if queued:
        ax["queue"].set_ylabel("waiting requests")
    ax["kv"].set_ylabel("KV pages in use")
    axs[-1].set_xlabel("simulated time (s)")
    ax = axs
    ax[0].legend(fontsize=7, ncol=4)
    n = len(np.unique(s["replica"]))
    ax[0].set_title(os.path.basename(a.input) + f" ({len(ids)} of {n} replicas)")
    for x in ax:
        x.grid(alpha=0.3)
    save(fig, a.output)


def cmd_replicas(a):
    g = run_group(a.input, "replicas")
    rep = pkvh5.table(g, "replicas")
    req = pkvh5.table(g, "requests") if "requests" in g else None
    t_end = float(np.nanmax(req["t_finish"])) if req is not None and len(req["t_finish"]) else 0
    scaled = "scale" in g
    fig, ax = plt.subplots(2 if scaled else 1, 1, figsize=(9, 7 if scaled else 4), squeeze=False)
    top = ax[0][0]
    x = rep["replica"]
    top.bar(x - 0.2, rep["routed"], width=0.4, label="requests routed")
    top.set_xlabel("replica")
    from matplotlib.ticker import MaxNLocator
    top.xaxis.set_major_locator(MaxNLocator(integer=True))  # replicas are whole
    top.set_ylabel("requests")
    right = top.twinx()
    if t_end > 0:
        right.plot(x, rep["busy_s"] / t_end, "o", color="tab:red", label="busy share")
        right.plot(x, rep["up_s"] / t_end, "x", color="tab:gray", label="up share")
    right.set_ylabel("share of the run")
    right.set_ylim(0, 1.05)
    top.legend(loc="upper left", fontsize=8)
    right.legend(loc="upper right", fontsize=8)
    top.set_title(os.path.basename(a.input) + f" ({len(x)} replicas)")
    if scaled:
        sc = pkvh5.table(g, "scale")
        d = sc["event"] == 0
        low = ax[1][0]
        low.step(sc["t"], sc["active"], where="post", label="active")
        low.step(sc["t"], sc["starting"], where="post", label="starting")
        low.set_ylabel("replicas")
        low.set_xlabel("simulated time (s)")
        m = low.twinx()
        m.plot(sc["t"][d], sc["metric"][d], lw=0.8, color="tab:green", label="metric")
        m.set_ylabel("autoscaler's metric")
        low.legend(loc="upper left", fontsize=8)
        m.legend(loc="upper right", fontsize=8)
        low.grid(alpha=0.3)
    save(fig, a.output)


def cmd_timeline(a):
    g, s = steps_of(a.input)
    if "replica" in s:
        return fleet_timeline(a, g, s)
    r = pkvh5.table(g, "requests")
    k = decimate(len(s["t_sim"]))
    t = s["t_sim"][k]
    if "queue_depth" in s:  # recorded per step (files of 2026-12-01 on)
        waiting = s["queue_depth"][k]
    else:  # older files: from the requests' arrival and admission times
        arr = np.sort(r["t_arrival"])
        adm = np.sort(r["t_admitted"][np.isfinite(r["t_admitted"])])
        waiting = np.searchsorted(arr, t, "right") - np.searchsorted(adm, t, "right")
    fig, ax = plt.subplots(3, 1, figsize=(9, 7), sharex=True)
    ax[0].plot(t, s["rows"][k], lw=0.8)
    ax[0].set_ylabel("active rows")
    ax[1].plot(t, waiting, lw=0.8, color="tab:orange")
    ax[1].set_ylabel("waiting requests")
    if "pages_free" in s:  # the KV pool: pages in use, held by the prefix cache alone, free
        cfg = g["config/resolved"][()]
        sv = json.loads(cfg.decode() if isinstance(cfg, bytes) else cfg)["serving"]
        usable = sv["kv_pages"] - int(sv["page_tables"]["hole_fraction"] * sv["kv_pages"])
        free, cached = s["pages_free"][k], s["pages_cached"][k]
        ax[2].stackplot(t, usable - free - cached, cached, free, lw=0,
                        labels=["in use", "cached (evictable)", "free"],
                        colors=["tab:green", "tab:olive", "0.85"])
        ax[2].set_ylabel("KV pages")
        ax[2].legend(loc="upper right", fontsize=8)
    else:
        ax[2].plot(t, s["context_tokens"][k] / 1e3, lw=0.8, color="tab:green")
        ax[2].set_ylabel("KV in use (K tokens)")
    ax[2].set_xlabel("simulated time (s)")
    ax[0].set_title(run_title(g, a.input), fontsize=10)
    for x in ax:
        x.grid(alpha=0.3)
    save(fig, a.output)


def cmd_plan(a):
    """pkvsim plan --json OUT: cost against load, a line per candidate (its fewest
    replicas' USD an hour at each load, none where it met no SLO within the bound), the
    plan of each load marked."""
    try:
        d = json.load(open(a.input))
        plans = d["plans"]
    except (OSError, ValueError, KeyError) as exc:
        fail(f"{a.input}: not the --json of pkvsim plan ({exc})")
    loads = [p["load"] for p in plans]
    numeric_load = all(isinstance(v, (int, float)) for v in loads)
    xs = loads if numeric_load else list(range(len(loads)))
    lines = {}
    for i, p in enumerate(plans):
        for c in p["candidates"]:
            key = ", ".join(f"{axis_name(k)} {short(json.dumps(v))}" for k, v in
                            c["candidate"].items()) or "the experiment"
            lines.setdefault(key, [None] * len(plans))[i] = (c.get("usd_per_hour"),
                                                             c.get("replicas"), c["chosen"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, pts in lines.items():
        xy = [(xs[i], p[0]) for i, p in enumerate(pts) if p and p[0] is not None]
        if xy:
            ax.plot([q[0] for q in xy], [q[1] for q in xy], "o-", label=key, alpha=0.8)
        for i, p in enumerate(pts):
            if p and p[2]:
                ax.plot(xs[i], p[0], "*", ms=16, color="black", zorder=5)
                ax.annotate(f"{p[1]}", (xs[i], p[0]), textcoords="offset points",
                            xytext=(8, -12), fontsize=8)
    ax.plot([], [], "*", ms=12, color="black", label="the plan (its replicas)")
    ax.set_xlabel(d.get("load_path", "load") if numeric_load else "load")
    if not numeric_load:
        ax.set_xticks(xs, [short(json.dumps(v)) for v in loads])
    ax.set_ylabel("USD per hour")
    ax.set_title(f"{os.path.basename(d.get('experiment', a.input))}: the cheapest fleet "
                 f"meeting the SLOs", fontsize=10)
    legend(ax, len(lines) + 1)
    ax.grid(alpha=0.3)
    save(fig, a.output)


def run_title(g, path):
    """The file, its experiment, model, backend and calibration: what the plot shows."""
    try:
        raw = g["config/resolved"][()]
        cfg = json.loads(raw.decode() if isinstance(raw, bytes) else raw)
        prov = dict(g["provenance"].attrs) if "provenance" in g else {}
        backend = prov.get("backend", b"?")
        backend = backend.decode() if isinstance(backend, bytes) else str(backend)
        cal = os.path.basename(cfg["route"]["calibration"])
        return (f"{os.path.basename(path)}: {cfg['name']}, {cfg['model']['name']}, "
                f"{backend} backend ({cal}), route {cfg['route']['policy']}")
    except (KeyError, ValueError):
        return os.path.basename(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("curve", help="throughput-latency curve across a sweep",
                       description="--x and --y take these figures of /sweep/index: "
                       + ", ".join(FIGURES) + " (latencies in seconds are drawn in ms)")
    p.add_argument("input")
    p.add_argument("--x", default="output_throughput")
    p.add_argument("--y", default="tpot_p50")
    p.add_argument("--by")
    p.add_argument("--logx", action="store_true", help="a log x axis")
    p.add_argument("--logy", action="store_true", help="a log y axis")
    p.add_argument("--hline", action="append", metavar="VALUE[:LABEL]",
                   help="a horizontal line (an SLO's limit) in the y axis's units; repeatable")
    p = sub.add_parser("threshold", help="a policy ratio across a swept threshold",
                       description="--y takes these figures of /sweep/index: "
                       + ", ".join(FIGURES))
    p.add_argument("input")
    p.add_argument("--x", required=True)
    p.add_argument("--ratio", required=True)
    p.add_argument("--y", default="decode_tok_s")
    p.add_argument("--by")
    p.add_argument("--logx", action="store_true", help="a log x axis")
    p.add_argument("--logy", action="store_true", help="a log y axis")
    p = sub.add_parser("cdf", help="latency distributions of several runs")
    p.add_argument("input", nargs="+")
    p.add_argument("--metric", choices=["ttft", "tpot", "e2el"], default="ttft")
    p.add_argument("--linear", action="store_true", help="a linear latency axis (default: log)")
    p = sub.add_parser("steps", help="step times by route, launches, merge bytes")
    p.add_argument("input")
    p = sub.add_parser("timeline", help="rows, queue and KV in use over time")
    p.add_argument("input")
    p = sub.add_parser("replicas", help="a fleet's per-replica load and its scaling")
    p.add_argument("input")
    p = sub.add_parser("plan", help="pkvsim plan's --json: cost against load per candidate")
    p.add_argument("input")
    for s in sub.choices.values():
        s.add_argument("-o", "--output", help="PNG to write")
    a = ap.parse_args()
    first = a.input[0] if isinstance(a.input, list) else a.input
    if not a.output:
        a.output = first.split(":")[0].rsplit(".", 1)[0] + f"_{a.cmd}.png"
    {"curve": cmd_curve, "threshold": cmd_threshold, "cdf": cmd_cdf, "steps": cmd_steps,
     "timeline": cmd_timeline, "replicas": cmd_replicas, "plan": cmd_plan}[a.cmd](a)


if __name__ == "__main__":
    main()
