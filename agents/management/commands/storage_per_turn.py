import json

from django.core.management.base import BaseCommand, CommandError

from agents.turns.storage import NotPostgreSQL, turn_storage


class Command(BaseCommand):
    help = (
        "Rows and bytes (pg_total_relation_size: table, TOAST and indexes) of the tables a turn writes, in total "
        "and per turn, on this PostgreSQL database; the last line is JSON."
    )

    def handle(self, *args, **options):
        try:
            storage = turn_storage()
        except NotPostgreSQL as exc:
            raise CommandError(str(exc)) from None
        per_turn = storage.per_turn
        figures = {
            "turns": storage.turns,
            "bytes": storage.bytes,
            "bytes_per_turn": _round(per_turn(storage.bytes)),
            "tables": {
                t.table: {
                    "rows": t.rows,
                    "bytes": t.bytes,
                    "rows_per_turn": _round(per_turn(t.rows), 2),
                    "bytes_per_turn": _round(per_turn(t.bytes)),
                }  # fmt: skip
                for t in storage.tables
            },
        }
        self.stdout.write(f"{storage.turns} turns")
        self.stdout.write(f"{'table':<22}{'rows':>10}{'bytes':>14}{'rows/turn':>11}{'bytes/turn':>12}")
        for table, t in figures["tables"].items():
            self.stdout.write(f"{table:<22}{t['rows']:>10}{t['bytes']:>14}{_text(t['rows_per_turn']):>11}"
                              f"{_text(t['bytes_per_turn']):>12}")  # fmt: skip
        self.stdout.write(
            f"{'all of them':<22}{'':>10}{storage.bytes:>14}{'':>11}{_text(figures['bytes_per_turn']):>12}"
        )
        self.stdout.write(json.dumps(figures))


def _round(value: float | None, digits: int = 0):
    if value is None:
        return None
    return round(value, digits) if digits else round(value)


def _text(value) -> str:
    return "-" if value is None else str(value)
