"""The package's layering: the simulation, the server and the client never load torch;
the training machinery never loads it at import time; nothing imports a layer above it;
no module of ``lifestack`` takes part in an import cycle."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "trl", "peft", "unsloth", "datasets", "accelerate")
# layers, lowest first: a module may import its own layer and those below it
LAYERS = {"core": ROOT / "lifestack", "training": ROOT / "lifestack" / "training"}


def loaded_after(imports: str) -> set[str]:
    """The heavy top-level packages a fresh interpreter has loaded after ``imports``."""
    code = (f"import sys; {imports}; "
            f"print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    return set(out.stdout.split())


def test_the_simulation_server_and_client_load_no_torch():
    assert loaded_after("import lifestack, lifestack.env, lifestack.episodes, lifestack.service, lifestack.serve, "
                        "lifestack.client, lifestack.calibrate, lifestack.hacks, lifestack.feedback") == set()


def test_the_training_package_imports_torch_only_inside_functions():
    modules = sorted(p.stem for p in LAYERS["training"].glob("*.py") if p.stem != "__init__")
    assert {"config", "models", "context", "run_evaluation", "run_state", "plots"} <= set(modules)
    assert loaded_after("; ".join(f"import lifestack.training.{m}" for m in modules)) == set()


def test_the_training_package_names_every_module_it_holds():
    import lifestack.training

    modules = {p.stem for p in LAYERS["training"].glob("*.py") if p.stem != "__init__"}
    named = set(re.findall(r"``(\w+)``", lifestack.training.__doc__))
    assert modules - named == set()  # the package docstring is its table of contents


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the package the file is in
                base = "lifestack" + ("" if path.parent.name == "lifestack" else "." + path.parent.name)
                out.add(f"{base}.{node.module}" if node.module else base)
            else:
                out.add(node.module or "")
    return out


def test_no_module_imports_a_layer_above_it():
    for path in sorted(LAYERS["core"].glob("*.py")):  # the simulation, server, client: never the trainer
        bad = {m for m in _imports(path) if m.startswith("lifestack.training") or m.split(".")[0] == "train_trl"}
        assert not bad, (path.name, bad)
    for path in sorted(LAYERS["training"].glob("*.py")):  # the machinery: never the script
        bad = {m for m in _imports(path) if m.split(".")[0] in ("train_trl", "scripts")}
        assert not bad, (path.name, bad)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path, name: str, modules: set[str]) -> Iterator[tuple[str, int]]:
    """``(lifestack module, line)`` for every import statement in the file at ``path``
    (module ``name``), wherever it stands: at module level, inside a function, under
    ``if TYPE_CHECKING``. Relative imports are resolved; ``from package import x`` names
    the submodule ``package.x`` when there is one, else the package. A parent package's
    ``__init__`` that Python runs on the way to a submodule is no edge: Python lets a
    submodule load while its package is still initialising."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import lifestack.x.y` names lifestack.x.y or its package
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target, node.lineno


