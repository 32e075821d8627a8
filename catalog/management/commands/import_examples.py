"""import_examples: add tool examples from a JSONL of past requests; refused lines are reported, never guessed.

Each line is {"query": text, "expected_tools": [tool names]} (the benchmark's
format; other keys are ignored). Every (query, tool) pair goes through
catalog.search.tool_examples.add_example, so the same validation, merging and bounds apply.
"""

import json
from collections import Counter

from django.core.management.base import BaseCommand, CommandError

from catalog.models import ToolExample
from catalog.search.tool_examples import ExampleRefused, add_example


class Command(BaseCommand):
    help = "Import tool examples from a JSONL of {query, expected_tools} (source: imported)."

    def add_arguments(self, parser):
        parser.add_argument("file", help="JSONL of {query, expected_tools}.")
        parser.add_argument("--approve", action="store_true", help="Approve them (they help search at once).")

    def handle(self, *args, **options):
        try:
            with open(options["file"], encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {options['file']}: {exc}") from None
        counts, refusals = Counter(), Counter()
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                item = json.loads(raw)
            except ValueError:
                raise CommandError(f"{options['file']}, line {number}: not valid JSON") from None
            tools = item.get("expected_tools") if isinstance(item, dict) else None
            if not isinstance(tools, list) or not all(isinstance(name, str) for name in tools):
                raise CommandError(f"{options['file']}, line {number}: 'expected_tools' must be a list of names")
            for name in tools:
                try:
                    added = add_example(
                        tool=name,
                        text=item.get("query", ""),
                        source=ToolExample.Source.IMPORTED,
                        approved=options["approve"],
                    )
                except ExampleRefused as refused:
                    refusals[str(refused)] += 1
                    continue
                counts["added" if added.created else "merged"] += 1
        self.stdout.write(f"{counts['added']} added, {counts['merged']} merged, {sum(refusals.values())} refused")
        for reason, count in refusals.most_common(10):
            self.stdout.write(f"  {count} × {reason}")
