"""Start-up of a fresh process on the public benchmark's 2,923-tool catalog, vectors stored vs not; prints figures.

A PostgreSQL database of its own (`bench_capacity_startup`, created and dropped here) is migrated (the router's
examples and phrase lists come with the migrations) and given every tool of ../shared/bench/catalog.json with an
active read policy (names that the catalog refuses, like `math.factorial`, get their odd characters as `_`; a
schema the catalog refuses is kept as its properties' names only). Then fresh processes start, one after the
other, each doing what a server's or worker's warm-up does, in order, and timing each step from the moment the
process was started: Django set up, the search model loaded, the search index built (ToolEmbedding rows read or
the tools embedded; BM25), the first tool search answered, the routing model loaded, its index of the catalog
built, the example index and the phrase lists built, the first request routed (--until stops after a step: with
first_tool_search, a run never embeds with the routing model, which takes minutes). Each step also gives the CPU
seconds the process had used by then, which a busy host inflates less than wall-clock. Runs:

- "absent": nothing stored (ToolEmbedding, TextEmbedding and the examples' vectors emptied first), so the
  process embeds the catalog with both models and the examples with the routing model, and stores them;
- "present" (--present-runs times): the next processes, which find them stored.

The vector file of the test suite (TOOLHUB_VECTOR_CACHE) is off in every process: only the database is shared.

    python bench/scripts/startup_bench.py [--bench-dir ../shared/bench] [--present-runs 3] [--until STEP]
        [--postgres postgresql://postgres@127.0.0.1:5432]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

DATABASE = "bench_capacity_startup"
QUERY = "what is the weather forecast for tomorrow in Paris"
_NAME_REFUSED = re.compile(r"[^A-Za-z0-9_-]")


def admin(postgres: str, sql: str) -> None:
    with psycopg.connect(f"{postgres}/postgres", autocommit=True) as connection:
        connection.execute(sql)


def bench_env(postgres: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLHUB_VECTOR_CACHE", "REDIS_URL", "CELERY_BROKER_URL")}
    return env | {"DJANGO_SETTINGS_MODULE": "toolhub.settings", "DATABASE_URL": f"{postgres}/{DATABASE}"}


def catalog_definitions(path: Path) -> list[dict]:
    """The bench catalog as import definitions with an active read policy each (module docstring)."""
    from catalog.policies.importers import validate_definitions

    definitions, seen = [], set()
    for item in json.loads(path.read_text()):
        name = _NAME_REFUSED.sub("_", item["name"])[:64]
        while name in seen:
            name = f"{name[:60]}_{len(seen) % 1000}"
        seen.add(name)
        schema = item.get("parameters") or {}
        definitions.append({"name": name, "description": item["description"] or name, "input_schema": schema,
                            "policy": {"operation": "read", "status": "active"}})  # fmt: skip
    refused = validate_definitions(definitions)
    for definition in definitions:
        if definition["name"] in refused:
            names = (definition["input_schema"] or {}).get("properties") or {}
            definition["input_schema"] = {"type": "object", "properties": {str(n): {"type": "string"} for n in names}}
    return definitions


def load_catalog(postgres: str, bench_dir: Path) -> int:
    """Migrate the bench database and import the catalog (this process is Django-configured for it)."""
    os.environ.update(bench_env(postgres))
    os.environ.pop("TOOLHUB_VECTOR_CACHE", None)
    import django

    django.setup()
    from django.core.management import call_command

    from catalog.policies.importers import import_tools

    call_command("migrate", verbosity=0)
    return len(import_tools(catalog_definitions(bench_dir / "catalog.json")).created)


def forget_vectors() -> None:
    from catalog.models import TextEmbedding, ToolEmbedding, ToolExample

    ToolEmbedding.objects.all().delete()
    TextEmbedding.objects.all().delete()
    ToolExample.objects.update(vector=None, dim=0, model_name="")


def stored_vectors() -> dict:
    from catalog.models import TextEmbedding, ToolEmbedding, ToolExample

    return {"tool_embeddings": ToolEmbedding.objects.count(), "text_embeddings": TextEmbedding.objects.count(),
            "example_vectors": ToolExample.objects.exclude(vector=None).count()}  # fmt: skip


def start_process(postgres: str, until: str) -> dict:
    """A fresh process's steps, in seconds since it was started (the child prints them as JSON)."""
    started = time.time()
    command = [sys.executable, __file__, "--child", str(started), "--until", until]
    result = subprocess.run(command, cwd=ROOT, env=bench_env(postgres), capture_output=True, text=True, timeout=7200)
    if result.returncode != 0:
        raise RuntimeError(result.stdout[-2000:] + result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


STEPS = (
    "django_ready",
    "search_model_loaded",
    "search_index_built",
    "first_tool_search",
    "routing_model_loaded",
    "routing_index_built",
    "example_index_built",
    "phrase_lists_built",
    "first_request_routed",
)


def child(started: float, until: str) -> None:
    """What warm_up does, step by step up to `until`, each timed from `started` (the parent's clock before it
    started us), with the CPU seconds this process had used by then."""
    steps: dict[str, float] = {}
    cpu: dict[str, float] = {}
    results: list[str] = []

    import django

    def catalog():
        from catalog.search import embeddings  # after django.setup()
        from catalog.search import service as search

        return embeddings, search

    def first_search():
        _, search = catalog()
        results.extend(search.search_catalog(QUERY, allowed=search.catalog_index().names, limit=5).names)

    def routed():
        from agents.router import analyze

        analyze(QUERY)

    def example_index():
        from agents.router.nearest_examples import example_index

        example_index()

    def phrase_lists():
        from agents.router.lexicon import lexicon

        lexicon()

    work = {
        "django_ready": django.setup,
        "search_model_loaded": lambda: catalog()[0].load_model(),
        "search_index_built": lambda: catalog()[1].catalog_index(),
        "first_tool_search": first_search,
        "routing_model_loaded": lambda: catalog()[0].load_model(catalog()[0].routing_model()),
        "routing_index_built": lambda: catalog()[1].catalog_index(model=catalog()[0].routing_model()),
        "example_index_built": example_index,
        "phrase_lists_built": phrase_lists,
        "first_request_routed": routed,
    }
    for name in STEPS[: STEPS.index(until) + 1]:
        work[name]()
        steps[name], cpu[name] = round(time.time() - started, 2), round(time.process_time(), 2)
    print(json.dumps({"steps": steps, "cpu_s": cpu, "first_results": results, "rebuild_s": rebuild_seconds()}))


def rebuild_seconds() -> dict:
    """What this process rebuilds from stored state, timed again now that everything is loaded: the whole index
    build (rows read, vectors stacked, BM25) and BM25 alone."""
    import bm25s

    from catalog.search import service as search
    from catalog.search.index import lexical_tokens

    start = time.perf_counter()
    index = search.build_catalog_index(dense=True)
    whole = time.perf_counter() - start
    start = time.perf_counter()
    bm25s.BM25().index([lexical_tokens(d) for d in index.documents], show_progress=False)
    return {"search_index": round(whole, 2), "bm25_alone": round(time.perf_counter() - start, 2)}


def report(f: dict) -> None:
    print(f"toolhub start-up benchmark: {f['tools']} tools of the public benchmark on PostgreSQL, "
          f"{f['cpus']} CPUs; seconds since the process was started")  # fmt: skip
    runs = f["runs"]
    names = list(runs[0]["steps"])
    print(f"{'step':<24}" + "".join(f"{r['label']:>12}" for r in runs))
    for name in names:
        print(f"{name:<24}" + "".join(f"{r['steps'][name]:>12}" for r in runs))
    print("CPU seconds the process had used by then:")
    for name in names:
        print(f"{name:<24}" + "".join(f"{r['cpu_s'][name]:>12}" for r in runs))
    print(f"{'load 1m at start':<24}" + "".join(f"{r['load_1m']:>12}" for r in runs))
    for r in runs:
        print(f"{r['label']}: stored before {r['stored_before']}, rebuilt again warm {r['rebuild_s']}")
    print(json.dumps(f))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--until", choices=STEPS, default=STEPS[-1], help="the last step timed (first_request_routed)")
    parser.add_argument("--bench-dir", default=str(ROOT.parent / "shared" / "bench"), help="holds catalog.json")
    parser.add_argument("--present-runs", type=int, default=3, help="fresh processes with the vectors stored (3)")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432", help="server, no database")
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.until)
        return
    admin(args.postgres, f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    admin(args.postgres, f"CREATE DATABASE {DATABASE}")
    try:
        figures = {"tools": load_catalog(args.postgres, Path(args.bench_dir)), "cpus": os.cpu_count(), "runs": []}
        labels = ["absent"] + [f"present {i + 1}" for i in range(args.present_runs)]
        for label in labels:
            if label == "absent":
                forget_vectors()
            before, load = stored_vectors(), round(os.getloadavg()[0], 2)
            figures["runs"].append(start_process(args.postgres, args.until) | {"label": label, "stored_before": before,
                                                                   "load_1m": load})  # fmt: skip
            print(json.dumps(figures["runs"][-1]), flush=True)
        from django.db import connections

        connections.close_all()
    finally:
        admin(args.postgres, f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    report(figures)


if __name__ == "__main__":
    main()
