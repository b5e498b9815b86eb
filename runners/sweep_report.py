"""`task=sweep_report dir=<multirun dir>`: one table (Markdown + CSV) and plots (PNG) from every job's scores.json."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig

from common.errors import ClinprogError


class SweepReportError(ClinprogError):
    """A multirun folder that cannot be reported (no jobs, unreadable scores)."""


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else k, v, out)
    elif isinstance(value, int | float) or value is None:
        out[prefix] = value


def collect(sweep_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    rows, params = [], []
    for scores_path in sorted(sweep_dir.glob("*/scores.json"), key=lambda p: (len(p.parent.name), p.parent.name)):
        job = scores_path.parent
        overrides_path = job / ".hydra" / "overrides.yaml"
        overrides = yaml.safe_load(overrides_path.read_text()) if overrides_path.exists() else []
        row: dict[str, Any] = {"job": job.name}
        for item in overrides or []:
            key, _, value = item.partition("=")
            key = key.lstrip("+~")
            try:
                row[key] = float(value) if "." in value or "e" in value.lower() else int(value)
            except ValueError:
                row[key] = value
            if key not in params:
                params.append(key)
        metrics: dict[str, Any] = {}
        _flatten("", json.loads(scores_path.read_text()), metrics)
        row.update(metrics)
        rows.append(row)
    return rows, params


def sweep_report(cfg: DictConfig) -> None:
    if not cfg.get("dir"):
        raise SweepReportError("task=sweep_report needs dir=<a multirun folder>")
    sweep_dir = Path(cfg.dir)
    rows, params = collect(sweep_dir)
    if not rows:
        raise SweepReportError(f"no */scores.json under {sweep_dir}")
    varying = [p for p in params if len({r.get(p) for r in rows}) > 1]
    metric = "objective" if any("objective" in r for r in rows) else next(k for k in rows[0] if k not in params and k != "job")
    columns = ["job", *params, metric] + [k for k in rows[0] if k not in (*params, metric, "job")][:8]
    with (sweep_dir / "sweep_report.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r.get(c):.4f}" if isinstance(r.get(c), float) else str(r.get(c, ""))
                                       for c in columns) + " |")
    (sweep_dir / "sweep_report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    pngs = plot(rows, varying, metric, sweep_dir)
    for png in pngs:
        print(f"plot: {png}")
    from reports.html import esc, page, png_inline, table

    best = max((r for r in rows if isinstance(r.get(metric), int | float)), key=lambda r: r[metric], default=None)
    body = (f"<h1>Sweep {esc(sweep_dir)}</h1><p>{len(rows)} jobs; swept: {esc(', '.join(varying) or 'nothing')}; "
            f"best {esc(metric)}: {esc(best and round(best[metric], 4))} (job {esc(best and best['job'])})</p>"
            + "".join(png_inline(p, f"{metric} over the swept values") for p in pngs)
            + table(columns, [[r.get(c) for c in columns] for r in rows]))
    (sweep_dir / "sweep_report.html").write_text(page(f"clinprog sweep {sweep_dir.name}", body, script=""),
                                                 encoding="utf-8")
    print(f"html: {sweep_dir / 'sweep_report.html'}")


def plot(rows: list[dict[str, Any]], varying: list[str], metric: str, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    numeric = [p for p in varying if all(isinstance(r.get(p), int | float) for r in rows)]
    made = []
    if len(numeric) >= 2:
        x, y = numeric[0], numeric[1]
        xs, ys = sorted({r[x] for r in rows}), sorted({r[y] for r in rows})
        grid = [[float("nan")] * len(xs) for _ in ys]
        for r in rows:
            if r.get(metric) is not None:
                grid[ys.index(r[y])][xs.index(r[x])] = r[metric]
        fig, ax = plt.subplots(figsize=(1.4 * len(xs) + 2, 1.0 * len(ys) + 2))
        im = ax.imshow(grid, cmap="viridis", origin="lower", aspect="auto")
        ax.set_xticks(range(len(xs)), [str(v) for v in xs])
        ax.set_yticks(range(len(ys)), [str(v) for v in ys])
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if v == v:
                    ax.text(j, i, f"{v:.3f}", ha="center", va="center", color="w")
        fig.colorbar(im, label=metric)
        ax.set_title(metric)
        path = out / "sweep_heatmap.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        made.append(path)
    for p in numeric[:1] if len(numeric) == 1 else []:
        # one line per combination of the other (non-numeric) swept values
        others = [v for v in varying if v != p]
        series: dict[str, list[tuple[float, float]]] = {}
        for r in rows:
            if r.get(metric) is not None:
                label = ", ".join(f"{o}={r.get(o)}" for o in others) or metric
                series.setdefault(label, []).append((r[p], r[metric]))
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, pts in series.items():
            pts.sort()
            ax.plot([a for a, _ in pts], [b for _, b in pts], marker="o", label=label)
        if len(series) > 1:
            ax.legend(fontsize=7)
        ax.set_xlabel(p)
        ax.set_ylabel(metric)
        path = out / f"sweep_{p.replace('.', '_')}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        made.append(path)
    return made
