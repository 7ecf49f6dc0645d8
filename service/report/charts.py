"""Charts as inline SVG, drawn here so the report needs no script and no network.

Every label passes through `markupsafe.escape`, in text and in attributes alike, so a tag
value such as `<script>` stays text. Geometry uses Decimal like the money it draws; output
is rounded to 0.1 px, so the same numbers always give the same bytes. Negative values
(credits) are not drawn in stacks; the tables show them.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import ROUND_HALF_UP, Decimal

from markupsafe import Markup, escape

from service.core.units import NO_CURRENCY
from service.report.model import Chart

# Okabe–Ito and Tableau hues: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#332288",
           "#117733", "#882255", "#44AA99", "#999933")
GREYS = {"other": "#9E9E9E", "unallocated": "#C8C8C8"}  # what belongs to no one named stays grey
WIDTH = 960
FONT = 'font-family="system-ui, sans-serif" font-size="12"'
CHAR_PX = 7  # about a character's advance at that size (a little over the average): a label cut to it fits its slot


def _px(value: Decimal | int) -> str:
    return str(Decimal(value).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))


def _symbol(currency: str) -> str:
    return "$" if currency == "USD" else f"{currency or NO_CURRENCY} "


def axis_label(value: Decimal, currency: str) -> str:
    """Compact: $0, $500, $2.5k, $12.5k, $1.2M; a grid line between whole units (a grid of cents,
    where rounding would label every line $0) in cents or finer: $0.05, $2.50, $0.0002; below 0
    with the sign the amounts take: −$0.05."""
    if value < 0:
        return "−" + axis_label(-value, currency)
    for divisor, suffix in ((Decimal(1_000_000), "M"), (Decimal(1000), "k")):
        if abs(value) >= divisor:
            short = (value / divisor).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP).normalize()
            return f"{_symbol(currency)}{short:f}{suffix}"
    if value != value.to_integral_value():  # a grid step's multiple: exact, no rounding needed
        return f"{_symbol(currency)}{value:.{max(2, -value.normalize().as_tuple().exponent)}f}"
    return f"{_symbol(currency)}{value.quantize(Decimal(1), rounding=ROUND_HALF_UP)}"


def amount_label(value: Decimal, currency: str) -> str:
    """Whole currency units with separators, e.g. $1,709 (the tables hold the cents); an amount
    that is not 0 but would show as 0 (a credit of −0.37) in cents: −$0.37, and under half a cent
    to its first significant place: −$0.004."""
    sign = "−" if value < 0 else ""
    whole = abs(value).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    if value and not whole:
        shown = abs(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        if not shown:
            shown = abs(value).quantize(Decimal(1).scaleb(abs(value).adjusted()), rounding=ROUND_HALF_UP)
        return f"{sign}{_symbol(currency)}{shown}"
    return f"{sign}{_symbol(currency)}{whole:,}"


def colour(index: int, label: str) -> str:
    return GREYS.get(label) or PALETTE[index % len(PALETTE)]


def nice_step(top: Decimal) -> Decimal:
    """A round grid step (1, 2, 2.5 or 5 × 10^n) giving four to six lines up to `top`."""
    if top <= 0:
        return Decimal(1)
    rough = top / 5
    magnitude = Decimal(10) ** (rough.adjusted())
    for factor in (1, 2, Decimal("2.5"), 5, 10):
        if magnitude * factor >= rough:
            return magnitude * factor
    return magnitude * 10


def render(chart: Chart) -> Markup:
    return {"stacked": stacked_bars, "lines": lines, "bars": bars, "budget": budget_bars}[chart.kind](chart)


PLOT = {"left": 70, "right": 10, "top": 30, "height": 240}


def _frame(chart: Chart, peak: Decimal) -> tuple[list[str], Decimal, Decimal]:
    """Open the SVG, draw the title, the value grid and the category labels; return the
    output so far, the slot width per category and the pixels per currency unit."""
    left, right, top, plot_h = PLOT["left"], PLOT["right"], PLOT["top"], PLOT["height"]
    height = top + plot_h + 40 + 20 * ((len(chart.series) + 3) // 4)
    step = nice_step(peak)
    y_max = step * ((peak / step).to_integral_value(rounding="ROUND_CEILING") or 1)
    slot = Decimal(WIDTH - left - right) / max(len(chart.categories), 1)
    scale = Decimal(plot_h) / y_max
    out = [_open(height, chart.title), _title(chart.title)]
    value = Decimal(0)
    while value <= y_max:
        y = top + plot_h - value * scale
        out.append(f'<line x1="{left}" x2="{WIDTH - right}" y1="{_px(y)}" y2="{_px(y)}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{left - 6}" y="{_px(y + 4)}" text-anchor="end" fill="#555">'
                   f'{escape(axis_label(value, chart.currency))}</text>')
        value += step
    label_every = max(1, len(chart.categories) // 10)
    fits = max(int(slot * label_every / CHAR_PX) - 1, 2)  # characters a label may take before it meets the next
    for i, category in enumerate(chart.categories):
        if i % label_every == 0:
            shown = category[5:] if len(category) == 10 else category  # a day: MM-DD
            if len(shown) > fits:  # a commitment's name: cut, the whole name in its tooltip
                shown = shown[:fits - 1] + "…"
            out.append(f'<text x="{_px(left + slot * i + slot / 2)}" y="{top + plot_h + 16}" text-anchor="middle" '
                       f'fill="#555"><title>{escape(category)}</title>{escape(shown)}</text>')
    out.append(_legend(list(chart.series), top + plot_h + 36))
    return out, slot, scale


def stacked_bars(chart: Chart) -> Markup:
    credits = sum((v for series in chart.series.values() for v in series if v is not None and v < 0), Decimal(0))
    if credits:  # a stack draws charges only: the title says what it leaves out (the tables net it)
        chart = replace(chart, title=f"{chart.title}; credits not drawn: {amount_label(credits, chart.currency)}")
    n = len(chart.categories)
    totals = [sum((max(s[i], Decimal(0)) for s in chart.series.values()), Decimal(0)) for i in range(n)]
    out, slot, scale = _frame(chart, max(totals, default=Decimal(0)))
    for i, category in enumerate(chart.categories):
        x, base = PLOT["left"] + slot * i, Decimal(PLOT["top"] + PLOT["height"])
        for index, (label, values) in enumerate(chart.series.items()):
            amount = max(values[i], Decimal(0))
            if amount == 0:
                continue
            base -= amount * scale
            tip = f"{category} · {label}: {amount_label(values[i], chart.currency)}"
            out.append(f'<rect x="{_px(x + 1)}" y="{_px(base)}" width="{_px(max(slot - 2, Decimal(1)))}" '
                       f'height="{_px(amount * scale)}" fill="{colour(index, label)}"><title>{escape(tip)}</title>'
                       f'</rect>')
    out.append("</svg>")
    return Markup("".join(out))


def lines(chart: Chart) -> Markup:
    """One line per series; a None value (e.g. a day still to come) leaves a gap at the end. The
    first series is drawn last, on top: a plan's actual lying on its planned line stays in sight."""
    values = [v for series in chart.series.values() for v in series if v is not None]
    out, slot, scale = _frame(chart, max([max(v, Decimal(0)) for v in values], default=Decimal(0)))
    bottom = Decimal(PLOT["top"] + PLOT["height"])
    for index, (label, series) in reversed(list(enumerate(chart.series.items()))):
        points = " ".join(f"{_px(PLOT['left'] + slot * i + slot / 2)},{_px(bottom - max(v, Decimal(0)) * scale)}"
                          for i, v in enumerate(series) if v is not None)
        last = next((v for v in reversed(series) if v is not None), None)
        tip = f"{label}: {amount_label(last, chart.currency)}" if last is not None else label
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour(index, label)}" stroke-width="2">'
                   f'<title>{escape(tip)}</title></polyline>')
    out.append("</svg>")
    return Markup("".join(out))


