"""The package's layering: the simulation, the server and the client never load torch;
the training machinery never loads it at import time; nothing imports a layer above it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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
    assert {"config", "models", "context", "evaluation", "run_state", "plots"} <= set(modules)
    assert loaded_after("; ".join(f"import lifestack.training.{m}" for m in modules)) == set()


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
