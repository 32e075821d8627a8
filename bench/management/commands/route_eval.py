"""route_eval: rank every benchmark query through the live routing path and print recall figures.

Each query meets what a live request meets (agents.router.analyze, rules): the router's
ranking by the routing model with its clause reading, its recommendations among what
policy permits (here: every tool, read-only), then the search over the permitted tools
filling the list to the depth asked for. --compare ranks the same queries with a
standard full-text BM25 (bm25s), toolhub's search alone and its dense model alone.

It reads the files it names and writes nothing: no database, no tuning.
The last line printed is one JSON object with the figures.

With --history FILE (or --split-history: the queries' own history half, split
by sha256(id) parity, evaluated on the other half) the past queries are loaded as
approved examples and every query is ranked twice in one run: cold (examples
off: the figures without history) and warm. A query never sees an example with
its own id or exact text; how many queries had one left out is reported.
"""

import json
import random
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents.router import analyze
from bench.evaluation import (
    BenchFileError,
    FullTextBM25,
    SelfMatches,
    bench_context,
    history_examples,
    load_catalog,
    load_queries,
    name_substring_ranking,
    percentile_ms,
    search_and_routing_indexes,
    split_by_id,
    summarize,
    timed,
    tool_documents,
)
from catalog.search import embedding_cache, embeddings
from catalog.search.index import ToolSearchIndex

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
        parser.add_argument(
            "--sample", type=int, default=0, help="A seeded sample of N queries (0: all), e.g. of a large dev set."
        )
        parser.add_argument("--seed", type=int, default=0, help="The sample's seed (default 0).")
        parser.add_argument("--max-words", type=int, default=0, help="Only queries of at most N words (0: all).")
        history = parser.add_mutually_exclusive_group()
        history.add_argument("--history", help="JSONL of past queries (same format) loaded as approved examples.")
        history.add_argument(
            "--split-history",
            action="store_true",
            help="Split --queries by sha256(id) parity: even ids are the history, odd ids are ranked.",
        )

    def handle(self, *args, **options):
        self.measure(**options)

    def measure(self, **options):
        if options["k"] < 1:
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
        if options["max_words"] > 0:
            queries = [query for query in queries if len(query.query.split()) <= options["max_words"]]
        if 0 < options["sample"] < len(queries):
            queries = random.Random(options["seed"]).sample(queries, options["sample"])
        if options["limit"] > 0:
            queries = queries[: options["limit"]]
        if not tools or not queries:
            raise CommandError("the catalog and the queries must each have at least one entry")
        documents = tool_documents(tools)
        dense = embeddings.dense_enabled()
        search_model, routing_model = embeddings.search_model(), embeddings.routing_model()
        if dense:  # loading the models is not part of building the index
            embeddings.load_model(search_model)
            embeddings.load_model(routing_model)
        start = time.perf_counter()
        # The tools' vectors come from TOOLHUB_VECTOR_CACHE when it is set (index_build_s then times reading them);
        # every query below pays for its own embedding.
        index, routing = search_and_routing_indexes(documents, dense=dense)
        build_seconds = time.perf_counter() - start
        with embedding_cache.off():
            self.rank(options, tools, queries, history, documents, (index, routing), build_seconds)

    def rank(self, options, tools, queries, history, documents, indexes, build_seconds):
        k, depth = options["k"], max(DEPTH, options["k"])
        originals = {d.name: d.original_name for d in documents}
        index, routing = indexes
        dense, routing_model = index.dense, embeddings.routing_model()
        warm, examples_seconds = None, 0.0
        if history is not None:
            start = time.perf_counter()
            # The same tool vectors, plus the history's examples (embedded here: part of the warm build).
            examples = history_examples(history)
            cold = (index, routing)
            warm = search_and_routing_indexes(documents, dense=dense, examples=examples, cold=cold)
            examples_seconds = time.perf_counter() - start
        # The live routing path: the router's ranking by its model, its clause reading, the recommendations among
        # what policy permits, then the search over the permitted tools fills the list to the depth asked for.
        context = bench_context(tools, index, routing=routing, routing_model=routing_model)
        rankings, seconds = timed(
            lambda q: list(
                analyze(q, context=context, mode="rules", max_tools=depth, min_tools=depth).recommended_tools
            ),
            queries,
        )

        report = {
            "ranker": "agents.router.analyze (rules): the router's ranking, then the search over what policy permits",
            "catalog": options["catalog"],
            "queries": options["queries"],
            "mode": "hybrid" if index.dense else "bm25",
            "model": embeddings.model_name(embeddings.search_model()) if index.dense else None,
            "routing_model": embeddings.model_name(routing_model) if index.dense else None,
            "bm25_weight": index.bm25_weight,
            "n_tools": len(documents),
            "n_queries": len(queries),
            **summarize(rankings, queries, originals, k=k),
            "p50_ms": percentile_ms(seconds, 50),
            "p95_ms": percentile_ms(seconds, 95),
            "index_build_s": round(build_seconds, 2),
            # Set: the tools' vectors were read from the machine's vector file, so index_build_s is not a build's.
            "vectors_from_cache": bool(settings.TOOLHUB_VECTOR_CACHE),
        }
        if warm is not None:
            report["history"] = self._warm(warm, tools, queries, history, originals, depth, k, options)
            report["history"]["index_build_s"] = round(examples_seconds, 2)
        if options["compare"]:
            report["baselines"] = self._baselines(documents, queries, originals, index, depth, k)
        if options["format"] == "text":
            self._print_table(report, k)
        self.stdout.write(json.dumps(report, ensure_ascii=False))

    def _warm(self, indexes, tools, queries, history, originals, depth, k, options) -> dict:
        """Rank again with the history's examples; each query's own examples (id or text) left out."""
        index, routing = indexes
        self_matches = SelfMatches(history)
        current = {"exclude": frozenset()}
        context = bench_context(
            tools, index, routing=routing, routing_model=embeddings.routing_model(), exclude=lambda: current["exclude"]
        )
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

    def _baselines(self, documents, queries, originals, index, depth, k) -> dict:
        """The same queries through other rankers, for comparison: the standard full-text BM25, toolhub's search
        alone (no router), its dense model alone, and the seed's name matching."""
        full_text = FullTextBM25(documents)
        names = [d.name for d in documents]
        rankers = {
            "bm25_full_text": lambda q: full_text.rank(q, depth),
            "toolhub_search_alone": lambda q: index.search(q, allowed=None, limit=depth).names,
            "name_substring": lambda q: name_substring_ranking(q, names, depth),
        }
        if index.dense:
            dense_only = ToolSearchIndex(
                documents, embeddings=index.vectors(), embedder=embeddings.embed_texts, bm25_weight=0.0
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
        columns = ["recall@1", "recall@5", "recall@10", "ndcg@10", "completeness@10", f"lenient_recall@{k}", "mrr"]
        self.stdout.write(f"{'ranker':<22}" + "".join(f"{c:>17}" for c in columns))
        for name, figures in rows:
            self.stdout.write(f"{name:<22}" + "".join(f"{figures[c]:>17.3f}" for c in columns))
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
