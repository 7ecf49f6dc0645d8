"""Precision, recall and days to detect of the spend-anomaly detector on synthetic series.

    python bench/anomaly_eval.py [--series 200] [--seed 7]

Each series is 70 days of daily spend: a level of $300–3,000, weekends at 55–100% of
weekdays, a trend of −0.5% to +1% of the level a day, and multiplicative Gaussian noise
with σ 3–8%. The detector (rules.spend_anomaly.detect, default thresholds: impact ≥ $100,
≥ 20% of expected, actual ≥ $50) scans days 42–69, so every day has four weeks of history.
Kinds, `--series` of each:

- quiet: nothing injected;
- spike: 1–2 days at +60% to +200% of the expected level, starting on a day in 45–65;
- shift: from a day in 45–65 on, the level rises by 40–150% and stays;
- ramp: from a day in 45–55 on, the level rises by 2–4% of it a day (a slow leak).

Counting: an injected event is detected when an episode starts on or after its first day
and within 7 days of it (recall; days to detect = episode start − event start). An
episode is a true positive when it starts inside the event's effect (the spike's days;
from a shift or ramp on); every other episode, quiet series included, is a false positive
(precision, per kind, quiet series' false alarms reported on their own line and added to
every kind's count in the overall line).
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rules.spend_anomaly import SpendAnomalyConfig, Thresholds, detect  # noqa: E402

DAYS = 70
SCAN_FROM = 42
FIRST = date(2026, 1, 5)  # a Monday
KINDS = ("quiet", "spike", "shift", "ramp")


@dataclass
class Case:
    kind: str
    series: dict[date, Decimal]
    start: int | None  # day index of the event
    effect_end: int  # last day index of the effect (inclusive)


def make_case(kind: str, rng: random.Random) -> Case:
    level = rng.uniform(300, 3000)
    weekend = rng.uniform(0.55, 1.0)
    trend = rng.uniform(-0.005, 0.01)
    noise = rng.uniform(0.03, 0.08)
    start, end = None, DAYS - 1
    spike_days, lift, slope = 0, 0.0, 0.0
    if kind == "spike":
        start, spike_days, lift = rng.randint(45, 65), rng.randint(1, 2), rng.uniform(0.6, 2.0)
        end = start + spike_days - 1
    elif kind == "shift":
        start, lift = rng.randint(45, 65), rng.uniform(0.4, 1.5)
    elif kind == "ramp":
        start, slope = rng.randint(45, 55), rng.uniform(0.02, 0.04)
    series = {}
    for n in range(DAYS):
        day = FIRST + timedelta(n)
        base = level * (1 + trend * n) * (weekend if day.weekday() >= 5 else 1)
        factor = 1.0
        if start is not None and n >= start:
            if kind == "spike" and n <= end:
                factor += lift
            elif kind == "shift":
                factor += lift
            elif kind == "ramp":
                factor += slope * (n - start + 1)
        value = max(base * factor * (1 + rng.gauss(0, noise)), 0)
        series[day] = Decimal(f"{value:.2f}")
    return Case(kind, series, start, end)


def evaluate(cases: list[Case], thresholds: Thresholds) -> dict[str, dict]:
    scan = [FIRST + timedelta(n) for n in range(SCAN_FROM, DAYS)]
    stats = {kind: {"events": 0, "detected": 0, "tp": 0, "fp": 0, "delays": []} for kind in KINDS}
    for case in cases:
        s = stats[case.kind]
        starts = [(e.start - FIRST).days for e in detect(case.series, scan, FIRST, thresholds)]
        if case.start is not None:
            s["events"] += 1
            hits = [n for n in starts if case.start <= n < case.start + 7]
            if hits:
                s["detected"] += 1
                s["delays"].append(min(hits) - case.start)
        for n in starts:
            inside = case.start is not None and case.start <= n <= case.effect_end
            s["tp" if inside else "fp"] += 1
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, default=200, help="series of each kind")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    cfg = SpendAnomalyConfig()
    thresholds = Thresholds(cfg.min_impact_usd, cfg.min_impact_pct, cfg.min_daily_cost, cfg.band_sigmas)
    cases = [make_case(kind, rng) for kind in KINDS for _ in range(args.series)]
    stats = evaluate(cases, thresholds)
    quiet_fp = stats["quiet"]["fp"]
    print(f"{args.series} series per kind, seed {args.seed}, default thresholds "
          f"(${cfg.min_impact_usd}, {cfg.min_impact_pct}%, ${cfg.min_daily_cost}, {cfg.band_sigmas}σ band)")
    print(f"quiet: {quiet_fp} false alarm(s) in {args.series} series × {DAYS - SCAN_FROM} days")
    print(f"{'kind':<6} {'precision':>9} {'with quiet':>10} {'recall':>7} {'median days to detect':>22}")
    for kind in KINDS[1:]:
        s = stats[kind]
        found = s["tp"] + s["fp"]
        precision = s["tp"] / found if found else float("nan")
        with_quiet = s["tp"] / (found + quiet_fp) if found + quiet_fp else float("nan")
        recall = s["detected"] / s["events"] if s["events"] else float("nan")
        delay = median(s["delays"]) if s["delays"] else float("nan")
        print(f"{kind:<6} {precision:>9.3f} {with_quiet:>10.3f} {recall:>7.3f} {delay:>22}")


if __name__ == "__main__":
    main()
