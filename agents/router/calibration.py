"""Confidence calibration: the fused raw confidence -> how often decisions that confident were right.

`manage.py route_cases CASES.jsonl --calibrate` routes labelled cases with the
confidence gate open (so every decision is shown as the router read it), bins
the raw confidences, fits a monotone map (pool-adjacent-violators over the bins)
and writes calibration.json beside this module: the table, the map, and the
minimum confidence derived from it. A decision is right when its case passes and
it reads or writes as the case expects. The gate only matters for writes, so the
minimum is the calibrated value of the lowest bin from which the write decisions
are right at least TARGET_PRECISION of the time, read from the same monotone fit over
the writes alone (raised above any lower bin the fit of all decisions pooled with it). settings.TOOLHUB_MIN_CONFIDENCE
defaults to that value. The table of December 2026 is in bench/results/2026-12-benchmark-notes.md.
"""

import bisect
import contextlib
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypedDict

TABLE_FILE = Path(__file__).with_name("calibration.json")
BIN_EDGES = (0.0, 0.3, 0.45, 0.6, 0.7, 0.8, 0.9, 1.0001)
TARGET_PRECISION = 0.9


@dataclass(frozen=True)
class Bin:
    low: float
    high: float
    cases: int
    right: int

    @property
    def accuracy(self) -> float | None:
        return self.right / self.cases if self.cases else None


class TableBin(TypedDict):
    raw_from: float
    raw_to: float
    cases: int
    right: int
    writes: int
    writes_right: int
    calibrated: float | None


class Table(TypedDict):
    """calibration.json: what `fit` returns (read back from JSON, `points` are lists rather than tuples)."""

    target_precision: float
    bins: list[TableBin]
    points: Sequence[Sequence[float]]
    min_confidence: float
    samples: int


def fit(samples: list[tuple[float, bool, bool]]) -> Table:
    """The calibration table for (raw confidence, decision right, decision writes) samples."""
    bins, write_bins = [], []
    for low, high in zip(BIN_EDGES, BIN_EDGES[1:], strict=False):
        inside = [(right, writes) for raw, right, writes in samples if low <= raw < high]
        bins.append(Bin(low, min(high, 1.0), len(inside), sum(right for right, _ in inside)))
        writes = [right for right, is_write in inside if is_write]
        write_bins.append(Bin(low, min(high, 1.0), len(writes), sum(writes)))
    mapped = {i: round(value, 3) for i, value in monotone([(b.right, b.cases) for b in bins]).items()}
    points = [(bins[i].low, mapped[i]) for i in sorted(mapped)]
    # Write precision as a monotone function of the raw confidence too (the same pooling, over
    # the write decisions): the gate opens at the lowest bin whose fitted write precision reaches
    # TARGET_PRECISION. A low bin with wrong writes under a full top bin is not pooled with it
    # (pooling only joins a bin with the worse one above it), so it stays shut out; one wrong
    # write in a bin between full ones is read as the noise of a few cases, not as a wall.
    precision = monotone([(w.right, w.cases) for w in write_bins])
    # The monotone fit of all decisions may pool that bin with lower ones into one value; the gate then rises
    # to the first value above everything below it, or a bin with wrong writes would pass it too.
    lowest = len(bins)
    for i in sorted(mapped, reverse=True):
        if i in precision and precision[i] < TARGET_PRECISION:
            break
        lowest = i
    below = max((value for i, value in mapped.items() if i < lowest), default=-1.0)
    above = [value for i, value in mapped.items() if i >= lowest and value > below]
    min_confidence = min(above) if above else 1.0
    return {
        "target_precision": TARGET_PRECISION,
        "bins": [
            {
                "raw_from": b.low,
                "raw_to": b.high,
                "cases": b.cases,
                "right": b.right,
                "writes": w.cases,
                "writes_right": w.right,
                "calibrated": mapped.get(i),
            }
            for i, (b, w) in enumerate(zip(bins, write_bins, strict=True))
        ],
        "points": points,
        "min_confidence": min_confidence,
        "samples": len(samples),
    }


def monotone(counts: list[tuple[int, int]]) -> dict[int, float]:
    """Pool adjacent violators over (right, cases) bins: index -> fitted rate, never lower for a higher bin.

    Bins without cases are left out."""
    # [right, cases, member indices]: a mutable mixed-type row, so its items are Any.
    merged: list[list[Any]] = []
    for i, (right, cases) in enumerate(counts):
        if not cases:
            continue
        merged.append([right, cases, [i]])
        while len(merged) > 1 and merged[-2][0] / merged[-2][1] > merged[-1][0] / merged[-1][1]:
            right, cases, members = merged.pop()
            merged[-1][0] += right
            merged[-1][1] += cases
            merged[-1][2] += members
    return {i: right / cases for right, cases, members in merged for i in members}


@cache
def table() -> Table | None:
    try:
        loaded: Table = json.loads(TABLE_FILE.read_text(encoding="utf-8"))
        return loaded
    except (OSError, ValueError):
        return None


_local = threading.local()


@contextlib.contextmanager
def raw_confidences() -> Iterator[None]:
    """Within this block (this thread) decisions carry their raw confidence: calibrating reads them."""
    _local.raw = True
    try:
        yield
    finally:
        _local.raw = False


def calibrated(raw: float) -> float:
    """The calibrated confidence of a raw one (the raw value while nothing is calibrated)."""
    raw = min(max(float(raw), 0.0), 1.0)
    fitted = None if getattr(_local, "raw", False) else table()
    if not fitted or not fitted.get("points"):
        return raw
    points = fitted["points"]
    position = bisect.bisect_right([low for low, _ in points], raw) - 1
    if position < 0:  # below every calibrated bin: no evidence it is right more often than it says
        return min(raw, points[0][1])
    return points[position][1]
