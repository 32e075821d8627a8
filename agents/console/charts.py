"""Geometry of the small inline SVG charts (bars, lines) the dashboard draws without a JS library; pure arithmetic.

A chart is drawn in an <svg> as wide as its plot: x positions are percentages
of that width (so text is never stretched), y positions are pixels. The y-axis
labels sit left of it (CSS margin, overflow visible), the x-axis labels below
the plot, and each value is one point (a column as tall as the plot) whose tip
shows in a band above the plot on hover and keyboard focus. `table` holds the
same values for the screen-reader fallback. Never queries or formats dates.
"""

import math

TIP_BAND = 26  # px above the plot where a point's tip shows: bars and lines never reach into it
PLOT_HEIGHT = 120
X_LABELS = 36  # px below the plot: tick labels, then the axis title
HEIGHT = TIP_BAND + PLOT_HEIGHT + X_LABELS
BASELINE = TIP_BAND + PLOT_HEIGHT
CHAR_PX = 7  # average width of a 12 px character: sizes a tip's box without measuring text
X_TICKS = 5


def nice_ticks(top: float, *, count: int = 4, whole: bool = True) -> list[float]:
    """0 up to a round number at or above `top` in about `count` steps of 1, 2 or 5 times a power of ten (at least
    1 when `whole`: counts and milliseconds have no fractions)."""
    if top <= 0:
        return [0, 1]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    if whole:
        step = max(step, 1)
    if float(step).is_integer():
        step = int(step)
    return [round(step * index, 10) for index in range(math.ceil(top / step - 1e-9) + 1)]


def _y(value: float, top: float) -> float:
    return round(BASELINE - PLOT_HEIGHT * value / top, 1)


def _tip(text: str, center: float) -> dict:
    """The tip's box around `text`, anchored so it stays inside the chart near either edge."""
    width = len(text) * CHAR_PX + 12
    anchor = "start" if center < 25 else "end" if center > 75 else "middle"
    box_x = {"start": 0, "middle": -width / 2, "end": -width}[anchor]
    text_x = {"start": 6, "middle": 0, "end": -6}[anchor]
    return {"text": text, "x": round(center, 2), "width": width, "box_x": round(box_x, 1), "text_x": text_x,
            "anchor": anchor}  # fmt: skip


def _axes(ticks: list[float], labels: list[str], count: int, *, y_unit: str, x_title: str) -> dict:
    """Horizontal grid lines with their values, and up to X_TICKS labelled x positions (first and last included)."""
    top = ticks[-1]
    y_ticks = [{"value": tick, "y": _y(tick, top)} for tick in ticks]
    if count > 1:
        picks = sorted({round(index * (count - 1) / (X_TICKS - 1)) for index in range(X_TICKS)})
    else:
        picks = [0] if count else []
    x_ticks = []
    for index in picks:
        center = round((index + 0.5) * 100 / count, 2)
        x_ticks.append({"x": center, "label": labels[index],
                        "anchor": "start" if index == 0 and count > 1 else "end" if index == count - 1 and count > 1
                        else "middle"})  # fmt: skip
    return {"y_ticks": y_ticks, "x_ticks": x_ticks, "y_unit": y_unit, "x_title": x_title, "baseline": BASELINE,
            "top": TIP_BAND, "plot_height": PLOT_HEIGHT, "height": HEIGHT, "title_y": HEIGHT - 4,
            "tick_label_y": BASELINE + 15}  # fmt: skip


def bar_chart(values: list[int | float], *, labels: list[str], label: str, unit: str, y_unit: str, x_title: str,
              column: str) -> dict:  # fmt: skip
    """One bar per value (labels[i] names it, e.g. its minute; `unit` is the singular of what it counts), scaled to a
    round top; the template draws them."""
    ticks = nice_ticks(max(values, default=0))
    top, count = ticks[-1], len(values)
    step = 100 / max(count, 1)
    points = []
    for index, (name, value) in enumerate(zip(labels, values, strict=True)):
        y = _y(value, top)
        text = f"{name} · {value} {unit}{'' if value == 1 else 's'}"
        points.append({"key": name, "value": value, "text": text, "x": round(index * step, 2),
                       "width": round(step, 2), "bar_x": round((index + 0.1) * step, 2),
                       "bar_width": round(step * 0.8, 2), "y": y, "height": round(BASELINE - y, 1),
                       "tip": _tip(text, (index + 0.5) * step)})  # fmt: skip
    return {"label": label, "points": points, "max": max(values, default=0), "total": sum(values),
            "axes": _axes(ticks, labels, count, y_unit=y_unit, x_title=x_title),
            "table": {"head": [column, y_unit],
                      "rows": [[name, value] for name, value in zip(labels, values, strict=True)]}}  # fmt: skip


def line_chart(series: dict[str, list[int | float]], *, labels: list[str], keys: list[str], label: str, unit: str,
               x_title: str, column: str) -> dict:  # fmt: skip
    """One polyline per named series over a shared round scale, and one point per position carrying every series'
    value (labels[i] names it, keys[i] identifies it across refreshes); the template draws them."""
    count = len(labels)
    ticks = nice_ticks(max((value for values in series.values() for value in values), default=0))
    top = ticks[-1]
    step = 100 / max(count, 1)
    lines = []
    for name, values in series.items():
        coordinates = [(round((index + 0.5) * step * 10, 1), _y(value, top) - TIP_BAND) for index, value in
                       enumerate(values)]  # fmt: skip
        lines.append({"name": name, "points": " ".join(f"{x},{round(y, 1)}" for x, y in coordinates),
                      "last": values[-1] if values else None})  # fmt: skip
    points = []
    for index, name in enumerate(labels):
        values = {series_name: values[index] for series_name, values in series.items()}
        text = f"{name} · " + " · ".join(f"{series_name} {value} {unit}" for series_name, value in values.items())
        center = round((index + 0.5) * step, 2)
        points.append({"key": keys[index], "text": text, "x": round(index * step, 2), "width": round(step, 2),
                       "center": center, "tip": _tip(text, center),
                       "marks": [{"name": n, "value": v, "y": _y(v, top)} for n, v in values.items()]})  # fmt: skip
    return {"label": label, "lines": lines, "points": points,
            "max": max((value for values in series.values() for value in values), default=0),
            "plot_width": 1000, "plot_height": PLOT_HEIGHT, "empty": not count,
            "axes": _axes(ticks, labels, count, y_unit=unit, x_title=x_title),
            "table": {"head": [column, *(f"{name} ({unit})" for name in series)],
                      "rows": [[name, *(values[index] for values in series.values())]
                               for index, name in enumerate(labels)]}}  # fmt: skip
