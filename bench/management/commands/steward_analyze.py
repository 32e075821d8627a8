import json
import time

from django.core.management.base import BaseCommand, CommandError

from agents.console.metrics import percentile
from agents.router import StewardContext, analyze, prepare_vectors
from agents.turns.routing_log import record_analysis
from bench.evaluation import BenchFileError, read_requests


class Command(BaseCommand):
    help = "Run the steward on JSONL queries ({id, query}) against this database's catalog; one JSON line each."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--queries", required=True, help="JSONL file, one {id, query} per line")
        parser.add_argument("--format", choices=["json"], default="json")
        parser.add_argument("--no-record", action="store_true", help="do not write RoutingLogs")

    def handle(self, *args, queries, no_record, **options):
        try:
            items = read_requests(queries)
        except BenchFileError as exc:
            raise CommandError(str(exc)) from None
        prepare_vectors()  # the index, the examples and the model warm before timing, as a warm server has them
        context = StewardContext.current()
        latencies = []
        for item in items:
            started = time.perf_counter()
            result = analyze(item["query"], context=context)
            latencies.append((time.perf_counter() - started) * 1000)
            if not no_record:
                record_analysis(result, query=item["query"])
            row = {"id": item["id"], **result.as_dict()}
            row.pop("reasoning")
            self.stdout.write(json.dumps(row, ensure_ascii=False))
        summary = {"count": len(items), "p50_ms": percentile(latencies, 0.5), "p95_ms": percentile(latencies, 0.95)}
        self.stdout.write(json.dumps(summary))
