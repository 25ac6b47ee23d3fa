"""A run's outputs: events.log (the fingerprint), metrics.json, and report.html with plots (matplotlib, the
`[sim]` extra: without it only the log and metrics are written)."""

from __future__ import annotations

import contextlib
import html
import logging
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from kubelite.clock import parse_duration
from kubelite.sim.recorder import DISRUPTIONS
from kubelite.sim.runner import Outcome

Obj = dict[str, Any]


def metrics(out: Outcome) -> Obj:
    r = out.recorder
    lives = sorted(r.pods.items())
    pending = [life.scheduled - life.created for _, life in lives if life.scheduled is not None]
    zones = r.zones()
    by_node = Counter(life.node for _, life in lives if life.node)
    by_zone = Counter(zones.get(life.node, "") or "(none)" for _, life in lives if life.node)
    timeline = [{"pod": key.rsplit("/", 1)[0], "steps": [[t, s] for t, s in life.timeline.steps]}
                for key, life in lives if life.timeline is not None]  # the scenario's `timeline` pods

    def q(p: float) -> float:
        return round(statistics.quantiles(pending, n=100, method="inclusive")[int(p) - 1], 3) if len(pending) > 1 \
            else round(pending[0], 3) if pending else 0.0

    return {
        "scenario": out.scenario.name, "seed": out.seed, "schedulerConfig": out.config,
        "simulatedSeconds": out.scenario.duration, "pods": len(lives),
        "scheduled": len(pending), "neverScheduled": sum(1 for _, life in lives if life.scheduled is None),
        "pendingSeconds": {"mean": round(statistics.fmean(pending), 3) if pending else 0.0,
                           "p50": q(50), "p90": q(90), "p99": q(99), "max": round(max(pending, default=0.0), 3)},
        "placementByNode": dict(sorted(by_node.items())), "placementByZone": dict(sorted(by_zone.items())),
        "disruptions": [{"t": t, "reason": reason, "pod": pod} for t, reason, pod in r.disruptions],
        "samples": r.samples, "timeline": timeline, "pendingTimes": [round(p, 3) for p in pending],
        # only when some failed: a run whose every action went through writes what it always wrote
        **({"failedActions": [{"t": t, "where": where, "message": message} for t, where, message in r.failures]}
           if r.failures else {}),
    }