def import_graph() -> dict[str, dict[str, int]]:
    """Every module of ``lifestack`` (core and training) -> {module it imports: the line
    of its first import of it}. Imports inside ``if TYPE_CHECKING`` count like any other:
    a dependency only the type checker follows is still one, and moving the concept to
    where it belongs removes it as well as it removes any other."""
    paths = {_module_name(p): p for p in sorted((ROOT / "lifestack").rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {}
    for name, path in paths.items():
        edges = graph.setdefault(name, {})
        for target, line in _imported_modules(path, name, set(paths)):
            edges[target] = min(line, edges.get(target, line))
    return graph


def import_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One shortest cycle through each module that lies on a cycle, each cycle once,
    written from its smallest module name (``[a, b, ..., a]``)."""
    cycles: dict[tuple[str, ...], list[str]] = {}
    for start in sorted(graph):
        parent: dict[str, str] = {}
        frontier, seen = [start], {start}
        while frontier and start not in parent:  # breadth first: the shortest way back to start
            nxt = []
            for node in frontier:
                for target in sorted(graph.get(node, ())):
                    if target == start and start not in parent:
                        parent[start] = node
                    elif target not in seen:
                        seen.add(target)
                        parent[target] = node
                        nxt.append(target)
            frontier = nxt
        if start in parent:
            path, node = [start], parent[start]
            while node != start:
                path.append(node)
                node = parent[node]
            path.reverse()
            i = path.index(min(path))
            ring = tuple(path[i:] + path[:i])
            cycles.setdefault(ring, [*ring, ring[0]])
    return list(cycles.values())


def test_the_import_graph_sees_every_kind_of_import(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "import lifestack.metrics, torch.distributed\n"
                      "from lifestack.training import seeds, run_state as R\n"  # submodules by name
                      "from .. import env\n"
                      "from .grpo_rewards import REWARD_NAMES\n"
                      "from lifestack import LifeStackEnv\n"  # a name the package holds: the package
                      "if TYPE_CHECKING:\n"
                      "    from lifestack.tasks import Task\n"
                      "def f():\n"
                      "    import lifestack.value as V\n"
                      "    from ..policies import heuristic\n", encoding="utf-8")
    modules = {"lifestack", "lifestack.env", "lifestack.metrics", "lifestack.policies", "lifestack.tasks", "lifestack.value",
               "lifestack.training", "lifestack.training.mod", "lifestack.training.grpo_rewards",
               "lifestack.training.run_state", "lifestack.training.seeds"}
    assert sorted(_imported_modules(source, "lifestack.training.mod", modules), key=lambda e: (e[1], e[0])) == [
        ("lifestack.metrics", 2), ("lifestack.training.run_state", 3), ("lifestack.training.seeds", 3),
        ("lifestack.env", 4), ("lifestack.training.grpo_rewards", 5), ("lifestack", 6), ("lifestack.tasks", 8),
        ("lifestack.value", 10), ("lifestack.policies", 11)]
    assert {"lifestack", "lifestack.env", "lifestack.training", "lifestack.training.grpo_rewards"} <= set(import_graph())
    assert import_cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}}) == [["a", "b", "c", "a"]]


def test_no_import_cycles_in_lifestack():
    """Each module's concepts sit above everything they import: no module of ``lifestack``
    imports, at any depth and from anywhere in its file, a module that imports it back."""
    graph = import_graph()
    cycles = import_cycles(graph)
    described = [" -> ".join(f"{a}:{graph[a][b]}" for a, b in zip(c, c[1:])) + f" -> {c[-1]}" for c in cycles]
    assert not cycles, "import cycles in lifestack (module:line of the import that leads on):\n" + "\n".join(described)


def documented_layers() -> list[list[str]]:
    """The layers of modules ``lifestack/__init__.py``'s docstring lists, lowest first."""
    doc = ast.get_docstring(ast.parse((ROOT / "lifestack" / "__init__.py").read_text(encoding="utf-8")))
    assert "The modules in layers, lowest first" in doc, "lifestack/__init__.py's docstring lists no layers"
    block = doc.split("The modules in layers, lowest first", 1)[1].split("\n\n")[1]
    return [[name.strip() for name in line.split(",")] for line in block.strip().splitlines()]


def test_the_package_docstring_lists_the_layers_the_imports_follow():
    """Every module of ``lifestack`` sits on one line of the documented layering (lowest
    first) and imports only modules on the lines above its own (``lifestack.training.*``
    are ``training``, and may import each other; the package itself, which re-exports the
    core, only the training package may import)."""
    layers = documented_layers()
    layer_of = {name: i for i, names in enumerate(layers) for name in names}
    modules = {p.stem for p in LAYERS["core"].glob("*.py") if p.stem != "__init__"} | {"training"}
    assert sorted(layer_of) == sorted(modules) and sum(map(len, layers)) == len(modules)

    def layer(module: str) -> float:
        return len(layers) - 1.5 if module == "lifestack" else layer_of[module.split(".")[1]]

    upward = [f"{module}:{line} imports {target}" for module, edges in import_graph().items() if module != "lifestack"
              for target, line in edges.items()
              if layer(target) >= layer(module) and not (layer(module) == layer(target) == layer_of["training"])]
    assert not upward, "imports that break lifestack/__init__.py's layering:\n" + "\n".join(upward)
