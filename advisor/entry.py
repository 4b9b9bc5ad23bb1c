"""The user's own training step, named `FILE.py:FUNCTION` or `module:function` (`advisor check --entry`).

FUNCTION takes no arguments and returns a callable that takes none: it runs one training step of
the user's model, its state carried inside (so a donating step can reuse its buffers), and returns
the arrays to wait on. `advisor.verify` uses the other shape a function may return, `(step, args)`:
each timed step then runs `step(*args)` on a fresh copy of `args` (a donating step deletes them).

Where the code comes from, never the folder advisor was started in:
- `FILE.py:FUNCTION`: the file is loaded by its path (importlib, under a module name of its own),
  relative to the working folder, or for the base side to `--base-dir`. So that it can import the
  modules beside it, its own folder is put on `sys.path` *after* the installation's entries: a
  `json.py` or `model.py` beside it never hides a library of the same name, and the base side's
  file imports the base checkout's siblings. Anything else it imports (an installed package of the
  user's project) comes from the interpreter's installation: time the base side with its own
  venv (`--base-python`) when the project is installed as a package.
- `module:function`: imported from the installation's `sys.path` (the working folder off it).

The user's code runs only in child processes (`python -m advisor.entry SPEC` profiles it, the
timing workers of advisor/timing.py time it), each started in the side's own folder (`cwd`: the
working folder, or `--base-dir`), where a relative data path in the user's code resolves.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .errors import AdvisorError

PROFILED_STEPS = 3
WORKER_ENV = "ADVISOR_ENTRY_WORKER"     # set in the children that load the user's file


class EntryError(AdvisorError):
    """The entry cannot be loaded or run: no such file or function, it raised, or returned no step."""


def split(text: str) -> tuple[str, str]:
    """("FILE.py" or "module", "function") of `FILE.py:FUNCTION` / `module:function`."""
    where, sep, name = text.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise EntryError(f"--entry expects FILE.py:FUNCTION or module:function, got {text!r}")
    return where, name


def is_file(where: str) -> bool:
    return where.endswith(".py") or "/" in where or os.sep in where


def spec(text: str, root: Path) -> dict:
    """The JSON spec a child process loads the entry from: a file resolved against `root` (the
    working folder, or --base-dir), which is also the folder the child runs in."""
    where, name = split(text)
    root = Path(root).resolve()
    if is_file(where):
        path = (root / where).resolve()
        if not path.is_file():
            raise EntryError(f"{text}: no such file {path}")
        return {"entry": f"{path}:{name}", "cwd": str(root), "name": text}
    return {"entry": f"{where}:{name}", "cwd": str(root), "name": text}


# --- in the child: load and run the user's code ------------------------------------------------


def load(text: str) -> Callable:
    """The function an entry names (file by path, or installed module)."""
    import importlib
    import importlib.util

    where, name = split(text)
    if is_file(where):
        path = Path(where)
        if not path.is_file():
            raise EntryError(f"{text}: no such file")
        folder = str(path.parent)
        if folder not in sys.path:
            sys.path.append(folder)        # its siblings importable, after the installation's entries
        module_name = "_advisor_entry_" + hashlib.sha256(str(path).encode()).hexdigest()[:12]
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module     # dataclasses and pickling look their module up
        try:
            module_spec.loader.exec_module(module)
        except Exception as err:
            raise EntryError(f"{text}: importing {path.name} raised {_one_line(err)}") from None
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as err:
            raise EntryError(f"{text}: cannot import {where} ({_one_line(err)})") from None
        except Exception as err:
            raise EntryError(f"{text}: importing {where} raised {_one_line(err)}") from None
    fn = getattr(module, name, None)
    if fn is None:
        raise EntryError(f"{text}: no function {name} in {Path(where).name if is_file(where) else where}")
    if not callable(fn):
        raise EntryError(f"{text}: {name} is a {type(fn).__name__}, not a function")
    return fn


def build(text: str, kwargs: Optional[dict] = None) -> Callable[[], Any]:
    """The zero-argument step: FUNCTION(**kwargs) called once; it returns a callable taking no
    arguments, or `(step, args)` (then each call runs step on a fresh copy of args)."""
    fn = load(text)
    try:
        made = fn(**(kwargs or {}))
    except Exception as err:
        raise EntryError(f"{text}: calling {split(text)[1]}() raised {_one_line(err)}") from None
    if isinstance(made, tuple) and len(made) == 2 and callable(made[0]):
        return _fresh_args(*made)
    if not callable(made):
        raise EntryError(f"{text}: {split(text)[1]}() returned a {type(made).__name__}; it must return a "
                         "callable that takes no arguments and runs one training step")
    return made


def _fresh_args(step: Callable, args) -> Callable[[], Any]:
    """`step(*args)` on a fresh copy of args at every call; `.prepare()` makes the copy ahead and
    returns the call alone, so that a timed region holds the step only."""
    import jax

    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    if any(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree_util.tree_leaves(args)):
        raise EntryError("the step's args are jax.ShapeDtypeStruct: timing runs the step, give arrays")

    def prepare() -> Callable[[], Any]:
        copy = jax.block_until_ready(jax.tree_util.tree_map(
            lambda x: x.copy() if isinstance(x, jax.Array) else x, args))
        return lambda: step(*copy)

    def run():
        return prepare()()
    run.prepare = prepare
    return run


def step_once(step: Callable[[], Any], text: str) -> Any:
    import jax

    try:
        return jax.block_until_ready(step())
    except Exception as err:
        raise EntryError(f"{text}: the step raised {_one_line(err)}") from None


def timed_step(spec_: dict) -> Callable[[], float]:
    """For a timing worker (advisor/timing.py): the entry built in its side's folder, compiled
    through the compilation cache's untraced folder, and a function that runs one step and
    returns its wall time (ms, call to block_until_ready)."""
    import jax

    from . import compile_cache

    os.environ[WORKER_ENV] = "1"     # advisor.verify(time=True) at the file's top level: refused, not recursive
    os.chdir(spec_.get("cwd") or ".")
    text = spec_["entry"]
    folder = compile_cache.untraced_dir()
    key = json.dumps([spec_, os.environ.get("XLA_FLAGS", "")], sort_keys=True)
    # the user's prints go to stderr: stdout carries the worker's answers
    with contextlib.redirect_stdout(sys.stderr):
        with compile_cache.one_compile(folder, key), compile_cache.active(folder=folder):
            step = build(text, spec_.get("kwargs"))
            step_once(step, text)       # compiles inside the cache's context

    def timed() -> float:
        with contextlib.redirect_stdout(sys.stderr):
            call = step.prepare() if hasattr(step, "prepare") else step
            t0 = time.perf_counter()
            out = call()
            jax.block_until_ready(out)
            ms = round((time.perf_counter() - t0) * 1e3, 3)
        del out, call
        return ms
    return timed


def profile(spec_: dict, logdir: Path, steps: int = PROFILED_STEPS) -> Path:
    """In the child: one step to compile (not profiled), then `steps` steps under jax.profiler,
    each in a step annotation; the run folder beside the memory profile and advisor_run.json."""
    os.environ[WORKER_ENV] = "1"
    os.chdir(spec_.get("cwd") or ".")
    text = spec_["entry"]
    with contextlib.redirect_stdout(sys.stderr):      # stdout carries the answer
        return _profile(step_text=text, spec_=spec_, logdir=logdir, steps=steps)


def _profile(step_text: str, spec_: dict, logdir: Path, steps: int) -> Path:
    text = step_text
    step = build(text, spec_.get("kwargs"))     # bad input first: before the profiler's imports
    import jax

    from . import hardware
    from .cleanup import remove, untrack
    from .locate import MEMORY_PROFILE, RUN_METADATA
    from .runner import STEP_ANNOTATION, _claim_run_dir, _private_logdir, _versions

    t0 = time.perf_counter()
    step_once(step, text)
    first_s = time.perf_counter() - t0
    private = _private_logdir(Path(logdir))
    wall_ms = []
    try:
        jax.profiler.start_trace(str(private))
        try:
            for i in range(steps):
                t0 = time.perf_counter()
                with jax.profiler.StepTraceAnnotation(STEP_ANNOTATION, step_num=i):
                    step_once(step, text)
                wall_ms.append(round((time.perf_counter() - t0) * 1e3, 3))
        finally:
            jax.profiler.stop_trace()
    except BaseException:
        remove(private)
        raise
    run_dir = _claim_run_dir(private, Path(logdir) / "plugins" / "profile")
    try:
        jax.profiler.save_device_memory_profile(str(run_dir / MEMORY_PROFILE))
        device = jax.devices()[0]
        meta = {"entry": text, "backend": device.platform, "device_kind": device.device_kind,
                "device_count": jax.device_count(), "versions": _versions(), "host": hardware.this_host(),
                "first_step_s": round(first_s, 3), "step_wall_ms": wall_ms}
        (run_dir / RUN_METADATA).write_text(json.dumps(meta, indent=2) + "\n")
    except BaseException:
        remove(run_dir)
        raise
    untrack(run_dir)
    return run_dir


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


# --- in the parent: start the child ------------------------------------------------------------


def profile_in_child(spec_: dict, logdir: Path, steps: int = PROFILED_STEPS, python: Optional[str] = None,
                     label: str = "candidate") -> Path:
    """Profile the entry in a child Python (the side's interpreter, started in the side's folder,
    that folder off its import path); the run folder it wrote. Bad input (no such function, the
    function raised or returned no step) is one line: EntryError."""
    import subprocess
    import tempfile

    from .child_python import module_command

    cmd = module_command("advisor.entry", json.dumps({**spec_, "logdir": str(logdir), "steps": steps}),
                         python=python)
    with tempfile.TemporaryFile(mode="w+") as err:
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=spec_.get("cwd"))
        except OSError as e:
            raise AdvisorError(f"cannot profile the {label} side with {python or sys.executable}: "
                               f"{e.strerror}") from None
        err.seek(0)
        stderr = [x for x in err.read().splitlines() if x.strip()]
    answer = _last_json(proc.stdout)
    if "run_dir" in answer:
        return Path(answer["run_dir"])
    if "error" in answer:
        raise EntryError(f"{answer['error']}" + (f" (the {label} side)" if label == "base" else ""))
    raise AdvisorError(f"profiling the {label} side ({python or sys.executable}) stopped (exit {proc.returncode}): "
                       f"{stderr[-1] if stderr else 'no message'}")


def profile_sides(request, tmp: Path, progress: Callable[[str], None] = lambda msg: None
                  ) -> tuple[Path, Optional[Path], dict, Optional[dict]]:
    """`advisor check --entry`: the candidate profiled (in the working folder), then the base side
    where there is one (`--base-dir`, `--base-python`), one after the other: (candidate's run
    folder, base's or None, the candidate's timing spec, the base's or None)."""
    r = request
    steps = r.steps if r.steps is not None else PROFILED_STEPS
    if steps < 1:
        raise AdvisorError("--steps must be at least 1")
    new_spec = spec(r.entry, Path.cwd())
    base_spec = None
    if r.base_dir is not None or r.base_python:
        if r.base_dir is not None and not Path(r.base_dir).is_dir():
            raise EntryError(f"--base-dir {r.base_dir}: no such folder")
        if r.base_dir is not None and not is_file(split(r.entry)[0]) and not r.base_python:
            raise EntryError(f"{r.entry} names an installed module: the base side imports it from its own "
                             "installation; give --base-python (the base checkout's venv), or name the file "
                             "(FILE.py:FUNCTION)")
        base_spec = spec(r.entry, Path(r.base_dir) if r.base_dir is not None else Path.cwd())
    progress(f"profiling {r.entry} ({steps} steps, after one to compile)")
    path = profile_in_child(new_spec, r.logdir or tmp, steps)
    base_path = None
    if base_spec is not None:
        progress(f"profiling the base side's {r.entry}")
        base_logdir = (r.logdir / "base") if r.logdir is not None else tmp / "base"
        base_path = profile_in_child(base_spec, base_logdir, steps, r.base_python, "base")
    return path, base_path, new_spec, base_spec


def _last_json(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            return doc
    return {}


def shown(err: EntryError, spec_: dict) -> str:
    """The error with the entry as the user wrote it (relative to the side's folder), not resolved."""
    return str(err).replace(spec_["entry"], spec_.get("name") or spec_["entry"])


def main(argv: Sequence[str]) -> int:
    try:
        spec_ = json.loads(argv[0])
        run_dir = profile(spec_, Path(spec_["logdir"]), int(spec_.get("steps", PROFILED_STEPS)))
    except EntryError as err:
        print(json.dumps({"error": shown(err, spec_)}), flush=True)
        return 2
    except Exception as err:  # noqa: BLE001 - the parent shows it as one line
        print(json.dumps({"error": _one_line(err)}), flush=True)
        return 1
    print(json.dumps({"run_dir": str(run_dir)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
