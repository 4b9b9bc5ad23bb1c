"""Headless Chromium driven through the DevTools protocol over a pipe (--remote-debugging-pipe):
no WebDriver, no websocket library. Enough to load a page, wait for a condition and read or click
what a person would, inside same-origin iframes too (TensorBoard shows each plugin in one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]


class Browser:
    def __init__(self, profile: Path, width: int = 1280, height: int = 1000):
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()

        def fds():             # the protocol's fixed descriptors: 3 reads commands, 4 writes answers
            a, b = os.dup(to_child_r), os.dup(from_child_w)    # above 4: dup2 onto itself keeps CLOEXEC
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=fds, close_fds=False)   # close_fds would close 3 and 4 after preexec_fn
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.send("Page.enable", session=True)

    def send(self, method: str, session: bool = False, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _read(self) -> dict:
        while b"\0" not in self._buf:
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def goto(self, url: str) -> None:
        self.send("Page.navigate", session=True, url=url)

    def js(self, expression: str) -> Any:
        out = self.send("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                        awaitPromise=True)
        if "exceptionDetails" in out:
            raise RuntimeError(out["exceptionDetails"].get("text"))
        return out["result"].get("value")

    def wait(self, expression: str, timeout: float = 60.0) -> Any:
        """Polls `expression` until it is truthy; its value."""
        end = time.monotonic() + timeout
        while True:
            try:
                value = self.js(expression)
            except RuntimeError:
                value = None
            if value:
                return value
            if time.monotonic() > end:
                raise TimeoutError(f"waited {timeout:.0f} s for: {expression}")
            time.sleep(0.25)

    def screenshot(self, path: Path) -> Path:
        import base64
        data = self.send("Page.captureScreenshot", session=True, format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)


# A document in the page or in any same-origin iframe below it whose path ends with `suffix`.
FIND_FRAME = """
(function find(doc, suffix) {
  if (doc && doc.location && doc.location.pathname.endsWith(suffix)) return doc;
  for (const f of (doc ? doc.querySelectorAll('iframe') : [])) {
    let d = null;
    try { d = f.contentDocument; } catch (e) { continue; }
    const r = find(d, suffix);
    if (r) return r;
  }
  return null;
})(document, %s)
"""


def frame(suffix: str) -> str:
    """A JS expression for the document whose path ends with `suffix`, anywhere in the frame tree."""
    return FIND_FRAME % json.dumps(suffix)
