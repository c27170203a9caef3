"""chart.png beside RESULTS.md: the medians of every measure as bars, min–max as whiskers.

The table says it exactly; the chart says it at a glance — which variant is ahead on what, and how
wide the runs spread. It is drawn from results.json's summary, the same numbers as the table, by
:func:`draw` after every run, and again by ``python -m tests.bench.chart [results.json]``.
"""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

__all__ = ["draw", "subtitle"]

_VARIANTS = (  # (key, label, colour)
    ("streamapp", "StreamApp", "#1f6feb"),
    ("streamapp-rt", "StreamApp, latency: low", "#8ab4f8"),
    ("streamapp-eos", "StreamApp, exactly_once_v2", "#a142f4"),
    ("pyspark", "PySpark job", "#e8710a"),
    ("kstreams", "Kafka Streams", "#188038"),
)
#: A group of bars: (topology, measure key, label under the group).
_Group = tuple[str, str, str]


def _per_topology(key: str) -> list[_Group]:
    return [("stateless", key, "stateless"), ("wordcount", key, "word count")]


#: (title, groups, log scale)
_PANELS: tuple[tuple[str, list[_Group], bool], ...] = (
    ("throughput, records/s (higher is better)", _per_topology("throughput_rps"), False),
    ("CPU-seconds per million records (lower is better)", _per_topology("cpu_s_per_million"), False),
    (
        "stateless latency at 1,000 records/s, ms (lower is better)",
        [("stateless", "latency_p50_ms", "p50"), ("stateless", "latency_p99_ms", "p99")],
        True,
    ),
    ("start-up to first output, s (lower is better)", _per_topology("startup_s"), False),
)


def draw(summary: dict[str, Any], out: pathlib.Path, *, subtitle: str = "") -> pathlib.Path:
    """Write the chart of ``summary`` (results.json's) to ``out`` (a .png path) and return it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8), constrained_layout=True)
    width = 0.8 / len(_VARIANTS)
    for ax, (title, groups, log) in zip(axes.flat, _PANELS, strict=True):
        for i, (variant, label, colour) in enumerate(_VARIANTS):
            xs, heights, low, high = [], [], [], []
            for g, (topology, key, _) in enumerate(groups):
                cell = summary.get(topology, {}).get(variant, {}).get(key)
                if not cell or cell.get("median") is None:
                    continue  # this variant does not run this topology (latency: low is stateless only)
                xs.append(g - 0.4 + width * (i + 0.5))
                heights.append(cell["median"])
                low.append(cell["median"] - cell["min"])
                high.append(cell["max"] - cell["median"])
            if xs:
                ax.bar(xs, heights, width, yerr=[low, high], capsize=3, color=colour, label=label)
                for x, h, top in zip(xs, heights, high, strict=True):  # the label above the whisker
                    text = f"{h:,.0f}" if h >= 100 else f"{h:.3g}"
                    ax.annotate(
                        text, (x, h + top), xytext=(0, 2), textcoords="offset points", ha="center", fontsize=7
                    )
        ax.set_xticks(range(len(groups)), [label for _, _, label in groups])
        ax.set_title(title, fontsize=10)
        if log:
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(_VARIANTS), fontsize=9, frameon=False)
    fig.suptitle(f"StreamApp vs PySpark vs Kafka Streams: median, whiskers min–max{subtitle}", fontsize=11)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str]) -> int:
    results = pathlib.Path(argv[0]) if argv else pathlib.Path(__file__).parent / "results" / "results.json"
    doc = json.loads(results.read_text())
    print(draw(doc["summary"], results.with_name("chart.png"), subtitle=subtitle(doc["meta"])))
    return 0


def subtitle(meta: dict[str, Any]) -> str:
    args = meta.get("args", {})
    return f"\n{args.get('records', 0):,} records × {args.get('repeats', 0)} runs, {meta['started_utc']}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
