"""route_cases: score the steward on labelled routing cases (routing_dev.jsonl's format); calibrate its confidence.

Prints the pass rate overall, per language and per category, the steward's
latency, and how often decisions at each confidence level were right. With
--calibrate it routes the cases with the confidence gate open and raw
confidences (so each decision is judged as the router read it), fits the
calibration (agents/router/calibration.py) and writes calibration.json, whose
derived minimum becomes TOOLHUB_MIN_CONFIDENCE's default in the next process.
Figures only: nothing here changes the router to fit the cases.
"""

import json
import time
from collections import defaultdict

from django.core.management.base import BaseCommand, CommandError
from django.test import override_settings

from agents.router import StewardContext, analyze, calibration, prepare_vectors
from agents.router.lexicon import READ_ACTIONS
from bench.evaluation import BenchFileError, case_category, case_failures, expects_write, percentile_ms, read_requests
from catalog.search import embeddings


class Command(BaseCommand):
    help = "Score the steward on routing cases ({id, lang, query, expect}); --calibrate writes calibration.json."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("cases", nargs="+", help="JSONL files of {id, lang, query, expect} (scored as one set)")
        parser.add_argument("--calibrate", action="store_true", help="fit and write agents/router/calibration.json")
        parser.add_argument("--failures", action="store_true", help="list every failing case")
        parser.add_argument("--mode", default=None, help="steward mode (default: TOOLHUB_STEWARD)")

    def handle(self, *args, cases, calibrate, failures, mode, **options):
        items = [item for path in cases for item in read_cases(path)]
        if len({item["id"] for item in items}) != len(items):
            raise CommandError("the case files repeat an id")
        prepare_vectors()  # the index, the examples and the model warm, as a warm server has them
        context = StewardContext.current()
        if calibrate:
            with override_settings(TOOLHUB_MIN_CONFIDENCE=0.0), calibration.raw_confidences():
                scored = score(items, context, mode)
            fitted = calibration.fit([(row["confidence"], row["right"], row["writes"]) for row in scored])
            calibration.TABLE_FILE.write_text(json.dumps(fitted, indent=2) + "\n", encoding="utf-8")
            calibration.table.cache_clear()
            self.stdout.write(f"wrote {calibration.TABLE_FILE} (min_confidence {fitted['min_confidence']})")
            self.print_table(fitted)
            return
        scored = score(items, context, mode)
        if failures:
            for row in scored:
                if not row["passed"]:
                    self.stdout.write(json.dumps({k: row[k] for k in ("id", "query", "why", "recommended")},
                                                 ensure_ascii=False))  # fmt: skip
        # The kernel the e5 engine runs on for this CPU (catalog/search/e5engine): the latencies depend on it.
        engine = {"e5_kernel": embeddings.e5_kernel()} if embeddings.routing_model() == embeddings.E5_SMALL else {}
        self.stdout.write(json.dumps(summary(scored) | engine, ensure_ascii=False))
        fitted = calibration.fit([(row["confidence"], row["right"], row["writes"]) for row in scored])
        self.print_table(fitted, label="calibrated confidence")

    def print_table(self, fitted: dict, label: str = "raw confidence") -> None:
        self.stdout.write(f"{label:>22} | cases | right | accuracy | writes | writes right | maps to")
        for row in fitted["bins"]:
            if not row["cases"]:
                continue
            accuracy = row["right"] / row["cases"]
            self.stdout.write(
                f"{row['raw_from']:>10.2f} - {row['raw_to']:<9.2f} | {row['cases']:>5} | {row['right']:>5} | "
                f"{accuracy:>8.2f} | {row['writes']:>6} | {row['writes_right']:>12} | {row['calibrated']}"
            )


def score(items: list[dict], context, mode) -> list[dict]:
    rows = []
    for item in items:
        started = time.perf_counter()
        result = analyze(item["query"], context=context, mode=mode)
        seconds = time.perf_counter() - started
        why = case_failures(item["expect"], result.recommended_tools, result.decision.action, result.decision.domains)
        writes = result.decision.action not in READ_ACTIONS
        rows.append(
            {
                "id": item["id"],
                "lang": item.get("lang", "?"),
                "query": item["query"],
                "category": case_category(item["expect"]),
                "passed": not why,
                "writes": writes,
                # Right: the case passes and the decision reads or writes as the case expects.
                "right": not why and writes == expects_write(item["expect"]),
                "why": why,
                "recommended": list(result.recommended_tools),
                "confidence": result.decision.confidence,
                "seconds": seconds,
            }
        )
    return rows


def summary(rows: list[dict]) -> dict:
    def rate(group):
        return {"passed": sum(r["passed"] for r in group), "cases": len(group),
                "rate": round(sum(r["passed"] for r in group) / len(group), 3)}  # fmt: skip

    by_lang, by_category = defaultdict(list), defaultdict(list)
    for row in rows:
        by_lang[row["lang"]].append(row)
        by_category[row["category"]].append(row)
    seconds = [row["seconds"] for row in rows]
    return {
        **rate(rows),
        "per_language": {lang: rate(group) for lang, group in sorted(by_lang.items())},
        "per_category": {name: rate(group) for name, group in sorted(by_category.items())},
        "p50_ms": percentile_ms(seconds, 50),
        "p95_ms": percentile_ms(seconds, 95),
    }


def read_cases(path: str) -> list[dict]:
    """The requests of a cases file (bench.evaluation.read_requests), each with an "expect" object."""
    try:
        items = read_requests(path)
    except BenchFileError as exc:
        raise CommandError(str(exc)) from None
    for item in items:
        if not isinstance(item.get("expect"), dict):
            raise CommandError(f'{path}: case {item["id"]!r} has no "expect" object')
    if not items:
        raise CommandError(f"{path}: no cases")
    return items
