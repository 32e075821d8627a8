"""Overview breakdown benchmark on PostgreSQL: the range views over 100,000 turns; figures, not a test.

Runs against a fresh database toolhub_overviewbench_<pid> (created, migrated with manage.py, dropped at the end).
Data: --turns turns spread evenly over the last 7 days across 3 model profiles (priced), the 3 channels and 10 API
keys, a routing log each (a tenth of them with an approval wait), a budget event and an answer each (their
tokens kept on the turn too, as its end stores them) and --tool-results tool results per turn over 40 tools.
Then the breakdown (agents.console.breakdown, what the overview renders below its live section) is computed and
rendered for the hour, the day and the week, --runs times each, alternating; p50 and p95 per range. The issue's
target is 300 ms p95. A first render of each range comes before: a process's first loads templates and code, which a
serving process has done, and the first render of the day and the week sums their closed hours once
(agents/console/closed_hours.py); its times are printed apart, as first_render_ms. The last line printed is one JSON
object.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.scripts.workflow_bench import POSTGRES, admin, setup_django  # noqa: E402


def insert_traffic(turns: int, tool_results: int) -> None:
    """`turns` turns over the last 7 days with their routing logs and tool results, in a few INSERT ... SELECTs."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from agents.models import Conversation, ModelProfile

    owner = get_user_model().objects.create(username="bench")
    profiles = [ModelProfile.objects.create(name=f"profile-{n}", context_window=8192, max_output_tokens=512,
                                            reserved_result_tokens=512, input_price=n, output_price=4 * n)
                for n in range(3)]  # fmt: skip
    conversations = [
        Conversation.objects.create(
            owner=owner,
            model_profile=profiles[n % 3],
            channel=channel,
            api_key_name=f"key-{n}" if channel != "console" else "",
        )  # fmt: skip
        for n, channel in enumerate(["console", "api", "mcp"] * 4)
    ]
    ids = [conversation.pk for conversation in conversations]
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO agents_turn (conversation_id, status, model, two_stage, client_tools, error, created_at,
                                        attempt, tool_choice, prompt_tokens, completion_tokens)
               SELECT (%s::int[])[1 + g %% %s], CASE WHEN g %% 20 = 0 THEN 'failed' ELSE 'done' END, 'toolhub',
                      true, '[]'::jsonb, '', now() - (g * interval '7 days' / %s), 0, 'null'::jsonb,
                      900 + g %% 1300, 20 + g %% 200
               FROM generate_series(1, %s) g""",
            [ids, len(ids), turns, turns],
        )
        cursor.execute(
            """INSERT INTO agents_routinglog (turn_id, query, intent, decision, recommended, called, knowledge,
                   two_stage, exposed, deferred, denied, loaded_schema_tokens, deferred_listing_tokens,
                   catalog_schema_tokens, steward_mode, steward_ms, turn_ms, wait_ms, fallback, created_at)
               SELECT t.id, 'a question', '', '{"action": "answer"}'::jsonb, '[]'::jsonb, '[]'::jsonb, '[]'::jsonb,
                      true, '[]'::jsonb, '[]'::jsonb, '[]'::jsonb, 600, 100, 4000, 'rules', 20 + t.id %% 30,
                      300 + t.id %% 2000, CASE WHEN t.id %% 10 = 0 THEN 15000 ELSE 0 END, false, t.created_at
               FROM agents_turn t""",
            [],
        )
        cursor.execute(
            """INSERT INTO agents_turnevent (turn_id, sequence, type, phase, payload, created_at)
               SELECT t.id, 10 + s, 'tool_result', 'tool',
                      jsonb_build_object('tool_name', 'tool_' || ((t.id + s) %% 40), 'is_error', (t.id + s) %% 17 = 0,
                                         'content', 'a result'),
                      t.created_at
               FROM agents_turn t CROSS JOIN generate_series(1, %s) s""",
            [tool_results],
        )
        # What the cost columns read: each turn's budget event (one model call) and its answer.
        cursor.execute(
            """INSERT INTO agents_turnevent (turn_id, sequence, type, phase, payload, created_at)
               SELECT t.id, 5, 'routing', 'budget',
                      jsonb_build_object('system', 300, 'tools', 600 + t.id %% 400, 'knowledge', 0,
                                         'memory', t.id %% 900),
                      t.created_at
               FROM agents_turn t""",
            [],
        )
        cursor.execute(
            """INSERT INTO agents_message (conversation_id, turn_id, role, content, tool_call_id, tool_calls, tokens,
                                           created_at)
               SELECT t.conversation_id, t.id, 'assistant', 'an answer', '', '[]'::jsonb, 20 + t.id %% 200,
                      t.created_at
               FROM agents_turn t""",
            [],
        )
        cursor.execute("VACUUM ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--tool-results", type=int, default=2, help="tool results per turn")
    parser.add_argument("--runs", type=int, default=20, help="renders per range")
    parser.add_argument("--queries", action="store_true", help="also print each query's time of the week's breakdown")
    args = parser.parse_args()

    database = f"toolhub_overviewbench_{os.getpid()}"
    admin(f"CREATE DATABASE {database}")
    figures: dict = {"database": database, "cpus": os.cpu_count(), "load_1m_before": round(os.getloadavg()[0], 2),
                     "turns": args.turns, "tool_results": args.turns * args.tool_results}  # fmt: skip
    try:
        setup_django(f"{POSTGRES}/{database}")
        from django.db import connections
        from django.template.loader import render_to_string

        from agents.console import breakdown

        start = time.perf_counter()
        insert_traffic(args.turns, args.tool_results)
        figures["insert_s"] = round(time.perf_counter() - start, 1)

        def render(key: str) -> tuple[float, int]:
            began = time.perf_counter()
            span, _ = breakdown.time_range({"range": key})
            figures_of_range = breakdown.breakdown(span)
            render_to_string("agents/overview.html#turn-rows", {"rows": figures_of_range["by_profile"],
                                                                 "title": "By model profile"})  # fmt: skip
            return (time.perf_counter() - began) * 1000, figures_of_range["turns"]

        figures["first_render_ms"] = {key: round(render(key)[0], 1) for key in breakdown.RANGES}
        times: dict[str, list[float]] = {key: [] for key in breakdown.RANGES}
        counted = {}
        for _ in range(args.runs):
            for key in breakdown.RANGES:
                elapsed, counted[key] = render(key)
                times[key].append(elapsed)
        for key, values in times.items():
            ordered = sorted(values)
            figures[key] = {"turns_in_range": counted[key], "p50_ms": round(statistics.median(ordered), 1),
                            "p95_ms": round(ordered[max(round(0.95 * len(ordered)) - 1, 0)], 1)}  # fmt: skip
        if args.queries:
            from django.test.utils import CaptureQueriesContext

            with CaptureQueriesContext(connections["default"]) as captured:
                breakdown.breakdown(breakdown.time_range({"range": "week"})[0])
            for query in captured.captured_queries:
                print(query["time"], query["sql"][:160], file=sys.stderr)
        figures["load_1m_after"] = round(os.getloadavg()[0], 2)
        connections.close_all()
    finally:
        admin(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
