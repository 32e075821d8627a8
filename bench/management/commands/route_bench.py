"""route_bench: time each per-request step over a catalog of N tools; the last line printed is JSON.

The catalog is the public bench catalog plus seeded distractors of the same
shape; nothing is written to the database. It reports what it measured, on the
data it names, and asserts nothing. --history FILE loads FILE's queries as approved
examples (as route_eval --history does), so the timings include the example fusion.
"""

import json
import os
import random
import resource
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents.router import analyze
from bench.evaluation import (
    BenchFileError,
    bench_context,
    history_examples,
    load_catalog,
    load_queries,
    percentile_ms,
    scaled_catalog,
    search_and_routing_indexes,
    tool_documents,
)
from catalog.policies.bundle import build_bundle
from catalog.search import embedding_cache, embeddings
from catalog.search.index import ToolSearchIndex

DEFAULT_BENCH_DIR = Path(settings.BASE_DIR).parent / "shared" / "bench"


class Command(BaseCommand):
    requires_system_checks = []  # reads bench files only; the database's state does not matter
    help = "Time steward ranking + bundle per request over N tools (bench catalog + distractors); last line JSON."

    def add_arguments(self, parser):
        parser.add_argument("--tools", type=int, required=True, help="Catalog size N.")
        parser.add_argument("--bench-dir", default=str(DEFAULT_BENCH_DIR), help="Holds catalog.json and dev.jsonl.")
        parser.add_argument("--requests", type=int, default=500, help="Requests to time (sampled from dev queries).")
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--format", choices=["text", "json"], default="text", help="json: only the JSON line.")
        parser.add_argument("--history", help="JSONL of past queries loaded as approved examples (timed warm).")

    def handle(self, *args, **options):
        with embedding_cache.off():  # timed queries pay for their own embedding
            self.measure(**options)

    def measure(self, **options):
        size, bench_dir = options["tools"], Path(options["bench_dir"])
        if size < 1 or options["requests"] < 1:
            raise CommandError("--tools and --requests must be at least 1")
        try:
            public = load_catalog(bench_dir / "catalog.json")
            known = {tool["name"] for tool in public}
            queries = load_queries(bench_dir / "dev.jsonl", known_tools=known)
            history = load_queries(options["history"], known_tools=known) if options["history"] else []
        except BenchFileError as exc:
            raise CommandError(str(exc)) from None
        scaled = scaled_catalog(public, size, seed=options["seed"])
        documents = tool_documents(scaled)
        rng = random.Random(options["seed"])
        requests = [q.query for q in rng.sample(queries, min(options["requests"], len(queries)))]

        dense = embeddings.dense_enabled()
        start = time.perf_counter()
        if dense:
            embeddings.load_model(embeddings.search_model())
            embeddings.load_model(embeddings.routing_model())
        model_load_seconds = time.perf_counter() - start
        start = time.perf_counter()
        # Both indexes a live process holds: the router's (its model) and the search's.
        index, routing = search_and_routing_indexes(documents, dense=dense, examples=history_examples(history))
        build_seconds = time.perf_counter() - start
        # Example texts are dev queries: a timed request must embed its query, not find it memoised.
        embeddings.forget_memo()
        self.routing = routing

        steps = self.request_steps(index, self.context(scaled, index))
        load_before = os.getloadavg()[0]
        per_step = {name: [] for name in steps}
        per_request, cpu_per_request = [], []
        for query in requests:
            total, cpu = 0.0, 0.0
            for name, step in steps.items():
                started, cpu_started = time.perf_counter(), time.thread_time()
                step(query)
                elapsed = time.perf_counter() - started
                cpu += time.thread_time() - cpu_started
                per_step[name].append(elapsed)
                total += elapsed
            per_request.append(total)
            cpu_per_request.append(cpu)

        examples_ab = self.examples_ab(index, scaled, requests) if index.examples else None

        report = {
            "bench_dir": str(bench_dir),
            "mode": "hybrid" if index.dense else "bm25",
            "n_tools": len(documents),
            "n_distractors": max(0, size - len(public)),
            "n_requests": len(requests),
            "allowed_size": len(index.names),
            "n_examples": len(index.examples),
            "steward_mode": "rules",
            "model_load_s": round(model_load_seconds, 2),
            "index_build_s": round(build_seconds, 2),
            "steps": {
                name: {"p50_ms": percentile_ms(seconds, 50), "p95_ms": percentile_ms(seconds, 95)}
                for name, seconds in per_step.items()
            },
            "p50_ms": percentile_ms(per_request, 50),
            "p95_ms": percentile_ms(per_request, 95),
            # CPU time of the timing thread (MiniLM and BLAS run one thread, on it): what a busy host
            # adds by taking the core away shows in the wall-clock figures above, not in these.
            "cpu_p50_ms": percentile_ms(cpu_per_request, 50),
            "cpu_p95_ms": percentile_ms(cpu_per_request, 95),
            # Linux reports KiB: the whole process (Django, the models and the index).
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            # Other work on the host skews the timings: the 1-minute load around the timed loop.
            "host_load_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "cpus": os.cpu_count(),
        }
        if examples_ab:
            report["examples_ab"] = examples_ab
        if options["format"] == "text":
            steps_text = ", ".join(f"{n} p50 {t['p50_ms']} / p95 {t['p95_ms']} ms" for n, t in report["steps"].items())
            self.stdout.write(
                f"{report['n_tools']} tools ({report['n_distractors']} distractors), {report['n_examples']} examples, "
                f"{report['n_requests']} requests: "
                f"request p50 {report['p50_ms']} / p95 {report['p95_ms']} ms (CPU p50 {report['cpu_p50_ms']} / "
                f"p95 {report['cpu_p95_ms']} ms), "
                f"{steps_text}; index built in {report['index_build_s']} s; peak RSS {report['peak_rss_mb']} MB"
            )
            for name, figures in (examples_ab or {}).items():
                self.stdout.write(
                    f"{name} (interleaved): p50 {figures['p50_ms']} / p95 {figures['p95_ms']} ms, "
                    f"CPU p50 {figures['cpu_p50_ms']} / p95 {figures['cpu_p95_ms']} ms"
                )
        self.stdout.write(json.dumps(report))

    def examples_ab(self, index: ToolSearchIndex, catalog: list[dict], requests: list[str]) -> dict:
        """The steward step with examples off and on, interleaved per request (each embeds its own query),
        so both see the same host; which goes first alternates."""

        def cold(query, allowed, limit):
            return index.search(query, allowed=allowed, limit=limit, use_examples=False).names

        contexts = {
            "steward_cold": self.context(catalog, index, search=cold),
            "steward_warm": self.context(catalog, index),
        }
        wall = {name: [] for name in contexts}
        cpu = {name: [] for name in contexts}
        for number, query in enumerate(requests):
            for name in sorted(contexts, reverse=bool(number % 2)):
                embeddings.forget_memo()
                started, cpu_started = time.perf_counter(), time.thread_time()
                analyze(query, context=contexts[name], mode="rules", max_tools=5, min_tools=5)
                cpu[name].append(time.thread_time() - cpu_started)
                wall[name].append(time.perf_counter() - started)
        return {
            name: {
                "p50_ms": percentile_ms(wall[name], 50),
                "p95_ms": percentile_ms(wall[name], 95),
                "cpu_p50_ms": percentile_ms(cpu[name], 50),
                "cpu_p95_ms": percentile_ms(cpu[name], 95),
            }
            for name in contexts
        }

    def context(self, catalog, index, search=None):
        """The steward's view of the scaled catalog, ranked by the router's index as a live request is."""
        return bench_context(catalog, index, search, routing=self.routing, routing_model=embeddings.routing_model())

    def request_steps(self, index: ToolSearchIndex, context) -> dict:
        """What one request does before the model runs, step by step; the request is their sum.

        steward: the routing decision and the recommendation (its search over what policy
        allows included); bundle: loaded / deferred / denied, with the archive's tokens counted.
        """
        last = {}

        def steward(query):
            # The bench catalog has no aliases or domain words: ask for a full ranking, as route_eval does.
            last["result"] = analyze(query, context=context, mode="rules", max_tools=5, min_tools=5)

        def bundle(query):
            result = last["result"]
            return build_bundle(result.decision, context.entries, recommended=result.recommended_tools)

        return {"steward": steward, "bundle": bundle}
