"""Analyses on demand: each in a worker child process (`worker.py`), started and watched by a
thread, so a request only looks up a state; at most `workers` children at once, the rest queued.
The threads are daemons and the children are ended at exit: stopping TensorBoard never waits for
an analysis."""

from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

from . import cache


class Jobs:
    def __init__(self, workers: int = 1):
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._state: dict[str, dict] = {}     # key -> {"state", "stage", "started", "error"}
        self._children: set[subprocess.Popen] = set()
        for i in range(workers):
            threading.Thread(target=self._serve, name=f"advisor-job-{i}", daemon=True).start()
        atexit.register(self.stop)

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
        for child in children:
            child.terminate()

    def status(self, key: str) -> dict:
        """{"state": "done"|"queued"|"running"|"failed"|"none", "stage", "elapsed_s", "error"}."""
        with self._lock:
            st = dict(self._state.get(key) or {})
        if not st:
            return {"state": "done" if cache.path_for(key).is_file() else "none"}
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
                child = subprocess.Popen([sys.executable, "-m", "advisor.tensorboard.worker", kind, key, *args],
                                         stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                         text=True, env=env)
            except OSError as err:
                self._set(key, state="failed", error=f"could not start the worker: {err}")
                return
            with self._lock:
                self._children.add(child)
            try:
                self._watch(key, child, log)
            finally:
                with self._lock:
                    self._children.discard(child)

    def _watch(self, key: str, child: subprocess.Popen, log) -> None:
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
        if child.returncode == 0 and cache.path_for(key).is_file():
            with self._lock:
                self._state.pop(key, None)    # the cache file is the state from now on
        else:
            last = (stderr.strip().splitlines() or [""])[-1]
            self._set(key, state="failed",
                      error=error or f"the worker stopped with exit code {child.returncode}: {last}")

    def forget_failure(self, key: str) -> None:
        with self._lock:
            if self._state.get(key, {}).get("state") == "failed":
                del self._state[key]
