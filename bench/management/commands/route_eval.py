"""route_eval: rank every benchmark query with the runtime's tool-search index and print recall figures.

It reads the files it names and writes nothing: no database, no tuning.
The last line printed is one JSON object with the figures.

With --history FILE (or --split-history: the queries' own history half, split
by sha256(id) parity, evaluated on the other half) the past queries are loaded as
approved examples and every query is ranked twice in one run: cold (examples
off: the figures without history) and warm. A query never sees an example with
its own id or exact text; how many queries had one left out is reported.
"""

import json
import time

from django.core.management.base import BaseCommand, CommandError

from agents.router import analyze
from bench.evaluation import (
    BenchFileError,
    SelfMatches,
    bench_context,
    history_examples,
    load_catalog,
    load_queries,
    name_substring_ranking,
    percentile_ms,
    split_by_id,
    summarize,
    timed,
    tool_documents,
)
from catalog.search import embedding_cache, embeddings
from catalog.search.index import ToolDocument, ToolSearchIndex

DEPTH = 10


class Command(BaseCommand):
    requires_system_checks = []  # reads bench files only; the database's state does not matter
    help = "Measure tool-search recall on a catalog and a JSONL of queries (last line: JSON)."

    def add_arguments(self, parser):
        parser.add_argument("--catalog", required=True, help="JSON list of tools {name, description, parameters}.")
        parser.add_argument("--queries", required=True, help="JSONL of {id, query, expected_tools, source}.")
        parser.add_argument("--k", type=int, default=5, help="k for per-source and lenient recall (default 5).")
        parser.add_argument("--format", choices=["text", "json"], default="text", help="json: only the JSON line.")
        parser.add_argument("--compare", action="store_true", help="Also rank with the baselines.")
        parser.add_argument("--limit", type=int, default=0, help="Only the first N queries.")
        history = parser.add_mutually_exclusive_group()
        history.add_argument("--history", help="JSONL of past queries (same format) loaded as approved examples.")
        history.add_argument(
            "--split-history",
            action="store_true",
            help="Split --queries by sha256(id) parity: even ids are the history, odd ids are ranked.",
        )

    def handle(self, *args, **options):
        with embedding_cache.off():  # timed queries pay for their own embedding
            self.measure(**options)

    def measure(self, **options):
        k = options["k"]
        if k < 1:
            raise CommandError("--k must be at least 1")
        try:
            tools = load_catalog(options["catalog"])
            known = {tool["name"] for tool in tools}
            queries = load_queries(options["queries"], known_tools=known)
            history = load_queries(options["history"], known_tools=known) if options["history"] else None
        except BenchFileError as exc:
            raise CommandError(str(exc)) from None
        if options["split_history"]:
            history, queries = split_by_id(queries)
        if options["limit"] > 0:
            queries = queries[: options["limit"]]
        if not tools or not queries:
            raise CommandError("the catalog and the queries must each have at least one entry")
        documents = tool_documents(tools)
        originals = {d.name: d.original_name for d in documents}
        depth = max(DEPTH, k)

        query_vectors: dict[str, object] = {}
        dense = embeddings.dense_enabled()
        if dense:
            embeddings.load_model()  # loading the model is not part of building the index

        def recording_embedder(texts):
            vectors = embeddings.embed_texts(texts)
            if len(texts) == 1:
                query_vectors[texts[0]] = vectors[0]
            return vectors

        start = time.perf_counter()
        index = ToolSearchIndex(documents, embedder=recording_embedder if dense else None)
        build_seconds = time.perf_counter() - start
        warm_index, examples_seconds = None, 0.0
        if history is not None:
            start = time.perf_counter()
            # The same tool vectors, plus the history's examples (embedded here: part of the warm build).
            warm_index = ToolSearchIndex(
                documents,
                embeddings=index.vectors(),
                embedder=recording_embedder if dense else None,
                examples=history_examples(history),
            )
            examples_seconds = time.perf_counter() - start
        context = bench_context(tools, index)
        # The runtime's ranking: the steward's analysis, whose second stage searches what policy allows.
        rankings, seconds = timed(
            lambda q: list(
                analyze(q, context=context, mode="rules", max_tools=depth, min_tools=depth).recommended_tools
            ),
            queries,
        )

        report = {
            "ranker": "agents.steward.analyze (rules) over the hybrid tool search",
            "catalog": options["catalog"],
            "queries": options["queries"],
            "mode": "hybrid" if index.dense else "bm25",
            "model": embeddings.model_name() if index.dense else None,
            "bm25_weight": index.bm25_weight,
            "n_tools": len(documents),
            "n_queries": len(queries),
            **summarize(rankings, queries, originals, k=k),
            "p50_ms": percentile_ms(seconds, 50),
            "p95_ms": percentile_ms(seconds, 95),
            "index_build_s": round(build_seconds, 2),
        }
        if warm_index is not None:
            report["history"] = self._warm(warm_index, tools, queries, history, originals, depth, k, options)
        if options["compare"]:
            report["baselines"] = self._baselines(documents, queries, originals, index, query_vectors, depth, k)
        if warm_index is not None:
            report["history"]["index_build_s"] = round(examples_seconds, 2)
        if options["format"] == "text":
            self._print_table(report, k)
        self.stdout.write(json.dumps(report, ensure_ascii=False))

    def _warm(self, index, tools, queries, history, originals, depth, k, options) -> dict:
        """Rank again with the history's examples; each query's own examples (id or text) left out."""
        self_matches = SelfMatches(history)
        current = {"exclude": frozenset()}

        def search(query, allowed, limit):
            return index.search(query, allowed=allowed, limit=limit, exclude_examples=current["exclude"]).names

        context = bench_context(tools, index, search=search)
        embeddings.forget_memo()  # the cold pass embedded these queries: the warm one pays for its own
        rankings, seconds, skipped = [], [], 0
        for query in queries:
            current["exclude"] = self_matches.of(query)
            skipped += bool(current["exclude"])
            start = time.perf_counter()
            result = analyze(query.query, context=context, mode="rules", max_tools=depth, min_tools=depth)
            seconds.append(time.perf_counter() - start)
            rankings.append(list(result.recommended_tools))
        return {
            "file": options["history"] or f"{options['queries']} (history half by sha256(id) parity)",
            "n_history_queries": len(history),
            "n_examples": len(index.examples),
            "skipped_self_matches": skipped,
            **summarize(rankings, queries, originals, k=k),
            "p50_ms": percentile_ms(seconds, 50),
            "p95_ms": percentile_ms(seconds, 95),
        }

    def _baselines(self, documents, queries, originals, index, query_vectors, depth, k) -> dict:
        """The same queries through simpler rankers, for comparison."""
        plain = ToolSearchIndex([ToolDocument(name=d.name, description=d.description) for d in documents])
        names = [d.name for d in documents]
        rankers = {
            "bm25_name_description": lambda q: plain.search(q, allowed=None, limit=depth).names,
            "name_substring": lambda q: name_substring_ranking(q, names, depth),
        }
        if index.dense:
            # Reuses the vectors toolhub computed above (same model); a query the router shortened
            # (it drops words over 40 characters) was never embedded whole, so it is embedded here.
            def known_or_embedded(texts):
                return [query_vectors[t] if t in query_vectors else embeddings.embed_texts([t])[0] for t in texts]

            dense_only = ToolSearchIndex(
                documents,
                embeddings=index.vectors(),
                embedder=known_or_embedded,
                bm25_weight=0.0,
            )
            rankers["dense_only"] = lambda q: dense_only.search(q, allowed=None, limit=depth).names
        return {
            name: summarize([rank(q.query) for q in queries], queries, originals, k=k) for name, rank in rankers.items()
        }

    def _print_table(self, report: dict, k: int):
        rows = [("toolhub " + report["mode"], report)]
        if "history" in report:
            rows.append(("toolhub + history", report["history"]))
        rows += list(report.get("baselines", {}).items())
        columns = ["recall@1", "recall@5", "recall@10", f"lenient_recall@{k}", "mrr"]
        self.stdout.write(f"{'ranker':<24}" + "".join(f"{c:>20}" for c in columns))
        for name, figures in rows:
            self.stdout.write(f"{name:<24}" + "".join(f"{figures[c]:>20.3f}" for c in columns))
        self.stdout.write(
            f"{report['n_tools']} tools, {report['n_queries']} queries; ranking p50 {report['p50_ms']} ms, "
            f"p95 {report['p95_ms']} ms; index built in {report['index_build_s']} s"
        )
        warm = report.get("history")
        if warm:
            self.stdout.write(
                f"history: {warm['n_history_queries']} queries as {warm['n_examples']} examples; "
                f"{warm['skipped_self_matches']} ranked queries had their own example left out; "
                f"warm ranking p50 {warm['p50_ms']} ms, p95 {warm['p95_ms']} ms"
            )
        self.stdout.write(f"recall@{k} per source (cold" + (" -> warm)" if warm else ")"))
        for source, figures in report["per_source"].items():
            line = f"  {source:<20} n={figures['n']:<6} {figures[f'recall@{k}']:.3f}"
            if warm:
                line += f" -> {warm['per_source'][source][f'recall@{k}']:.3f}"
            self.stdout.write(line)
