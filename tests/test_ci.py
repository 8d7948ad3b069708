"""README's commands are what CI runs: the install line and the test command, verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Quick start.*?```bash\n(.*?)```", readme, re.S).group(1)
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_readme_quick_start_is_one_install_then_the_main_job():
    install, run = quick_start_commands()
    assert install.startswith("pip install") and run == "python scripts/train_trl.py"


def test_ci_runs_the_readme_install_line_and_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    install = quick_start_commands()[0]
    assert install in ci
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    test_cmd = re.search(r"Run the tests.*?```bash\n(.*?)\n```", readme, re.S).group(1).strip()
    assert test_cmd in ci


def test_the_cpu_install_takes_the_cpu_build_of_torch():
    install = quick_start_commands()[0]
    assert "download.pytorch.org/whl/cpu" in install
    first, second = install.split("&&")
    assert "torch==" in first and "-r requirements.txt" in second