def write(out: Outcome, directory: Path) -> Obj:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "events.log").write_bytes(out.recorder.events_log())
    m = metrics(out)
    (directory / "metrics.json").write_bytes(orjson.dumps(m, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    plots = _plots([m], directory)
    _html(directory / "report.html", [m], plots)
    return m


def write_comparison(outs: list[Outcome], directory: Path) -> list[Obj]:
    """Each run in its own subdirectory, and one report with the plots side by side and the differences."""
    ms = [write(o, directory / f"{i}-{Path(o.config).stem}") for i, o in enumerate(outs)]
    plots = _plots(ms, directory)
    _html(directory / "report.html", ms, plots, differences(ms))
    return ms


def differences(ms: list[Obj]) -> list[str]:
    """The headline numbers that differ between runs, in words."""
    a, b = ms[0], ms[-1]
    out = []
    for label, key in (("mean pending time (s)", "mean"), ("p90 pending time (s)", "p90"),
                       ("max pending time (s)", "max")):
        x, y = a["pendingSeconds"][key], b["pendingSeconds"][key]
        if x != y:
            out.append(f"{label}: {a['schedulerConfig']} {x} vs {b['schedulerConfig']} {y}")
    for res in ("cpu", "memory"):
        x, y = (statistics.fmean(s["utilisation"][res] for s in m["samples"]) if m["samples"] else 0.0 for m in (a, b))
        if round(x, 4) != round(y, 4):
            out.append(f"mean {res} utilisation: {a['schedulerConfig']} {x:.1%} vs {b['schedulerConfig']} {y:.1%}")
    for label, key, fmt in (("mean nodes in use", "nodesInUse", ".1f"),
                            ("mean cpu utilisation of the nodes in use", "cpuOfNodesInUse", ".1%")):
        x, y = (statistics.fmean(s[key] for s in m["samples"]) if m["samples"] else 0.0 for m in (a, b))
        if round(x, 4) != round(y, 4):
            out.append(f"{label}: {a['schedulerConfig']} {x:{fmt}} vs {b['schedulerConfig']} {y:{fmt}}")
    if a["neverScheduled"] != b["neverScheduled"]:
        out.append(f"never scheduled: {a['schedulerConfig']} {a['neverScheduled']} vs "
                   f"{b['schedulerConfig']} {b['neverScheduled']}")
    return out or ["no difference in the headline numbers"]


def _plots(ms: list[Obj], directory: Path) -> list[str]:
    """PNG and SVG plots, one figure per topic with one column per run; [] without matplotlib."""
    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # -v is for the components' warnings, not its fonts
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    matplotlib.rcParams["svg.hashsalt"] = "kubelite-sim"  # reproducible SVG ids
    names = []
    topics = (("pending", "pending time (s)"), ("utilisation", "utilisation over time"),
              ("placement", "pods placed by node / zone"), ("disruptions", "preemptions and evictions over time"),
              ("skew", "topology skew over time"), ("timeline", "termination timeline"))
    for topic, title in topics:
        fig, axes = plt.subplots(1, len(ms), figsize=(6 * len(ms), 3.5), squeeze=False,
                                 sharey=topic != "placement")  # side by side on one scale
        for ax, m in zip(axes[0], ms, strict=True):
            _draw(topic, ax, m)
            ax.set_title(f"{title} — {m['schedulerConfig']}", fontsize=9)
        fig.tight_layout()
        for ext in ("png", "svg"):
            fig.savefig(directory / f"{topic}.{ext}", metadata={"Date": None} if ext == "svg" else {"Software": None})
        plt.close(fig)
        names.append(topic)
    return names


def _draw(topic: str, ax: Any, m: Obj) -> None:
    samples = m["samples"]
    ts = [s["t"] / 60 for s in samples]
    if topic == "pending":
        ax.hist(m["pendingTimes"] or [0], bins=30)
        ax.set_xlabel("seconds from creation to binding")
    elif topic == "utilisation":
        for res in ("cpu", "memory", "pods"):
            ax.plot(ts, [s["utilisation"][res] for s in samples], label=res)
        ax.plot(ts, [s["cpuOfNodesInUse"] for s in samples], "--", label="cpu of the nodes in use")
        ax.set_xlabel("minutes")
        ax.legend(fontsize=7)
    elif topic == "placement":
        nodes = m["placementByNode"]
        ax.bar(list(nodes), list(nodes.values()))
        ax.tick_params(axis="x", labelrotation=90, labelsize=6)
        ax.set_xlabel(", ".join(f"zone {z}: {n}" for z, n in m["placementByZone"].items()), fontsize=7)
    elif topic == "disruptions":
        for reason in sorted({d["reason"] for d in m["disruptions"]}):
            times = sorted(d["t"] / 60 for d in m["disruptions"] if d["reason"] == reason)
            # how many so far, from 0 at the start to the total at the end: the whole run, not only its span
            ax.step([0.0, *times, m["simulatedSeconds"] / 60], [0, *range(1, len(times) + 1), len(times)],
                    where="post", label=reason)
        ax.set_xlim(0, m["simulatedSeconds"] / 60)
        ax.set_xlabel("minutes")
        if m["disruptions"]:
            ax.legend(fontsize=7)
    elif topic == "skew":
        for key in sorted({k for s in samples for k in s["skew"]}):
            ax.plot(ts, [s["skew"].get(key, 0) for s in samples], label=key)
            ax.legend(fontsize=7)
        ax.set_xlabel("minutes")
    else:
        _timeline(ax, m["timeline"], m["simulatedSeconds"])


# A timeline's repeating steps, drawn as markers on the pod's row (each kind once in the legend): the label a
# step starts or ends with, its marker and colour, its vertical offset from the row.
MARKERS = ((" exited ", "exit", "x", "tab:red", 0.0), (" restart ", "restart", "^", "tab:green", 0.0),
           ("BackOff", "BackOff event", "v", "tab:orange", 0.22), ("Killing", "Killing event", "|", "tab:red", 0.34))
MILESTONES = ("scheduled to ", "running", "deletion requested", "succeeded", "failed", "deleted", *DISRUPTIONS)


def _marker(step: str) -> tuple[str, str, str, float] | None:
    return next((m[1:] for m in MARKERS if m[0] in step or step == m[0]), None)


def _timeline(ax: Any, entries: list[Obj], duration: float) -> None:
    """Per pod, over the whole run: a bar while it runs (green) and while it terminates (red); its milestones
    labelled, grouped by instant; every container exit, restart, BackOff and Killing (each repeat: an Event
    counted up) as a marker; each CrashLoopBackOff delay (10 s, 20 s, 40 s, … 300 s) labelled where it starts."""
    seen: set[str] = set()
    for row, entry in enumerate(entries):
        steps = entry["steps"]
        start = next((t for t, s in steps if s == "running"), None)
        stop = next((t for t, s in steps if s in ("deletion requested", "Preempted")), None)
        end = next((t for t, s in reversed(steps) if s in ("deleted", "succeeded", "failed")), None)
        if start is not None:
            ax.broken_barh([(start, (stop if stop is not None else end if end is not None else duration) - start)],
                           (row - 0.06, 0.12), color="tab:green", alpha=0.5)
        if stop is not None:
            ax.broken_barh([(stop, (end if end is not None else duration) - stop)], (row - 0.06, 0.12),
                           color="tab:red", alpha=0.5)
        at: dict[float, list[str]] = {}
        waits = 0
        for i, (t, step) in enumerate(steps):
            mark = _marker(step)
            container, _, rest = step.partition(" ")
            if rest.startswith("exited ") and not any(later.startswith(f"{container} restart ")
                                                      for _, later in steps[i:]):
                at.setdefault(t, []).append(step)  # a container's last exit: its code labelled (143 or 137 …)
            if mark is not None:
                label, marker, colour, dy = mark
                ax.plot([t], [row + dy], marker=marker, color=colour, linestyle="none", markersize=5,
                        label=None if label in seen else label)
                seen.add(label)
            elif " back-off " in step:  # the wait drawn below the row, its length labelled (staggered: the
                delay = step.rsplit(" ", 1)[1]  # first ones are seconds apart on a run's axis)
                waits += 1
                with contextlib.suppress(ValueError):  # kubelet prints Go's Duration: "40s", "1m20s", "5m0s"
                    ax.broken_barh([(t, parse_duration(delay) / 1e9)], (row - 0.3, 0.06), color="tab:orange",
                                   edgecolor="white", linewidth=0.6,
                                   label=None if "back-off wait" in seen else "back-off wait")
                    seen.add("back-off wait")
                ax.annotate(delay, (t, row - 0.3), xytext=(1, -7 - 6 * (waits % 4)), textcoords="offset points",
                            fontsize=5, color="tab:orange")
            elif step.startswith(MILESTONES):
                at.setdefault(t, []).append(step)
        for i, (t, names) in enumerate(sorted(at.items())):
            ax.annotate(f"{t:g}s: " + ", ".join(names), (t, row), xytext=(0, 10 + 9 * (i % 3)),
                        textcoords="offset points", fontsize=6)
    ax.set_yticks(range(len(entries)), [e["pod"] for e in entries], fontsize=6)
    ax.set_ylim(-0.7, len(entries) - 0.2)
    ax.set_xlim(0, duration)
    ax.set_xlabel("seconds")
    if seen:
        ax.legend(fontsize=6, loc="upper right")


def _html(path: Path, ms: list[Obj], plots: list[str], diffs: list[str] | None = None) -> None:
    rows = "".join(
        f"<tr><td>{html.escape(m['schedulerConfig'])}</td><td>{m['pods']}</td><td>{m['neverScheduled']}</td>"
        f"<td>{m['pendingSeconds']['mean']}</td><td>{m['pendingSeconds']['p90']}</td>"
        f"<td>{len(m['disruptions'])}</td></tr>" for m in ms)
    diff_html = "".join(f"<li>{html.escape(d)}</li>" for d in diffs or [])
    failed = "".join(f"<li>{html.escape(m['schedulerConfig'])}: {f['t']:g} s: {html.escape(f['where'])}: "
                     f"{html.escape(f['message'])}</li>" for m in ms for f in m.get("failedActions", []))
    body = (f"<h1>Simulation: {html.escape(ms[0]['scenario'])} (seed {ms[0]['seed']})</h1>"
            "<table border=1><tr><th>scheduler config</th><th>pods</th><th>never scheduled</th>"
            f"<th>mean pending (s)</th><th>p90 pending (s)</th><th>preemptions/evictions</th></tr>{rows}</table>"
            + (f"<h2>Scenario actions that failed</h2><ul>{failed}</ul>" if failed else "")
            + (f"<h2>Differences</h2><ul>{diff_html}</ul>" if diffs else "")
            + "".join(f'<h2>{p}</h2><img src="{p}.svg">' for p in plots)
            + ("" if plots else "<p>Plots need matplotlib: pip install 'kubelite[sim]'.</p>"))
    path.write_text(f"<!doctype html><html><head><meta charset=utf-8><title>kubelite sim</title></head>"
                    f"<body>{body}</body></html>\n")
