"""Geometry of the small inline SVG charts (bars, lines) the dashboard draws without a JS library; pure arithmetic."""

WIDTH, HEIGHT = 600, 120


def bar_chart(values: list[int | float], *, label: str) -> dict:
    """One bar per value, scaled to the largest; the template draws <rect>s."""
    top = max(values, default=0) or 1
    step = WIDTH / max(len(values), 1)
    bars = []
    for index, value in enumerate(values):
        height = round(HEIGHT * value / top, 1)
        bars.append({"x": round(index * step, 1), "y": round(HEIGHT - height, 1), "width": round(step * 0.8, 1),
                     "height": height, "value": value})  # fmt: skip
    return {"label": label, "bars": bars, "max": max(values, default=0), "width": WIDTH, "height": HEIGHT,
            "total": sum(values)}  # fmt: skip


def line_chart(series: dict[str, list[int | float]], *, label: str) -> dict:
    """One polyline per named series over a shared scale; the template draws <polyline>s."""
    top = max((value for values in series.values() for value in values), default=0) or 1
    lines = []
    for name, values in series.items():
        if len(values) == 1:  # one point draws nothing: span the chart at its value
            values_at = [(0.0, values[0]), (float(WIDTH), values[0])]
        else:
            step = WIDTH / max(len(values) - 1, 1)
            values_at = [(index * step, value) for index, value in enumerate(values)]
        points = " ".join(f"{round(x, 1)},{round(HEIGHT - HEIGHT * value / top, 1)}" for x, value in values_at)
        lines.append({"name": name, "points": points, "last": values[-1] if values else None})
    return {"label": label, "lines": lines, "max": max((v for vs in series.values() for v in vs), default=0),
            "width": WIDTH, "height": HEIGHT, "empty": not any(series.values())}  # fmt: skip
