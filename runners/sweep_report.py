"""`task=sweep_report dir=<multirun dir>`: one table (Markdown + CSV) and plots (PNG) from every job's scores.json."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig

from common.errors import ClinprogError
from common.flatten import flatten
from common.multirun import MARKER, failed_jobs

MARKDOWN_METRICS = 12   # metric columns in the Markdown table besides the objective; the CSV has them all
HEADLINE_SUFFIXES = ("overall_score", "micro_f1")


class SweepReportError(ClinprogError):
    """A multirun folder that cannot be reported (no jobs, unreadable scores)."""


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
        row.update({k: v for k, v in flatten(json.loads(scores_path.read_text())).items()  # the numeric leaves
                    if isinstance(v, int | float) and not isinstance(v, bool) or v is None})
        rows.append(row)
    return rows, params


def failures(sweep_dir: Path) -> list[str]:
    """One line per job that failed (its failed.json marker): the job, its overrides and its error line."""
    lines = []
    for folder, record in failed_jobs(sweep_dir.glob(f"*/{MARKER}")):
        if record is None:
            lines.append(f"job {folder.name} failed ({folder / MARKER} cannot be read)")
        else:
            lines.append(f"job {folder.name} ({' '.join(map(str, record.get('overrides') or []))}) failed: "
                         f"{str(record.get('error', '')).removeprefix('error: ')}")
    return lines


def sweep_report(cfg: DictConfig) -> None:
    if not cfg.get("dir"):
        raise SweepReportError("task=sweep_report needs dir=<a multirun folder>")
    sweep_dir = Path(cfg.dir)
    rows, params = collect(sweep_dir)
    failed = failures(sweep_dir)
    if not rows:
        raise SweepReportError(f"no */scores.json under {sweep_dir}" + (f"; {len(failed)} jobs failed: {failed[0]}"
                                                                         if failed else ""))
    varying = [p for p in params if len({r.get(p) for r in rows}) > 1]
    metrics = list(dict.fromkeys(k for r in rows for k in r if k not in params and k != "job"))
    if not metrics:
        raise SweepReportError(f"{sweep_dir}: the jobs' scores.json hold no numbers to report")
    metric = "objective" if "objective" in metrics else metrics[0]
    with (sweep_dir / "sweep_report.csv").open("w", newline="") as fh:  # every metric of every job
        writer = csv.DictWriter(fh, fieldnames=["job", *params, *metrics])
        writer.writeheader()
        writer.writerows(rows)
    shown, hidden = table_metrics(rows, metrics, metric)
    fixed = [p for p in params if p not in varying]
    columns = ["job", *varying, *shown]
    lines = [f"fixed in every job: {', '.join(f'{p}={rows[0].get(p)}' for p in fixed)}", ""] if fixed else []
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(f"{r.get(c):.4f}" if isinstance(r.get(c), float) else str(r.get(c, ""))
                                       for c in columns) + " |")
    constant = len(metrics) - len(shown) - hidden
    if hidden or constant:
        lines += ["", f"sweep_report.csv has every metric: {hidden} more that vary across jobs and {constant} that "
                      "do not"]
    # e.g. ArchEHR without a key: its objective is Subtask 1, which an evidence threshold cannot move
    flat = [f"{metric} is {rows[0].get(metric)} in every job: the swept settings do not change what it measures on "
            "these inputs (with no key, what is scored may not be what was swept)"] \
        if len(rows) > 1 and varying and len({r.get(metric) for r in rows}) == 1 else []
    lines += ["", *flat] if flat else []
    if failed:  # jobs without scores are not rows of the table: say which, and why
        lines += ["", f"{len(failed)} of {len(rows) + len(failed)} jobs failed (not in the table):",
                  *(f"- {line}" for line in failed)]
    (sweep_dir / "sweep_report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    pngs = plot(rows, varying, metric, sweep_dir)
    for png in pngs:
        print(f"plot: {png}")
    from common.html import esc, page, png_inline, table

    best = max((r for r in rows if isinstance(r.get(metric), int | float)), key=lambda r: r[metric], default=None)
    body = (f"<h1>Sweep {esc(sweep_dir)}</h1><p>{len(rows)} jobs scored"
            + (f", {len(failed)} failed" if failed else "")
            + f"; swept: {esc(', '.join(varying) or 'nothing')}; "
            f"best {esc(metric)}: {esc(best and round(best[metric], 4))} (job {esc(best and best['job'])})</p>"
            + "".join(f"<p class=bad>{esc(line)}</p>" for line in failed)
            + "".join(f"<p class=warn>{esc(line)}</p>" for line in flat)
            + "".join(png_inline(p, f"{metric} over the swept values") for p in pngs)
            + table(columns, [[r.get(c) for c in columns] for r in rows]))
    (sweep_dir / "sweep_report.html").write_text(page(f"clinprog sweep {sweep_dir.name}", body, script=""),
                                                 encoding="utf-8")
    print(f"html: {sweep_dir / 'sweep_report.html'}")


def table_metrics(rows: list[dict[str, Any]], metrics: list[str], objective: str,
                  limit: int = MARKDOWN_METRICS) -> tuple[list[str], int]:
    """The objective, then the metrics that vary across jobs: headline ones first (top-level scores and each part's
    overall score), then the rest in scores.json order."""
    varying = [m for m in metrics if m != objective and len({r.get(m) for r in rows}) > 1]
    rank = [[m for m in varying if "." not in m]] + [[m for m in varying if "." in m and m.endswith(suffix)]
                                                      for suffix in HEADLINE_SUFFIXES]
    headline = [m for group in rank for m in group]
    ordered = headline + [m for m in varying if m not in headline]
    return [objective, *ordered[:limit]], max(len(ordered) - limit, 0)


def plot(rows: list[dict[str, Any]], varying: list[str], metric: str, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    numeric = [p for p in varying if all(isinstance(r.get(p), int | float) for r in rows)]
    made: list[tuple[Any, Path]] = []
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
        made.append((fig, out / "sweep_heatmap.png"))
    elif numeric:  # one line per combination of the other (non-numeric) swept values
        p = numeric[0]
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
        made.append((fig, out / f"sweep_{p.replace('.', '_')}.png"))
    for fig, path in made:
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return [path for _, path in made]
