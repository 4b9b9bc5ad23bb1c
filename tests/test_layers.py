"""The shape of the code, held (docs/architecture.md): data flows one way, so every module stands on
one floor and imports only what stands on its floor or below (read with setup.cfg's package
mapping: rules/ and workloads/ install as advisor.rules and advisor.workloads), and none imports one
that imports it back, at its top or inside a function; no rule is named below the rules
(a rule declares what it reads, Rule.needs, and the loader, the job and the TensorBoard links read
that); a view computes from the profile and the bound settings, and reads no file."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"advisor": ROOT / "advisor", "advisor.rules": ROOT / "rules", "advisor.workloads": ROOT / "workloads"}


def _modules() -> dict[str, Path]:
    """{module name as installed: its file}, for advisor and the two packages installed into it."""
    out = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            out[".".join([package, *parts])] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The modules of advisor that `name` imports, anywhere in its file."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module
            targets = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:       # a name in a module: the module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def test_no_module_imports_one_that_imports_it_back():
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    index, low, stack, circles = {}, {}, [], []

    def visit(v):                  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(part) > 1:
                circles.append({m: sorted(graph[m] & set(part)) for m in sorted(part)})

    for name in graph:
        if name not in index:
            visit(name)
    assert not circles, circles


# The floors of the house, from the ground up (docs/architecture.md): a module imports only modules on
# its own floor or below. A name is a module or a package (all its modules); every module has one floor.
LAYERS = [
    ("helpers", ["advisor.errors", "advisor.units", "advisor.outputs", "advisor.cleanup", "advisor.safe_json",
                 "advisor.version", "advisor.hardware", "advisor.child_python", "advisor.sources",
                 "advisor.clone_folders", "advisor.compile_cache", "advisor.findings"]),
    ("workloads", ["advisor.workloads", "advisor.workload_memory", "advisor.run_label"]),
    ("locate", ["advisor.locate"]),
    ("load", ["advisor.model", "advisor.load", "advisor.categories", "advisor.trace_head", "advisor.heap_traces"]),
    ("settings", ["advisor.rule", "advisor.message", "advisor.remedies", "advisor.settings", "advisor.peak_table",
                  "advisor.calibrate"]),
    ("views", ["advisor.views"]),
    ("rules", ["advisor.rules"]),
    ("advice checked", ["advisor.memory_plan", "advisor.compiled_advice"]),
    ("job", ["advisor.job", "advisor.user_input"]),
    ("results compared", ["advisor.compare", "advisor.op_diff"]),
    ("renderers", ["advisor.report"]),
    ("engines", ["advisor.engine", "advisor.ray_engine"]),
    ("programs run", ["advisor.runner", "advisor.host_launcher", "advisor.entry", "advisor.timing"]),
    ("commands", ["advisor.api", "advisor.check", "advisor.sweep", "advisor.verification", "advisor.tune",
                  "advisor.bad_input", "advisor.tensorboard", "advisor.cli"]),
    ("the package's face", ["advisor", "advisor.__main__", "advisor.docs"]),
]


def floor(module: str) -> int:
    """The floor of a module: its longest name in LAYERS ("advisor" names only the package's face)."""
    best = None
    for number, (_, names) in enumerate(LAYERS):
        for name in names:
            if (module == name or (name != "advisor" and module.startswith(name + "."))) \
                    and (best is None or len(name) > len(best[1])):
                best = (number, name)
    assert best is not None, f"{module} stands on no floor: add it to LAYERS"
    return best[0]


def test_every_module_stands_on_one_floor():
    for name in MODULES:
        floor(name)


def test_imports_only_run_down():
    """Not only no circles: no module imports one on a higher floor, at its top or inside a function."""
    up = sorted(f"{name} ({LAYERS[floor(name)][0]}) -> {target} ({LAYERS[floor(target)][0]})"
                for name, path in MODULES.items() for target in _imports(name, path) if floor(target) > floor(name))
    assert not up, "\n".join(up)


RENDERER_FLOORS = {"helpers", "workloads", "results compared", "renderers"}


def test_a_renderer_reads_result_documents():
    """Renderers stand above the job on the road but never reach back into it, the engines, the rules,
    the views or the loader: what they draw is in the result documents they are given."""
    reach = sorted(f"{name} -> {target}" for name, path in MODULES.items() if name.startswith("advisor.report")
                   for target in _imports(name, path) if LAYERS[floor(target)][0] not in RENDERER_FLOORS)
    assert not reach, reach


def test_the_floor_test_sees_an_import_up():
    """The test above could pass by reading nothing: a renderer importing the job would be caught."""
    assert floor("advisor.job") > floor("advisor.views.idle") > floor("advisor.load.loader")
    assert floor("advisor.report.html") > floor("advisor.job")
    assert "advisor.views.bound" in _imports("advisor.views.idle", MODULES["advisor.views.idle"])


def test_the_import_reader_sees_a_circle():
    """The test above could pass by reading nothing: engine -> job is read, from a relative import."""
    assert "advisor.job" in _imports("advisor.engine", MODULES["advisor.engine"])
    assert "advisor.views.bound" in _imports("advisor.views.idle", MODULES["advisor.views.idle"])


# A rule id in advisor's own code where it is not rule knowledge: (file, id) and why.
NAMED_ON_PURPOSE = {
    ("advisor/cli.py", "host-bound"): "--option's help shows one",
    ("advisor/user_input.py", "host-bound"): "an error shows how the config file names rules and options",
    ("advisor/settings.py", "scan-dynamic-update-slice"): "an error shows how an option is written",
    ("advisor/views/efficiency.py", "host-bound"): "the verdict's word for the host bottleneck, as memory-bound",
}


def _strings(tree: ast.AST):
    """The string constants of a module that are not docstrings (f-strings' text included)."""
    docs = {id(body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and (body := node.body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.value


def test_no_rule_is_named_below_the_rules():
    from advisor import rules

    found = set()
    for path in sorted((ROOT / "advisor").rglob("*.py")):
        strings = list(_strings(ast.parse(path.read_text())))
        for rule in rules.ALL:
            if any(re.search(rf"(?<![\w-]){re.escape(rule.id)}(?![\w-])", s) for s in strings):
                found.add((str(path.relative_to(ROOT)), rule.id))
    assert found - set(NAMED_ON_PURPOSE) == set()
    assert set(NAMED_ON_PURPOSE) - found == set(), "named on purpose no longer: drop it from the list"


# What a view may import: the profile model, the bound settings and the pure helpers it is computed with.
VIEW_IMPORTS = {"advisor.model", "advisor.settings", "advisor.peak_table", "advisor.units", "advisor.categories",
                "advisor.sources",
                "advisor.run_label", "advisor.version"}


VIEWS = {name: path for name, path in MODULES.items() if name.startswith("advisor.views")}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_a_view_reads_no_file(name):
    path = VIEWS[name]
    outside = {m for m in _imports(name, path) if not m.startswith("advisor.views") and m not in VIEW_IMPORTS}
    assert not outside, f"{name} imports {sorted(outside)}"
    tree = ast.parse(path.read_text())
    stdlib = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    stdlib |= {node.module.split(".")[0] for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and not node.level and node.module}
    assert not stdlib & {"os", "io", "pathlib", "shutil", "socket", "json", "pickle", "subprocess", "advisor"}
    calls = {node.func.id if isinstance(node.func, ast.Name) else node.func.attr
             for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))}
    assert not calls & {"open", "read_text", "read_bytes", "Path", "load", "loads"}, path.name


def test_no_file_over_600_lines():
    """Small modules a reader takes in whole (the guide's limit)."""
    long = {str(p.relative_to(ROOT)): n for folder in PACKAGES.values() for p in folder.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 600}
    assert not long, long
