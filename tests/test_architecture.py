"""The layout's rules, read from the code's own import statements (top-level or inside a function, as Python
runs them): no import cycle between modules, none between the sub-packages of an app, catalog never imports
agents, and nothing that ships imports the demo, the benchmarks or the tests."""

import ast
import graphlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agents", "catalog", "toolhub", "demo", "bench")
SHIPPED = ("agents", "catalog", "toolhub")


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(path: Path, module: str) -> set[str]:
    """Every dotted name an import statement of the file names: `from a import b` names `a.b` (module b of
    package a, or name b of module a: import_graph keeps the most specific module)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports (the most specific module each imported name is)."""
    graph = {}
    for module, path in modules.items():
        targets = set()
        for name in imported_names(path, module):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        return error.args[1]
    return None


def subpackage_graph(graph: dict[str, set[str]], app: str) -> dict[str, set[str]]:
    """The app's top-level modules and sub-packages as single nodes, as a reader of its folder sees them."""

    def room(module: str) -> str | None:
        parts = module.split(".")
        return ".".join(parts[:2]) if parts[0] == app and len(parts) > 1 else None

    rooms: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = room(module)
        if source is None:
            continue
        rooms.setdefault(source, set()).update(t for t in map(room, targets) if t and t != source)
    return rooms


@pytest.fixture(scope="module")
def graph():
    return import_graph(project_modules())


def test_no_module_imports_itself_through_others(graph):
    assert find_cycle(graph) is None


@pytest.mark.parametrize("app", ["agents", "catalog"])
def test_no_sub_package_imports_itself_through_others(graph, app):
    assert find_cycle(subpackage_graph(graph, app)) is None


def test_catalog_never_imports_agents(graph):
    offending = {m: sorted(t for t in targets if t.split(".")[0] == "agents") for m, targets in graph.items()}
    assert {m: t for m, t in offending.items() if m.startswith("catalog") and t} == {}


def test_what_ships_never_imports_the_demo_the_benchmarks_or_the_tests(graph):
    modules = project_modules()
    offending = {}
    for module, path in modules.items():
        if module.split(".")[0] not in SHIPPED:
            continue
        reached = {name.split(".")[0] for name in imported_names(path, module)}
        if bad := reached & {"demo", "bench", "tests"}:
            offending[module] = sorted(bad)
    assert offending == {}


def test_the_checks_see_a_cycle_and_a_forbidden_import():
    """The rules above can fail: a made-up graph with a circle, and catalog importing agents, are caught."""
    circle = {"agents.turns.a": {"agents.router.b"}, "agents.router.b": {"agents.turns.a"}}
    assert find_cycle(circle) is not None
    assert find_cycle(subpackage_graph(circle, "agents")) is not None
    assert find_cycle({"agents.turns.a": {"agents.router.b"}, "agents.router.b": set()}) is None
    nested = {"agents.turns.a": {"agents.router.b"}, "agents.router.b": {"agents.turns.c"}, "agents.turns.c": set()}
    assert find_cycle(nested) is None and find_cycle(subpackage_graph(nested, "agents")) is not None


def test_every_task_that_dispatch_names_is_registered():
    from celery import current_app

    from agents.turns import dispatch

    for name in dispatch.TASK_NAMES:
        assert dispatch._task(name) is current_app.tasks[name]


def test_every_path_the_architecture_page_names_exists():
    """docs/architecture/index.md says where things live; a path it names that is gone makes it lie to a newcomer."""
    page = (ROOT / "docs" / "architecture" / "index.md").read_text()
    tree = page.split("```", 2)[1]
    named = {line.split()[0] for line in tree.splitlines() if line.strip() and not line.startswith(" ")}
    parents = [name for name in named if name.endswith("/")]
    nested = {line.split()[0] for line in tree.splitlines() if line.startswith("  ") and line.split()[0].endswith("/")}
    in_table = set(re.findall(r"`((?:agents|catalog|toolhub|demo|bench|tests|templates)/[\w/.]*)`", page))
    missing = [p for p in sorted(named | in_table) if not (ROOT / p).exists()]
    missing += [n for n in sorted(nested) if not any((ROOT / p / n).exists() for p in parents)]
    assert in_table and nested and missing == []
