"""Analyses on demand: each in a worker child process (`worker.py`), started and watched by a
thread, so a request only looks up a state; at most `workers` children at once, the rest queued."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

from . import cache


class Jobs:
    def __init__(self, workers: int = 1):
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="advisor-job")
        self._lock = threading.Lock()
        self._state: dict[str, dict] = {}     # key -> {"state", "stage", "started", "error"}

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
        """Start the job unless it is done or under way; returns its status."""
        with self._lock:
            busy = key in self._state and self._state[key]["state"] in ("queued", "running")
            if not busy and not cache.path_for(key).is_file():
                self._state[key] = {"state": "queued", "stage": "waiting for a worker"}
                self._pool.submit(self._run, key, kind, args)
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
            self._watch(key, child, log)

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
