"""Output: the terminal table (rich), CSV, JSON and PNG charts (matplotlib)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from npu_inductor.benchmarks.results import COLUMNS, Row

KEYS = (("model", "model", "{}"), ("mode", "mode", "{}"), ("backend", "backend", "{}"))
# Two terminal tables of (column, header, format); the CSV/JSON carry every column.
SPEED = KEYS + (
    ("accuracy", "accuracy", "{}"), ("max_rel_err", "rel err", "{:.1e}"),
    ("speedup", "speedup", "{:.2f}x"), ("speedup_p10", "p10 speedup", "{:.2f}x"),
    ("abs_latency", "ms p50", "{:.3f}"),
    ("abs_latency_p10", "p10", "{:.3f}"), ("abs_latency_p90", "p90", "{:.3f}"),
    ("compiles", "compiles", "{}"), ("total_time", "total wall s", "{:.2f}"),
    ("padding_overhead", "padding", "{:.1%}"), ("compile_time", "compile wall s", "{:.2f}"),
    ("steady_speedup", "steady cpu", "{:.2f}x"),
)
COMPILE = KEYS + (
    ("compilation_latency", "compile s", "{:.2f}"),
    ("compilation_latency_warm", "warm s", "{:.2f}"),
    ("compile_ratio_vs_aot_eager", "vs aot", "{:.2f}x"), ("backend_compile_s", "ours s", "{:.2f}"),
    ("compilation_latency_fresh", "cold fresh s", "{:.2f}"),
    ("compile_ratio_fresh_vs_aot_eager", "vs aot fresh", "{:.2f}x"),
    ("dynamo_peak_mem", "peak MB", "{:.2f}"), ("compression_ratio", "mem ratio", "{:.2f}x"),
    ("graphs", "graphs", "{}"), ("graph_breaks", "breaks", "{}"),
    ("ge_ops_before_fusion", "GE ops unfused", "{}"), ("ge_ops", "GE ops", "{}"),
    ("fallback_ops", "fallbacks", "{}"), ("aicpu_ops", "AI CPU ops", "{}"),
    ("unproven_ops", "unproven ops", "{}"), ("workspace_ratio", "ws/lb", "{:.2f}"),
)
TRAINING = KEYS + (
    ("dtype", "dtype", "{}"), ("abs_latency", "step ms", "{:.3f}"),
    ("speedup", "vs eager", "{:.2f}x"), ("step_cpu_ms", "step cpu ms", "{:.3f}"),
    ("cpu_speedup", "cpu vs eager", "{:.2f}x"), ("forward_ms", "fwd ms", "{:.3f}"),
    ("backward_ms", "bwd ms", "{:.3f}"), ("optimizer_ms", "opt ms", "{:.3f}"),
    ("ge_ops_before_fusion", "GE ops unfused", "{}"), ("ge_ops", "GE ops", "{}"),
)
DYNAMIC_ONLY = ("compiles", "total_time", "padding_overhead", "compile_time", "steady_speedup")
MIN_WIDTH = 200  # rich assumes 80 columns when stdout is not a terminal


def cell(row: Row, column: str, fmt: str) -> str:
    value = getattr(row, column)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return fmt.format(value)


def table_columns(rows: list[Row], spec: tuple = SPEED) -> list[tuple[str, str, str]]:
    """Terminal columns; the dynamic-stream ones only when that scenario ran."""
    dynamic = any(r.mode == "dynamic" for r in rows)
    return [c for c in spec if dynamic or c[0] not in DYNAMIC_ONLY]


def _rich_table(rows: list[Row], spec: tuple, title: str) -> Any:
    from rich.table import Table

    columns = table_columns(rows, spec)
    table = Table(title=title)
    for _, header, _ in columns:
        table.add_column(header, no_wrap=True)
    for row in rows:
        style = {"fail_to_run": "red", "fail_accuracy": "yellow"}.get(row.accuracy)
        table.add_row(*(cell(row, c, f) for c, _, f in columns), style=style)
    return table


def print_table(rows: list[Row], machine: dict[str, Any]) -> None:
    """Two rich tables (speed, compile + memory) and the errors; plain text without rich."""
    try:
        from rich.console import Console
    except ImportError:
        print(format_markdown(rows, SPEED) + "\n\n" + format_markdown(rows, COMPILE))
        training = [r for r in rows if r.mode == "training"]
        if training:
            print("\n" + format_markdown(training, TRAINING))
        return
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, MIN_WIDTH))
    static = [r for r in rows if r.mode != "dynamic"]
    console.print(_rich_table(rows, SPEED, "accuracy and latency: " + machine_line(machine)))
    console.print(_rich_table(static, COMPILE, "compilation and memory"))
    training = [r for r in rows if r.mode == "training"]
    if training:
        console.print(_rich_table(training, TRAINING, "training step: forward, backward, "
                                  "optimizer (median ms); GE ops per step"))
    for row in rows:
        if row.error:
            console.print(f"{row.model}/{row.mode}/{row.backend}: {row.error}", markup=False,
                          highlight=False, style="dim")


def machine_line(machine: dict[str, Any]) -> str:
    return (f"{machine['processor']}, {machine['cpu_count']} CPUs, "
            f"{machine['threads']} threads, torch {machine['torch']}, "
            f"Python {machine['python']}, load avg {machine.get('load_average_1m', 'n/a')}")


def format_markdown(rows: list[Row], spec: tuple = SPEED) -> str:
    """The results as a Markdown table (also the plain-text fallback)."""
    columns = table_columns(rows, spec)
    lines = ["| " + " | ".join(h for _, h, _ in columns) + " |",
             "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r, c, f) for c, _, f in columns) + " |" for r in rows]
    return "\n".join(lines)


def write_csv(rows: list[Row], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.as_dict().items()})


def write_json(rows: list[Row], meta: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps({**meta, "results": [r.as_dict() for r in rows]}, indent=2))


def write_outputs(rows: list[Row], meta: dict[str, Any], out: Path) -> list[Path]:
    """CSV, JSON and the charts into ``out``; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "results.csv")
    write_json(rows, meta, out / "results.json")
    static = [r for r in rows if r.mode != "dynamic"]
    (out / "results.md").write_text(format_markdown(rows, SPEED) + "\n\n"
                                    + format_markdown(static, COMPILE) + "\n")
    written = [out / "results.csv", out / "results.json", out / "results.md"]
    from npu_inductor.benchmarks.charts import write_charts

    return written + write_charts(rows, out, machine_line(meta["machine"]))
