"""Analyses on demand: each in a worker child process (`worker.py`), started and watched by a
thread, so a request only looks up a state; at most `workers` children at once, the rest queued.

Each analysis has a budget (`Budget`): wall time, and private memory (resident and not shared: the
trace's mapped pages are not counted) of the worker and its children together. Past either, the
worker is stopped, the run fails with a line naming the budget and how to raise it, and the next run
in the queue starts; that failure stays (a reload does not start it again) until the run's files
change or advisor restarts.

A worker stopped by SIGTERM removes its temporary folders and xprof's child itself (worker.py); one
still running GRACE_S later is killed with its children, and its folders are removed here. The
threads are daemons and the children are ended at exit: stopping TensorBoard or `serve` waits at
most GRACE_S for an analysis.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import math
import os
import queue
import subprocess
import tempfile
import threading
import time
from typing import Optional

from .. import cleanup
from ..child_python import module_command
from ..errors import AdvisorError
from . import cache

TIME_ENV, MEMORY_ENV = "ADVISOR_ANALYSIS_TIMEOUT_S", "ADVISOR_ANALYSIS_MEMORY_MB"
DEFAULT_SECONDS, DEFAULT_MEMORY_MB = 600.0, 2048.0
GRACE_S = 5.0       # from SIGTERM to SIGKILL
POLL_S = 0.25       # how often a running worker's time and memory are checked


@dataclasses.dataclass(frozen=True)
class Budget:
    seconds: float = DEFAULT_SECONDS
    memory_mb: float = DEFAULT_MEMORY_MB

    @classmethod
    def from_env(cls, seconds: Optional[float] = None, memory_mb: Optional[float] = None) -> "Budget":
        """The values given, else $ADVISOR_ANALYSIS_TIMEOUT_S and $ADVISOR_ANALYSIS_MEMORY_MB, else the
        defaults; AdvisorError for one that is not a positive number."""
        return cls(_positive(seconds, TIME_ENV, DEFAULT_SECONDS, "--time-budget"),
                   _positive(memory_mb, MEMORY_ENV, DEFAULT_MEMORY_MB, "--memory-budget"))


def _positive(value, env: str, default: float, flag: str) -> float:
    name, text = flag, f"{value!r}"
    if value is None:
        text = os.environ.get(env, "").strip()
        if not text:
            return default
        name = env
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        text = repr(text)
    if not (math.isfinite(value) and value > 0):
        raise AdvisorError(f"{name}={text}: expected a positive number of {'seconds' if env == TIME_ENV else 'MiB'}")
    return float(value)


def private_mib(pid: int) -> float:
    """Resident memory of the process and its descendants that no other process shares (RSS less
    file-backed and shared pages), MiB; 0 once it is gone."""
    import psutil

    try:
        procs = [psutil.Process(pid)]
        procs += procs[0].children(recursive=True)
    except psutil.Error:
        return 0.0
    total = 0
    for p in procs:
        try:
            m = p.memory_info()
        except psutil.Error:
            continue
        total += m.rss - getattr(m, "shared", 0)
    return total / 2**20


def end_processes(children: list[subprocess.Popen], grace: float = GRACE_S) -> None:
    """SIGTERM to each (a worker then cleans up after itself), SIGKILL to each one and its descendants
    still running `grace` seconds later, and the temporary folders of every one removed."""
    import psutil

    descendants = []
    for child in children:
        try:
            descendants += psutil.Process(child.pid).children(recursive=True)
        except psutil.Error:
            pass
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + grace
    for child in children:
        try:
            child.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    for p in descendants:       # a killed worker's own children (xprof's converters)
        try:
            p.kill()
        except psutil.Error:
            pass
    for child in children:
        cleanup.remove_folders_of(child.pid)


class _Budgeted:
    """Watches one worker from a thread of its own; stops it when it goes past its budget, and says
    why in `over`."""

    def __init__(self, child: subprocess.Popen, budget: Budget):
        self.child, self.budget, self.over = child, budget, None
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="advisor-budget", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        start = time.monotonic()
        while not self._ended.wait(POLL_S):
            if time.monotonic() - start > self.budget.seconds:
                self.over = (f"the analysis did not finish within its time budget of {self.budget.seconds:g} s; "
                             f"stopped ({TIME_ENV}, or `advisor serve --time-budget`, raises it)")
            else:
                used = private_mib(self.child.pid)
                if used > self.budget.memory_mb:
                    self.over = (f"the analysis used {used:,.0f} MiB, past its memory budget of "
                                 f"{self.budget.memory_mb:,.0f} MiB; stopped ({MEMORY_ENV}, or "
                                 "`advisor serve --memory-budget`, raises it)")
            if self.over:
                end_processes([self.child])
                return

    def done(self) -> None:
        """The worker has ended: stop watching (and finish stopping it, if that had begun)."""
        self._ended.set()
        self._thread.join()


class Jobs:
    def __init__(self, workers: int = 1, budget: Optional[Budget] = None):
        self.budget = budget or Budget()
        self.generation = 0       # moves when a job ends: what the run list shows may have changed
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._state: dict[str, dict] = {}     # key -> {"state", "stage", "started", "error", "kept"}
        self._children: set[subprocess.Popen] = set()
        for i in range(workers):
            threading.Thread(target=self._serve, name=f"advisor-job-{i}", daemon=True).start()
        atexit.register(self.stop)
        cleanup.sweep()     # the folders of workers killed outright before (TensorBoard does not run `advisor`)

    def _serve(self) -> None:
        while True:
            key, kind, args = self._queue.get()
            try:
                self._run(key, kind, args)
            except Exception as err:  # noqa: BLE001 - a job's failure is its state, never the thread's end
                self._set(key, state="failed", error=f"{type(err).__name__}: {err}")

    def stop(self) -> None:
        """End the running children (their analyses are lost, not half-written: see cache.write)."""
        with self._lock:
            children = list(self._children)
        end_processes(children)

    def status(self, key: str) -> dict:
        """{"state": "done"|"queued"|"running"|"failed"|"none", "stage", "elapsed_s", "error"}."""
        with self._lock:
            st = dict(self._state.get(key) or {})
        if not st:
            return {"state": "done" if cache.path_for(key).is_file() else "none"}
        st.pop("kept", None)
        if st.get("started"):
            st["elapsed_s"] = round(time.monotonic() - st.pop("started"), 1)
        return st

    def submit(self, key: str, kind: str, *args: str) -> dict:
        """Start the job unless it is done, under way, or failed (until `forget_failure`); its status."""
        with self._lock:
            if key not in self._state and not cache.path_for(key).is_file():
                self._state[key] = {"state": "queued", "stage": "waiting for a worker"}
                self._queue.put((key, kind, args))
        return self.status(key)

    def _set(self, key: str, **kw) -> None:
        with self._lock:
            self._state.setdefault(key, {}).update(kw)

    def _run(self, key: str, kind: str, args: tuple) -> None:
        self._set(key, state="running", stage="starting", started=time.monotonic())
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        with tempfile.TemporaryFile("w+") as log:    # a file: a chatty child never blocks on a full pipe
            try:
                child = subprocess.Popen(module_command("advisor.tensorboard.worker", kind, key, *args),
                                         stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                         text=True, env=env)
            except OSError as err:
                self._set(key, state="failed", error=f"could not start the worker: {err}")
                return
            with self._lock:
                self._children.add(child)
            budgeted = _Budgeted(child, self.budget)
            outcome = {"state": "failed", "error": "the worker's watch stopped"}
            try:
                outcome = self._watch(key, child, log, budgeted)
            finally:
                budgeted.done()
                cleanup.remove_folders_of(child.pid)
                with self._lock:          # the state says done or failed once nothing of the worker is left
                    self._children.discard(child)
                    self.generation += 1
                    if outcome is None:
                        self._state.pop(key, None)    # the cache file is the state from now on
                    else:
                        self._state[key] = outcome

    def _watch(self, key: str, child: subprocess.Popen, log, budgeted: _Budgeted) -> Optional[dict]:
        """Follow the worker's stages until it ends; the job's final state (None: done, in the cache)."""
        error: Optional[str] = None
        for line in child.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "error" in msg:
                error = msg["error"]
            elif "stage" in msg:
                self._set(key, stage=msg["stage"])
        child.wait()
        child.stdout.close()
        log.seek(0)
        stderr = log.read()
        budgeted.done()
        if cache.path_for(key).is_file():
            return None     # it finished: a worker keeps its result last, and keeps nothing once told to stop
        if budgeted.over:
            return {"state": "failed", "error": budgeted.over, "kept": True}
        last = (stderr.strip().splitlines() or [""])[-1]
        return {"state": "failed", "error": error or f"the worker stopped with exit code {child.returncode}: {last}"}

    def forget_failure(self, key: str) -> None:
        """A failed job may run again, unless its budget stopped it (it would again)."""
        with self._lock:
            st = self._state.get(key, {})
            if st.get("state") == "failed" and not st.get("kept"):
                del self._state[key]
