"""Workflow benchmark on PostgreSQL: cleanup of 100,000 expired workflows, CAS under 8 writers; figures, not a test.

Runs against a fresh database toolhub_wfbench_<pid> (created, migrated with manage.py, dropped at the end).
The last line printed is one JSON object with every figure.
"""

import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

POSTGRES = "postgresql://postgres@127.0.0.1:5432"
UNSET = ("REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "TOOLHUB_MODEL_BASE_URL")


def admin(sql: str) -> None:
    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as connection:
        connection.execute(sql)


def setup_django(database_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in UNSET} | {
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "toolhub.settings",
        "TOOLHUB_WARM_START": "0",
    }
    result = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    if result.returncode:
        raise SystemExit(f"migrate failed:\n{result.stdout}{result.stderr}")
    for name in UNSET:
        os.environ.pop(name, None)
    os.environ |= {k: env[k] for k in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "TOOLHUB_WARM_START")}
    import django

    django.setup()


def bulk_expired(conversation, count: int, expires_at) -> None:
    from django.db import connection

    from agents.models import Workflow

    rows = (
        Workflow(conversation=conversation, owner_id=conversation.owner_id, kind="bench", phase="draft",
                 state={"step": 0}, expires_at=expires_at)
        for _ in range(count)
    )  # fmt: skip
    Workflow.objects.bulk_create(rows, batch_size=5_000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE agents_workflow")  # what autovacuum would have done by the time beat runs


def empty_table() -> None:
    """Each run starts from a clean table: no dead tuples left by the run before."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE agents_workflow")


def time_cleanup(conversation, rows: int, batch_size: int) -> dict:
    """Rows per second for marking `rows` just-expired workflows, then for deleting `rows` long-expired ones."""
    from django.conf import settings
    from django.utils import timezone

    from agents.turns.workflows import delete_expired_workflows, expire_workflows

    ttl = datetime.timedelta(seconds=settings.TOOLHUB_WORKFLOW_TTL_SECONDS)
    figures = {"batch_size": batch_size, "rows": rows}

    bulk_expired(conversation, rows, timezone.now() - datetime.timedelta(minutes=5))
    start = time.perf_counter()
    marked = expire_workflows(batch_size=batch_size)
    seconds = time.perf_counter() - start
    figures |= {"expire_marked": marked, "expire_s": round(seconds, 2), "expire_rows_per_s": round(marked / seconds)}

    empty_table()
    bulk_expired(conversation, rows, timezone.now() - ttl - datetime.timedelta(minutes=5))
    start = time.perf_counter()
    deleted = delete_expired_workflows(older_than=timezone.now() - ttl, batch_size=batch_size)
    seconds = time.perf_counter() - start
    figures |= {"delete_removed": deleted, "delete_s": round(seconds, 2), "delete_rows_per_s": round(deleted / seconds)}
    assert marked == deleted == rows, figures
    return figures


def time_cas(conversation, *, threads: int, workflows: int, seconds: float) -> dict:
    """`threads` writers, each: read the version, advance from it; counts successes and conflicts."""
    from django.db import connection

    from agents.turns.workflows import WorkflowConflict, advance_workflow, start_workflow

    ids = [
        start_workflow(conversation=conversation, owner=conversation.owner, kind="bench", phase="draft").pk
        for _ in range(workflows)
    ]
    counts = {"ok": 0, "conflict": 0}
    lock = threading.Lock()
    barrier = threading.Barrier(threads + 1)
    stop = threading.Event()

    def writer(seed: int) -> None:
        from agents.models import Workflow

        chooser = random.Random(seed)
        ok = conflict = 0
        try:
            barrier.wait()
            while not stop.is_set():
                workflow_id = chooser.choice(ids)
                version = Workflow.objects.values_list("version", flat=True).get(pk=workflow_id)
                try:
                    advance_workflow(workflow_id=workflow_id, expected_version=version, state_changes={"w": seed})
                    ok += 1
                except WorkflowConflict:
                    conflict += 1
        finally:
            with lock:
                counts["ok"] += ok
                counts["conflict"] += conflict
            connection.close()

    pool = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - start
    attempts = counts["ok"] + counts["conflict"]
    return {
        "threads": threads,
        "workflows": workflows,
        "seconds": round(elapsed, 2),
        "attempts": attempts,
        "attempts_per_s": round(attempts / elapsed),
        "advances_per_s": round(counts["ok"] / elapsed),
        "conflict_rate": round(counts["conflict"] / attempts, 3) if attempts else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="expired workflows to clean up")
    parser.add_argument("--batch-sizes", default="500,5000", help="cleanup batch sizes to compare (first: default)")
    parser.add_argument("--threads", type=int, default=8, help="concurrent CAS writers")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each CAS run")
    args = parser.parse_args()

    database = f"toolhub_wfbench_{os.getpid()}"
    admin(f"CREATE DATABASE {database}")
    figures: dict = {"database": database, "cpus": os.cpu_count(), "load_1m_before": round(os.getloadavg()[0], 2)}
    try:
        setup_django(f"{POSTGRES}/{database}")
        from django.contrib.auth import get_user_model
        from django.db import connection, connections

        from agents.models import Conversation

        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            figures["postgresql"] = cursor.fetchone()[0]
        owner = get_user_model().objects.create(username="bench")
        conversation = Conversation.objects.create(owner=owner)

        figures["cleanup"] = []
        for batch_size in (int(size) for size in args.batch_sizes.split(",")):
            empty_table()
            figures["cleanup"].append(time_cleanup(conversation, args.rows, batch_size))
        empty_table()
        figures["cas"] = [
            time_cas(conversation, threads=args.threads, workflows=1, seconds=args.seconds),
            time_cas(conversation, threads=args.threads, workflows=64, seconds=args.seconds),
        ]
        figures["load_1m_after"] = round(os.getloadavg()[0], 2)
        connections.close_all()
    finally:
        admin(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    report(figures)


def report(f: dict) -> None:
    print(f"toolhub workflow benchmark on PostgreSQL {f['postgresql']} (fresh database {f['database']}, dropped)")
    print(f"host: {f['cpus']} CPUs, 1-min load {f['load_1m_before']} before, {f['load_1m_after']} after\n")
    print("Cleanup (one statement per batch, each its own transaction):")
    print(f"  {'batch':>6} {'rows':>8} {'mark expired':>20} {'delete':>20}")
    for c in f["cleanup"]:
        mark = f"{c['expire_rows_per_s']:,} rows/s ({c['expire_s']} s)"
        delete = f"{c['delete_rows_per_s']:,} rows/s ({c['delete_s']} s)"
        print(f"  {c['batch_size']:>6} {c['rows']:>8,} {mark:>20} {delete:>20}")
    print("\nCompare-and-set advance (read version, UPDATE ... WHERE version = %s), writers released together:")
    for c in f["cas"]:
        rate = f"conflict rate {c['conflict_rate']:.1%}"
        print(f"  {c['threads']} writers on {c['workflows']:>2} workflow(s): {c['attempts_per_s']:,} attempts/s, "
              f"{c['advances_per_s']:,} advances/s, {rate} ({c['seconds']} s)")  # fmt: skip
    print(json.dumps(f))


if __name__ == "__main__":
    main()
