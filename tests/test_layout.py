"""The layout's promises (CONTRIBUTING.md): dependencies point one way, no import circle,
no prefix family left flat, a short top of ``grimoire/``, no module over 600 lines.

Imports are read from the source (``ast``), module-level and inside functions alike: a
lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("grimoire", "curator", "playbook")


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """The project modules ``name`` imports (``from a import b`` counts ``a.b`` when that
    is a module, else ``a``)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    is_package = MODULES[name].name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor[:len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                       for alias in node.names]
        else:
            continue
        # A submodule importing an ancestor package (``from grimoire import __version__``)
        # is not an edge: Python imports every ancestor before any submodule anyway, so
        # the edge says nothing about layering, and counting it would make each package's
        # lazy re-export (``grimoire.Grimoire``) a circle.
        found.update(t for t in targets
                     if t in MODULES and t != name and not name.startswith(t + "."))
    return found


GRAPH = {name: _imports(name) for name in MODULES}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return out


def _importers(prefix: str) -> dict[str, set[str]]:
    return {name: {t for t in targets if t == prefix or t.startswith(prefix + ".")}
            for name, targets in GRAPH.items()}


def test_the_checker_sees_imports_inside_functions() -> None:
    # grimoire.grimoire reaches the curator only lazily, inside functions
    assert "curator.api" in GRAPH["grimoire.grimoire"]


def test_no_import_circle() -> None:
    assert _cycles() == []


def test_stores_retrieval_and_gate_never_import_the_curator() -> None:
    bad = {name: sorted(targets) for name, targets in _importers("curator").items()
           if targets and name.startswith(("grimoire.stores", "grimoire.retrieval",
                                           "grimoire.gate"))}
    assert bad == {}


def test_the_curator_never_imports_the_methods_the_service_or_the_facade() -> None:
    bad = {name: sorted(t for t in targets if t.startswith(
               ("grimoire.methods", "grimoire.service", "grimoire.cli"))
               or t == "grimoire.grimoire")
           for name, targets in GRAPH.items() if name.startswith("curator")}
    assert {name: t for name, t in bad.items() if t} == {}


def test_the_facade_reaches_the_curator_through_one_entry_point() -> None:
    reached = {t for t in GRAPH["grimoire.grimoire"] if t.startswith("curator")}
    assert reached == {"curator.api"}


def test_health_does_not_import_the_curator() -> None:
    assert not any(t.startswith("curator") for t in GRAPH["grimoire.methods.health"])


def test_top_of_grimoire_is_short() -> None:
    top = sorted(p.name for p in (REPO / "grimoire").glob("*.py"))
    assert len(top) <= 9, top


def test_no_prefix_family_left_flat() -> None:
    for folder in [REPO / "grimoire", REPO / "curator",
                   *[p for p in (REPO / "grimoire").rglob("*") if p.is_dir()],
                   *[p for p in (REPO / "curator").rglob("*") if p.is_dir()]]:
        stems = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
        prefixes = Counter(s.split("_", 1)[0] for s in stems if "_" in s)
        # a family is a prefix shared by three or more modules, one of them may be bare
        families = {p: n + (p in stems) for p, n in prefixes.items()}
        assert {p: n for p, n in families.items() if n >= 3} == {}, folder


def test_no_module_over_600_lines() -> None:
    long = {name: n for name, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 600}
    assert long == {}


def test_every_package_says_what_it_does_and_may_import() -> None:
    for name, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, name
