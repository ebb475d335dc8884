"""PNG charts with matplotlib: speedup, peak memory and compile time per model."""

from __future__ import annotations

import math
from pathlib import Path

from npu_inductor.benchmarks.results import Row

# (file stem, value column, y label, draw a 1.0 reference line, log scale)
CHARTS = (
    ("speedup", "speedup", "speedup over eager (median)", True, False),
    ("memory", "dynamo_peak_mem", "peak memory (MB, log)", False, True),
    ("compile_time", "compilation_latency", "cold compilation_latency (s, log)", False, True),
)


def _grouped(rows: list[Row], column: str) -> tuple[list[str], dict[str, list[float]]]:
    """x labels (model/mode) and, per backend, one value per label (NaN when absent)."""
    labels = list(dict.fromkeys(f"{r.model}\n{r.mode}" for r in rows if r.mode != "dynamic"))
    series: dict[str, list[float]] = {}
    for r in rows:
        if r.mode == "dynamic":
            continue
        values = series.setdefault(r.backend, [float("nan")] * len(labels))
        value = getattr(r, column)
        if value is not None and r.accuracy != "fail_to_run":
            values[labels.index(f"{r.model}\n{r.mode}")] = float(value)
    drop = [b for b, v in series.items() if all(math.isnan(x) for x in v)]
    return labels, {b: v for b, v in series.items() if b not in drop}


def bar_chart(rows: list[Row], column: str, ylabel: str, path: Path, title: str,
              unit_line: bool = False, log: bool = False) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, series = _grouped(rows, column)
    if unit_line:  # eager is the dashed 1.0 line
        series.pop("eager", None)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(labels) + 2), 4.2))
    width = 0.8 / max(len(series), 1)
    for i, (backend, values) in enumerate(series.items()):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, values, width, label=backend)
    if unit_line:
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    if log:  # values span orders of magnitude (Inductor compiles, resnet18 memory)
        ax.set_yscale("log")
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_charts(rows: list[Row], out: Path, title: str) -> list[Path]:
    """One PNG per entry of ``CHARTS``; returns the paths."""
    return [bar_chart(rows, column, ylabel, out / f"{stem}.png", title, unit_line, log)
            for stem, column, ylabel, unit_line, log in CHARTS]