def bars(chart: Chart) -> Markup:
    (values,) = chart.series.values() if chart.series else ([],)
    row_h, label_w, top = 24, 240, 30
    height = top + row_h * max(len(values), 1) + 10
    largest = max((abs(v) for v in values), default=Decimal(0)) or Decimal(1)
    scale = Decimal(WIDTH - label_w - 110) / largest
    out = [_open(height, chart.title), _title(chart.title)]
    for i, (category, value) in enumerate(zip(chart.categories, values)):
        y = top + row_h * i
        shown = category if len(category) <= 34 else category[:33] + "…"
        out.append(f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end" fill="#222">'
                   f'<title>{escape(category)}</title>{escape(shown)}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 4}" width="{_px(max(abs(value) * scale, Decimal(1)))}" height="16" '
                   f'fill="{colour(0, category)}"><title>{escape(category)}: '
                   f'{escape(amount_label(value, chart.currency))}</title></rect>')
        out.append(f'<text x="{_px(label_w + abs(value) * scale + 6)}" y="{y + 16}" fill="#222">'
                   f'{escape(amount_label(value, chart.currency))}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def budget_bars(chart: Chart) -> Markup:
    """One row per budget, in % of its amount: actual as a bar, the forecast as an outline with its
    low–high band as a line, the warning lines as ticks, 100% as a dark rule."""
    row_h, label_w, top, right = 30, 200, 30, 220
    s = chart.series
    n = len(chart.categories)
    peak = max([Decimal(100)] + [max(v, Decimal(0)) for key in ("actual", "forecast high") for v in s[key]])
    scale = Decimal(WIDTH - label_w - right) / peak
    out = [_open(top + row_h * max(n, 1) + 10, chart.title), _title(chart.title)]

    def x(pct: Decimal) -> str:
        return _px(label_w + max(pct, Decimal(0)) * scale)

    for i, name in enumerate(chart.categories):
        y = top + row_h * i
        actual, forecast = s["actual"][i], s["forecast"][i]
        colour_ = "#B42318" if forecast >= 100 else "#0072B2"
        out.append(f'<text x="{label_w - 8}" y="{y + 18}" text-anchor="end" fill="#222">{escape(name)}</text>')
        out.append(f'<rect x="{label_w}" y="{y + 6}" width="{_px(max(forecast, Decimal(0)) * scale)}" height="16" '
                   f'fill="none" stroke="{colour_}" stroke-dasharray="4 2"><title>{escape(name)} forecast: '
                   f'{forecast:.0f}%</title></rect>')
        out.append(f'<rect x="{label_w}" y="{y + 6}" width="{_px(max(actual, Decimal(0)) * scale)}" height="16" '
                   f'fill="{colour_}"><title>{escape(name)} used: {actual:.0f}%</title></rect>')
        out.append(f'<line x1="{x(s["forecast low"][i])}" x2="{x(s["forecast high"][i])}" y1="{y + 26}" '
                   f'y2="{y + 26}" stroke="{colour_}" stroke-width="2"/>')
        for key, values in s.items():
            if key.startswith("line ") and values[i] is not None:
                out.append(f'<line x1="{x(values[i])}" x2="{x(values[i])}" y1="{y + 3}" y2="{y + 27}" '
                           f'stroke="{"#222" if values[i] == 100 else "#888"}"><title>{escape(key)}</title></line>')
        out.append(f'<text x="{x(max(actual, forecast, s["forecast high"][i]) + 2)}" y="{y + 18}" fill="#222">'
                   f'{actual:.0f}% used, forecast {forecast:.0f}%</text>')
    out.append("</svg>")
    return Markup("".join(out))


def _open(height: int, title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" '
            f'viewBox="0 0 {WIDTH} {height}" width="100%" {FONT}>')


def _title(title: str) -> str:
    return f'<text x="0" y="16" font-weight="600" fill="#222">{escape(title)}</text>'


def _legend(labels: list[str], y: int) -> str:
    out = []
    for index, label in enumerate(labels):
        x, row = 70 + (index % 4) * 220, y + (index // 4) * 20
        shown = label if len(label) <= 28 else label[:27] + "…"
        out.append(f'<rect x="{x}" y="{row - 10}" width="12" height="12" fill="{colour(index, label)}"/>'
                   f'<text x="{x + 18}" y="{row}" fill="#222"><title>{escape(label)}</title>{escape(shown)}</text>')
    return "".join(out)
