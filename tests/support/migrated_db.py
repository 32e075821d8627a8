"""The fast stage's migrated SQLite database, made once per code.

The fast stage's in-memory SQLite test database is a copy of the one the last run migrated, while no code that
migrations run or import has changed: each worker's migrate took ~3 s of a ~90 s stage. The copy is keyed by a hash
of every file of the project's apps and settings (data files included) and of Django's version, so any edit migrates
again (and writes the new copy under var/, in place of the old ones). PostgreSQL (the integration stage) always
migrates. Tests that need a migrated database file of their own (a deployment's, for manage.py) copy it too.
"""

import functools
import hashlib
import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import django
from django.conf import settings
from django.db.backends.sqlite3.creation import DatabaseCreation

FOLDERS = ("agents", "catalog", "toolhub", "demo.loyalty_mcp")


@functools.cache
def path() -> Path:
    """Where the copy for this code is (it exists once a process of this code made an in-memory test database)."""
    digest = hashlib.sha256(django.get_version().encode())
    for folder in FOLDERS:
        for file in sorted((settings.BASE_DIR / folder).rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(str(file.relative_to(settings.BASE_DIR)).encode() + b"\0" + file.read_bytes())
    return settings.BASE_DIR / "var" / f"test-db-{digest.hexdigest()[:16]}.sqlite3"


def copy_to(target: Path) -> bool:
    """Write the migrated database to `target`, as `manage.py migrate` makes it; False when there is no copy yet."""
    if not path().exists():
        return False
    shutil.copyfile(path(), target)
    return True


def install() -> None:
    """In-memory SQLite test databases come from the copy (and the first one made for this code writes it)."""
    migrate = DatabaseCreation.create_test_db

    def create_test_db(self, verbosity=1, autoclobber=False, serialize=True, keepdb=False):
        name = self._get_test_db_name()
        if keepdb or not self.is_in_memory_db(name):
            return migrate(self, verbosity, autoclobber, serialize, keepdb)
        copy = path()
        if not copy.exists():
            name = migrate(self, verbosity, autoclobber, serialize, keepdb)
            written = copy.with_name(f"{copy.name}.{os.getpid()}")
            copy.parent.mkdir(parents=True, exist_ok=True)
            with closing(sqlite3.connect(written)) as target:
                self.connection.connection.backup(target)
            os.replace(written, copy)  # whole or not at all: the other worker may write it too
            for old in copy.parent.glob("test-db-*.sqlite3"):
                if old != copy:
                    old.unlink(missing_ok=True)
            return name
        self.connection.close()
        settings.DATABASES[self.connection.alias]["NAME"] = name
        self.connection.settings_dict["NAME"] = name
        self.connection.ensure_connection()
        with closing(sqlite3.connect(copy)) as source:
            source.backup(self.connection.connection)
        if serialize:
            self.connection._test_serialized_contents = self.serialize_db_to_string()
        return name

    DatabaseCreation.create_test_db = create_test_db
