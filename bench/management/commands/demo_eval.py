"""demo_eval: full turns with the builtin offline model over the Loyalty routing cases; prints the pass rate."""

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from bench.demo_eval import domain_cases, run_case, summary
from bench.evaluation import BenchFileError, read_requests
from catalog.models import Tool

DEFAULT_CASES = Path(settings.BASE_DIR).parent / "shared" / "bench" / "routing_dev.jsonl"


class Command(BaseCommand):
    help = (
        "Run full turns with the builtin offline model (in-process, eager) on this database's catalog for the "
        "domain's cases of CASES (routing_dev.jsonl's format, default ../shared/bench/routing_dev.jsonl). A case "
        "is a Loyalty case when a tool it expects (includes, includes_any, also_any) has a policy in the domain "
        "(--domain, default loyalty); those tools are its expected ones. A case passes when the turn calls an "
        "expected tool with arguments its JSON schema accepts, or asks by name for a required value of one that "
        "the request does not hold. Prints the rate overall and per language. Each turn is rolled back; tool "
        "calls run for real (MCP tools on their configured servers: use the demo's)."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("cases", nargs="?", default=str(DEFAULT_CASES), help="JSONL of {id, lang, query, expect}")
        parser.add_argument("--domain", default="loyalty", help="the domain whose cases run (default loyalty)")
        parser.add_argument("--failures", action="store_true", help="list every case that missed, and why")
        parser.add_argument("--json", action="store_true", help="one JSON line per case, then the summary")

    def handle(self, *args, cases, domain, failures, **options):
        try:
            items = read_requests(cases)
        except (BenchFileError, OSError) as exc:
            raise CommandError(str(exc)) from None
        chosen = domain_cases(items, domain)
        if not chosen:
            raise CommandError(f"no case of {cases} expects a tool of domain {domain!r} in this catalog "
                               "(load it with manage.py setup_demo)")  # fmt: skip
        names = {name for _, expected in chosen for name in expected}
        schemas = dict(Tool.objects.filter(name__in=names).values_list("name", "input_schema"))
        results = []
        for case, expected in chosen:
            result = run_case(case, expected, schemas)
            results.append(result)
            if options["json"]:
                self.stdout.write(_json({"id": result.id, "lang": result.lang, "passed": result.passed,
                                         "how": result.how, "called": result.called}))  # fmt: skip
        if failures:
            for result in results:
                if not result.passed:
                    self.stdout.write(_json({"id": result.id, "query": result.query, "expected": result.expected,
                                             "why": result.how, "answer": result.answer[:300]}))  # fmt: skip
        figures = summary(results)
        langs = ", ".join(f"{lang} {f['rate']:.2f} ({f['passed']}/{f['cases']})"
                          for lang, f in figures["per_lang"].items())  # fmt: skip
        self.stdout.write(
            f"demo_eval: {figures['passed']}/{figures['cases']} {domain} cases passed = {figures['rate']:.2f} "
            f"(called {figures['called']}, asked {figures['asked']}); per language: {langs}"
        )
        self.stdout.write(_json(figures))


def _json(data) -> str:
    return json.dumps(data, ensure_ascii=False)
