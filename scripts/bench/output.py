"""What the suite prints: one line per figure beside its baseline, kept in RESULTS for the JSON."""

from __future__ import annotations

SEED = 2026
RESULTS: list[dict] = []  # every printed line, for docs/BENCHMARKS.md and the chart


def line(
    name: str,
    figure: float,
    baseline: float,
    unit: str,
    *,
    target: str = "",
    holds: bool | None = None,
    ratio: float | None = None,
    note: str = "",
) -> None:
    ratio = figure / baseline if ratio is None and baseline else ratio
    verdict = "" if holds is None else ("held" if holds else "MISSED")
    RESULTS.append(
        {
            "name": name,
            "figure": figure,
            "baseline": baseline,
            "unit": unit,
            "ratio": ratio,
            "target": target,
            "verdict": verdict,
            "note": note,
        }
    )
    ratio_text = f"{ratio:7.2f}x" if ratio is not None else "       "
    print(
        f"{name:<44} {figure:>10.1f} {baseline:>10.1f} {unit:<9} {ratio_text}  {target:<16} {verdict:<6} {note}",
        flush=True,
    )


def header(title: str) -> None:
    print(
        f"\n== {title}\n{'what':<44} {'figure':>10} {'baseline':>10} {'unit':<9} {'ratio':>8}  "
        f"{'target':<16} {'':<6} note",
        flush=True,
    )


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]
