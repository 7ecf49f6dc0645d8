"""The report's SVG charts stay legible with real labels: a commitment's long name (AWS, Azure and
Google name them `ComputeSavingsPlan-1yr-NoUpfront-…`) never runs into its neighbour's."""

from __future__ import annotations

import re
from decimal import Decimal
from html import unescape

from service.core.units import shown_money, usd
from service.report.charts import PLOT, amount_label, axis_label, render
from service.report.model import Chart

AVERAGE_CHAR_PX = 6.5  # system-ui at 12 px, mixed-case Latin
NAMES = [f"ComputeSavingsPlan-1yr-NoUpfront-examplecorp-{i:03d}" for i in range(37)]


def category_labels(svg: str) -> list[tuple[float, str, str]]:
    """(x, shown text, tooltip) of each category label under the plot."""
    baseline = PLOT["top"] + PLOT["height"] + 16
    return [(float(x), unescape(shown), unescape(tip)) for x, tip, shown in re.findall(
        rf'<text x="([0-9.]+)" y="{baseline}" text-anchor="middle" fill="#555"><title>(.*?)</title>(.*?)</text>', svg)]


def test_long_category_names_are_cut_to_their_slot_and_kept_whole_in_the_tooltip():
    chart = Chart("stacked", "Commitments (USD): used and unused", NAMES,
                  {"used": [Decimal(80)] * 37, "unused": [Decimal(40)] * 37}, "USD")
    labels = category_labels(str(render(chart)))
    assert len(labels) == 13  # every third of 37
    for (x, shown, _), (next_x, next_shown, _) in zip(labels, labels[1:]):
        assert (len(shown) + len(next_shown)) / 2 * AVERAGE_CHAR_PX < next_x - x  # centred labels do not meet
    assert [tip for _, _, tip in labels] == NAMES[::3]
    assert all(shown.endswith("…") and tip.startswith(shown[:-1]) for _, shown, tip in labels)


def test_day_labels_stay_whole():
    days = [f"2026-05-{d:02d}" for d in range(1, 31)]
    chart = Chart("stacked", "Daily spend by team (USD)", days, {"a": [Decimal(1)] * 30}, "USD")
    assert [shown for _, shown, _ in category_labels(str(render(chart)))] == [d[5:] for d in days[::3]]


def test_a_plans_actual_on_its_planned_lines_is_drawn_over_them():
    """The demo's llama-405b plan, on plan: its actual (blue) was drawn first and both planned lines
    over it, so the page showed no actual at all; the first series is drawn last, its colour and legend
    kept."""
    days = ["2026-11-20", "2026-11-21", "2026-11-22"]
    chart = Chart("lines", "llama-405b-r1: cumulative spend vs plan (USD)", days,
                  {"actual": [Decimal(100), Decimal(200), None], "planned (low)": [Decimal(100), Decimal(200),
                   Decimal(300)], "planned (high)": [Decimal(100), Decimal(200), Decimal(301)]}, "USD")
    svg = str(render(chart))
    strokes = re.findall(r'<polyline points="[^"]*" fill="none" stroke="([^"]+)" stroke-width="2"><title>([^:]+):', svg)
    assert strokes == [("#009E73", "planned (high)"), ("#E69F00", "planned (low)"), ("#0072B2", "actual")]
    legend = re.findall(r'<rect x="[0-9]+" y="[0-9]+" width="12" height="12" fill="([^"]+)"/><text[^>]*><title>([^<]+)',
                        svg)
    assert legend == [("#0072B2", "actual"), ("#E69F00", "planned (low)"), ("#009E73", "planned (high)")]


