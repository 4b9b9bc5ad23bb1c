import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SHARED = ROOT.parent / "shared"


def advisor(*args, cwd=None, timeout=600, env=None):
    """Run the installed `advisor` command as a user would; returns the CompletedProcess."""
    import os
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "advisor.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout, env=full_env)


def analyze_json(path, *extra):
    proc = advisor("analyze", path, "--format", "json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def rule_ids(doc, run=0):
    return {f["rule"] for f in doc["runs"][run]["findings"]}


@pytest.fixture(scope="session")
def fixture_copy(tmp_path_factory):
    """A private copy of a committed fixture, so tests never touch the repository's files."""
    def copy(name):
        dst = tmp_path_factory.mktemp("fx") / name
        shutil.copytree(FIXTURES / name, dst)
        return dst
    return copy
