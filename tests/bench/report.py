"""The suite's outputs: the printed table, bench/results/<mode>.json, and PNG plots."""

from __future__ import annotations

import json
import math
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.bench.stats import Figure, Row


def _fmt(v: float) -> str:
    if math.isnan(v) or math.isinf(v):
        return str(v)
    a = abs(v)
    if a >= 1e5:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def _mmm(f: Figure | None) -> str:
    if f is None:
        return "-"
    return f"{_fmt(f.min)} / {_fmt(f.median)} / {_fmt(f.max)}"


def table(rows: Sequence[Row]) -> str:
    """Markdown table: figure, kafkad and baseline as min / median / max, ratio, target and verdict."""
    head = "| section | figure | kafkad min / med / max | baseline | baseline min / med / max | ratio min / med / max | target | |"
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        tgt = "-"
        if r.target is not None:
            tgt = f"{'ratio ' if r.target_on_ratio else ''}{r.target}"
        lines.append(
            f"| {r.section} | {r.label} | {_mmm(r.value)} | {r.baseline_name or '-'} | {_mmm(r.baseline)} | "
            f"{_mmm(r.ratio)} | {tgt} | {r.verdict.value} |"
        )
    return "\n".join(lines)


def write_json(
    path: Path, mode: str, rows: Sequence[Row], series: dict[str, Any], meta: dict[str, Any]
) -> None:
    out = {
        "mode": mode,
        "machine": {"python": platform.python_version(), "platform": platform.platform(), **meta},
        "rows": [r.as_json() for r in rows],
        "series": series,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, default=float) + "\n")


def plots(out_dir: Path, mode: str, series: dict[str, Any]) -> list[Path]:
    """throughput vs record size, throughput vs partitions, latency percentiles vs rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    produce = series.get("produce", {})
    parts = series.get("partitions", {})
    if produce or parts:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
        # Raw batches send identical bytes to both servers; confluent rows are client-bound (docs/performance.md).
        for cfg in ("acks=1 x4 raw 16KiB batches", "acks=-1 x4 raw 16KiB batches", "acks=1 x4 linger5"):
            pts = sorted((v["size"], v) for k, v in produce.items() if k.endswith(cfg))
            if pts:
                xs = [p[0] for p in pts]
                ax1.plot(xs, [p[1]["kafkad_mb_s"] for p in pts], "o-", label=f"kafkad {cfg}")
                ax1.plot(xs, [p[1]["sink_mb_s"] for p in pts], "x--", label=f"sink {cfg}")
        ax1.set_xscale("log")
        ax1.set_xlabel("record size (bytes)")
        ax1.set_ylabel("MB/s (median)")
        ax1.set_title("produce throughput vs record size")
        ax1.legend(fontsize=7)
        if parts:
            xs = sorted(int(k) for k in parts)
            ax2.plot(xs, [parts[str(x)]["kafkad_rec_s"] for x in xs], "o-", label="kafkad")
            ax2.plot(xs, [parts[str(x)]["sink_rec_s"] for x in xs], "x--", label="sink")
            ax2.set_xscale("log")
            ax2.set_xlabel("partitions")
            ax2.set_ylabel("records/s (median), 100 B, 4 producers")
            ax2.set_title("produce vs partitions (confluent, client-bound)")
            ax2.legend(fontsize=7)
        fig.tight_layout()
        p = out_dir / f"{mode}-throughput.png"
        fig.savefig(p, dpi=100)
        plt.close(fig)
        written.append(p)
    lat = series.get("latency")
    if lat:
        fig, ax = plt.subplots(figsize=(6, 4))
        rates = sorted(int(r) for r in lat["by_rate"])
        for qi, q in enumerate(lat["quantiles"]):
            ax.plot(
                rates, [lat["by_rate"][str(r)]["e2e"][qi] for r in rates], "o-", label=f"kafkad e2e p{q:g}"
            )
            ax.plot(
                rates,
                [lat["by_rate"][str(r)]["sink_ack"][qi] for r in rates],
                "x--",
                label=f"sink ack p{q:g}",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("msg/s")
        ax.set_ylabel("ms (median of runs)")
        ax.set_title("end-to-end latency vs rate")
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = out_dir / f"{mode}-latency.png"
        fig.savefig(p, dpi=100)
        plt.close(fig)
        written.append(p)
    return written