def test_a_stack_says_the_credits_it_does_not_draw():
    """A day's credit (infra EUR -450, an untagged -2.125) drew nothing and said nothing: the bars
    read EUR 1,400 of spend where the month's net is 948.13; the title names what is left out."""
    chart = Chart("stacked", "Daily spend by team (EUR)", ["2026-06-02", "2026-06-03", "2026-06-04"],
                  {"pretrain": [Decimal("1000.25"), Decimal(0), Decimal(0)],
                   "infra": [Decimal(400), Decimal(-450), Decimal(0)],
                   "unallocated": [Decimal(0), Decimal(0), Decimal("-2.125")]}, "EUR")
    svg = str(render(chart))
    assert ">Daily spend by team (EUR); credits not drawn: −EUR 452</text>" in svg
    assert svg.count("<rect") == 2 + 3  # two bars, and the legend's three swatches
    plain = Chart("stacked", "Daily spend by team (EUR)", ["2026-06-02"], {"pretrain": [Decimal(1)]}, "EUR")
    assert "credits not drawn" not in str(render(plain))


def test_a_grid_of_cents_labels_its_lines_in_cents_not_each_dollar_0():
    """The anonymous CUR's November spends about USD 0.20 a day: its daily chart's six grid lines
    were each labelled $0, so the chart gave no scale; they read $0, $0.05 ... $0.25 now, and a grid of
    whole dollars keeps its whole labels."""
    days = ["2023-11-12", "2023-11-13"]
    small = Chart("stacked", "Daily spend by team (USD)", days, {"a": [Decimal("0.185"), Decimal("0.207")]}, "USD")
    assert grid_labels(str(render(small))) == ["$0", "$0.05", "$0.10", "$0.15", "$0.20", "$0.25"]
    large = Chart("stacked", "Daily spend by team (USD)", days, {"a": [Decimal(900), Decimal(2400)]}, "USD")
    assert grid_labels(str(render(large))) == ["$0", "$500", "$1k", "$1.5k", "$2k", "$2.5k"]


def grid_labels(svg: str) -> list[str]:
    return [unescape(text) for text in re.findall(r'<text x="[0-9.]+" y="[0-9.]+" text-anchor="end" '
                                                  r'fill="#555">(.*?)</text>', svg)]


def test_a_credit_under_a_dollar_left_out_of_the_bars_is_named_in_cents_not_as_0():
    """The FOCUS sample's September: the chart's title said 'credits not drawn: −$0' of credits
    that were there; an amount under one unit is named in cents, larger ones stay whole."""
    days = ["2024-09-29", "2024-09-30"]
    chart = Chart("stacked", "Daily spend by team (USD)", days,
                  {"a": [Decimal("1.07"), Decimal("-0.374")], "b": [Decimal("-0.001"), Decimal(2)]}, "USD")
    assert ">Daily spend by team (USD); credits not drawn: −$0.38</text>" in str(render(chart))
    whole = Chart("stacked", "Daily spend by team (USD)", days, {"a": [Decimal("5.2"), Decimal("-2.6")]}, "USD")
    assert ">Daily spend by team (USD); credits not drawn: −$3</text>" in str(render(whole))


def test_an_amount_under_half_a_cent_and_a_grid_line_below_0_keep_their_figure_and_sign():
    """A credit of −0.004 was named −$0.00 (the 'named as 0' the cents were meant to end), and a
    grid line below 0 read $-0.05 beside amounts written −$0.05."""
    assert amount_label(Decimal("-0.004"), "USD") == "−$0.004"
    assert amount_label(Decimal("-0.37"), "USD") == "−$0.37" and amount_label(Decimal("0.0049"), "EUR") == "EUR 0.005"
    assert amount_label(Decimal("0.0099"), "USD") == "$0.01"
    assert axis_label(Decimal("-0.05"), "USD") == "−$0.05" and axis_label(Decimal("-2500"), "USD") == "−$2.5k"


def test_the_findings_and_demo_amounts_write_a_negative_as_the_tables_do():
    """units.usd (the findings section's note, `spendlake demo`'s waste table) wrote a credit
    $-1.00 where the report's tables write −$1.00: one money format."""
    assert usd(Decimal("-1")) == shown_money(Decimal("-1")) == "−$1.00"
    assert usd(Decimal("1234.565")) == "$1,234.57" and usd(0) == "$0.00"
