"""`advisor serve` and the Advisor tab under real conditions: reads that start nothing, runs with any
name, one listing for every request, analyses with a budget, results only of files that stayed as
they were, and stops (SIGTERM, Ctrl-C) that leave no worker and no folder behind."""

from __future__ import annotations

import http.client
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

import psutil
import pytest
from werkzeug.test import Client

from advisor.tensorboard import cache, worker
from advisor.tensorboard.app import AdvisorApp, run_ref, wsgi
from advisor.tensorboard.jobs import Budget, Jobs
from advisor.tensorboard.runs import RunIndex, read_run
from conftest import FIXTURES

SCAN = next((FIXTURES / "transformer_scan" / "plugins" / "profile").iterdir())
NAMES = ["ctl\x1b[31m\x07\r\t", "bidi\u202egpj.exe\u2066", "bytes\udcff\udcfe not utf-8", "pct%2F&x=1 +"]


def _run(logdir: Path, name: str, copy: bool = False) -> Path:
    run = logdir / "plugins" / "profile" / name
    run.mkdir(parents=True)
    for f in SCAN.iterdir():
        (shutil.copy2 if copy else os.symlink)(f, run / f.name)
    return run


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(tmp_path / "cache"))     # the workers inherit it
    return tmp_path / "cache"


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """A TMPDIR of this test's own: the temporary folders of its workers go there."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return tmp


def _workers_alive(keys) -> list[psutil.Process]:
    """This process's analysis workers of these cache keys still running."""
    alive = []
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
            if "advisor.tensorboard.worker" in cmd and any(key in cmd for key in keys):
                alive.append(p)
        except psutil.Error:
            pass
    return alive


def _wait(predicate, timeout: float = 120.0, what: str = ""):
    end = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.05)
    return value


def test_reads_start_nothing_and_an_analysis_starts_only_from_the_page(tmp_path, cache_env):
    """POST, PUT, DELETE or any method on status started an analysis, and so did a GET from a page
    elsewhere (<img src=http://127.0.0.1:PORT/status?run=NAME>)."""
    _run(tmp_path, "a")
    app = AdvisorApp(tmp_path, profile_links=False)
    client = Client(wsgi(app))
    for method in ("POST", "PUT", "DELETE", "PATCH", "BREW"):
        r = client.open("/status?run=a", method=method)
        assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"
    assert client.get("/index.html?run=a").status_code == 200        # what an <img> elsewhere can do
    assert client.open("/status?run=a", method="HEAD").status_code == 200
    assert client.get("/analyze?run=a").status_code == 405
    for elsewhere in ({"Origin": "http://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"},
                      {"Sec-Fetch-Site": "same-site", "Origin": "http://localhost"}):
        assert client.post("/analyze?run=a", headers=elsewhere).status_code == 403
    assert client.get("/status?run=a").json == {"state": "none"}      # none of that started anything
    try:
        st = client.post("/analyze?run=a", headers={"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"}).json
        assert st["state"] in ("queued", "running")
        assert client.get("/status?run=a").json["state"] in ("queued", "running", "done")
    finally:
        app.jobs.stop()


def test_runs_named_with_control_characters_bidi_marks_or_bytes_open(tmp_path, cache_env):
    """The picker's value and data-run held the name as shown (\\x1b, \\u202e): opening it said
    "No run named". Each way the page names a run opens that run: the picker (with and without its
    script), a link, the shared TensorBoard link (data-run), the status URL."""
    for name in NAMES:
        _run(tmp_path, name)
    client = Client(wsgi(AdvisorApp(tmp_path, profile_links=False)))
    listing = client.get("/index.html").text
    values = re.findall(r'<option value="([^"]+)"[ >]', listing)
    assert sorted(values) == sorted(run_ref(n) for n in NAMES for _ in ("run", "compare"))
    for name in NAMES:
        ref = run_ref(name)
        assert ref.isascii() and f'href="index.html?run={ref}"' in listing
        for query in (f"run={ref}",                                                          # the script, a link
                      urllib.parse.urlencode({"run": ref, "compare": "", "picked": "1"})):     # the form alone
            page = client.get(f"/index.html?{query}").text
            assert "No run named" not in page and f'<body data-run="{ref}">' in page, (name, query)
            assert f'<option value="{ref}" selected ' in page
            status = re.search(r'data-status="([^"]+)"', page).group(1)
            assert client.get("/" + status.replace("&amp;", "&")).json == {"state": "none"}
        assert "\x1b" not in listing and "\u202e" not in listing        # shown as escapes, never raw


def test_a_result_of_files_that_changed_while_read_is_not_kept(tmp_path, cache_env, monkeypatch):
    """A trace cut short during its analysis and restored with the same bytes and modification time
    (tar, cp -p, rsync -t) stayed "Could not analyze ... cannot parse" until the cache was cleared."""
    import advisor.job

    run = _run(tmp_path, "r", copy=True)
    trace = run / "vm.xplane.pb"
    data, before = trace.read_bytes(), trace.stat()
    files = read_run(run, "r").files()
    key = cache.run_key(files)
    real = advisor.job.run_job

    def cut_while_read(unit, job):
        trace.write_bytes(data[:1000])
        out = real(unit, job)          # the cut file: it cannot be parsed
        trace.write_bytes(data)
        os.utime(trace, ns=(before.st_atime_ns, before.st_mtime_ns))
        return out

    monkeypatch.setattr(advisor.job, "run_job", cut_while_read)
    with pytest.raises(worker.FilesChanged):
        worker.analyze(key, str(run))
    assert cache.read(key) is None and cache.read_brief(key) is None
    after = trace.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)   # what the key held before
    assert cache.run_key(files) != key       # the change time moved: the page asks for a new analysis


def test_an_analysis_past_its_budget_is_stopped_and_the_queue_moves_on(tmp_path, cache_env, private_tmp):
    """A worker had no bound (a 4 GiB file of zeros grew one to 3.6 GiB in 10 minutes) while every
    other run waited, and each reload started it again."""
    runs = [_run(tmp_path, name) for name in ("a", "b")]
    keys = [cache.run_key(read_run(r, r.name).files()) for r in runs]
    for budget, words in ((Budget(seconds=0.3), "time budget of 0.3 s"),
                          (Budget(memory_mb=1), "memory budget of 1 MiB")):
        jobs = Jobs(workers=1, budget=budget)
        for run, key in zip(runs, keys):
            jobs.submit(key, "analyze", str(run), "{}")
        for key in keys:       # the second waited for the first, then ran and went past the budget too
            st = _wait(lambda jobs=jobs, key=key: jobs.status(key)["state"] == "failed" and jobs.status(key),
                       what="the budget")
            assert words in st["error"] and "raises it" in st["error"], st
        jobs.forget_failure(keys[0])                  # what a reload of the page does
        assert jobs.status(keys[0])["state"] == "failed"
        assert not _workers_alive(keys) and not list(private_tmp.iterdir())
        assert cache.read(keys[0]) is None, (words, jobs.status(keys[0]), jobs.status(keys[1]))


def test_a_new_run_is_listed_without_a_request_walking_the_logdir(tmp_path, cache_env, monkeypatch):
    """/status, polled every second by each open page, listed the whole logdir on every call."""
    import advisor.tensorboard.runs as runs_module

    _run(tmp_path, "a")
    walks = []
    real = runs_module.list_runs
    monkeypatch.setattr(runs_module, "list_runs", lambda logdir: walks.append(Path(logdir)) or real(logdir))
    app = AdvisorApp(tmp_path, profile_links=False)
    app.index_of_runs.interval = 3600
    client = Client(wsgi(app))
    for _ in range(20):
        assert client.get("/status?run=a").json == {"state": "none"}
    assert "1 profile run(s)" in client.get("/index.html").text and client.get("/runs").json[0]["name"] == "a"
    assert walks.count(tmp_path) == 1      # (other tests' listings run in this process too)
    index = RunIndex(tmp_path, interval=0.05)
    assert index.get("b") is None
    _run(tmp_path, "b")
    _wait(lambda: index.get("b"), 60, "the new run")


def _serve(logdir: Path, tmp: Path, port: int = 0, **kw) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "advisor", "serve", str(logdir), "--port", str(port)], env=env,
                            stderr=subprocess.PIPE, text=True, **kw)
    line = proc.stderr.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    assert m, line + proc.stderr.read()
    return proc, int(m.group(1))


@pytest.mark.parametrize("stop", ["sigterm", "ctrl-c"])
def test_serve_stopped_during_an_analysis_leaves_nothing_and_restarts_on_its_port(tmp_path, cache_env, stop):
    """Stopped during an analysis, serve left advisor-xprof-* folders (every Ctrl-C trial); Ctrl-C
    exited 0 in silence; a restart on the port failed for about 80 s when a browser held a connection."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    _run(tmp_path / "logdir", "a")
    proc, port = _serve(tmp_path / "logdir", tmp, start_new_session=True)      # Ctrl-C: to its process group
    try:
        browser = http.client.HTTPConnection("127.0.0.1", port, timeout=30)    # kept alive, as a browser does
        browser.request("POST", "/analyze?run=a", headers={"Origin": f"http://127.0.0.1:{port}"})
        assert browser.getresponse().read()
        end = time.monotonic() + 60
        while not list(tmp.glob("advisor-xprof-*")) and time.monotonic() < end:
            time.sleep(0.005)
        if not list(tmp.glob("advisor-xprof-*")):
            pytest.skip("the analysis ended before its xprof folder was seen")
        workers = psutil.Process(proc.pid).children(recursive=True)
        if stop == "sigterm":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == (143 if stop == "sigterm" else 130), err
    if stop == "ctrl-c":
        assert err.strip().splitlines()[-1] == "advisor: interrupted" and "Traceback" not in err
    assert not [p for p in workers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not list(tmp.iterdir())
    again, same = _serve(tmp_path / "logdir", tmp, port)     # the browser's connection is in TIME_WAIT now
    again.terminate()
    again.wait(timeout=30)
    assert same == port


def test_serve_closes_idle_connections(tmp_path, cache_env, monkeypatch):
    """werkzeug's server kept every idle connection for ever (a thread each)."""
    import socket

    from advisor.tensorboard import server as server_module

    monkeypatch.setattr(server_module, "IDLE_S", 1)
    server = server_module.make_server(wsgi(AdvisorApp(tmp_path, profile_links=False)), 0)
    threading.Thread(target=server.serve, daemon=True).start()
    try:
        idle = socket.create_connection(("127.0.0.1", server.bind_addr[1]), timeout=30)
        idle.sendall(b"GET /runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert idle.recv(65536).startswith(b"HTTP/1.1 200")
        end = time.monotonic() + 30
        while (chunk := idle.recv(65536)) and time.monotonic() < end:
            pass
        assert chunk == b""         # closed by the server
    finally:
        server.stop()


def test_in_a_browser_a_hostile_name_opens_and_a_page_elsewhere_starts_nothing(tmp_path, cache_env):
    """Chromium on `advisor serve`: the picker opens a run whose name holds an escape, a bidi override
    and bytes that are not UTF-8, and its page starts and shows the analysis; a page on another
    origin (an <img>, a form's POST, a no-cors fetch) starts nothing."""
    import http.server
    import json
    import urllib.request

    from browser import CHROMIUM, Browser

    if not CHROMIUM:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    hostile, other = "\x1b[31mred\u202egpj\udcff", "a"
    for name in (hostile, other):
        _run(tmp_path / "logdir", name)
    (tmp_path / "elsewhere").mkdir()
    proc, port = _serve(tmp_path / "logdir", tmp_path)
    base = f"http://127.0.0.1:{port}"
    (tmp_path / "elsewhere" / "index.html").write_text(
        f'<img src="{base}/status?run={other}"><img src="{base}/index.html?run={other}">'
        f'<form id="f" method="post" action="{base}/analyze?run={other}"></form>'
        f"<script>fetch('{base}/analyze?run={other}', {{method: 'POST', mode: 'no-cors'}})"
        ".finally(() => document.getElementById('f').submit());</script>")
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path / "elsewhere"))  # noqa: E731
    elsewhere = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=elsewhere.serve_forever, daemon=True).start()
    browser = Browser(tmp_path / "chromium")
    try:
        browser.goto(f"http://127.0.0.1:{elsewhere.server_address[1]}/index.html")
        browser.wait("location.pathname === '/analyze'", 60)         # the form's POST went, and was refused
        assert json.loads(urllib.request.urlopen(f"{base}/status?run={other}").read()) == {"state": "none"}
        browser.goto(base + "/")
        browser.wait("document.readyState === 'complete' && document.querySelector('select[name=run]')", 60)
        browser.js("(() => { const s = document.querySelector('select[name=run]'); "
                   "s.value = [...s.options].find(o => o.text.includes('red')).value; "
                   "s.dispatchEvent(new Event('change')); })()")
        browser.wait("document.querySelectorAll('.finding').length", 180)
        assert browser.js("document.body.dataset.run") == run_ref(hostile)
        assert "\\x1b[31mred\\u202egpj\\xff" in browser.js("document.title")
    finally:
        browser.close()
        elsewhere.shutdown()
        proc.terminate()
        proc.wait(timeout=30)


def test_in_a_browser_every_page_fits_the_window(tmp_path, cache_env):
    """At 1280 px the run list was 2,279 px wide (its recorded, hosts, size and analysis columns
    off-screen) and the pickers' labels widened every page to 1,569 px. Every page fits 1280 and 1024
    px: the list, a run's report (opened from http://127.0.0.1:PORT/?run=X, which kept the run), and a
    comparison; a picker shows what tells its run apart."""
    import json

    from browser import CHROMIUM, Browser

    if not CHROMIUM:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    logdir, names = tmp_path / "logdir", {}
    sweep = "a_sweep_of_the_tiny_transformer_over_remat_dtype_and_layers_recorded_on_this_machine"
    for fixture, tag in (("transformer_scan", "scan"), ("transformer_remat", "remat"), ("transformer_bf16", "bf16"),
                         ("transformer_unrolled", "unrolled")):
        src = next((FIXTURES / fixture / "plugins" / "profile").iterdir())
        run = logdir / sweep / "plugins" / "profile" / f"{src.name}_{tag}_with_a_long_suffix_that_does_not_break"
        run.mkdir(parents=True)
        for f in src.iterdir():
            os.symlink(f, run / f.name)
        names[tag] = f"{sweep}/{run.name}"
    many = logdir / "plugins" / "profile" / "sixty_four_hosts"
    many.mkdir(parents=True)
    for i in range(64):
        os.symlink(SCAN / "vm.xplane.pb", many / f"a-long-host-name-in-a-large-cluster-{i:03d}.xplane.pb")
    proc, port = _serve(logdir, tmp_path)
    base = f"http://127.0.0.1:{port}"
    run, other = run_ref(names["remat"]), run_ref(names["scan"])
    fits = ("(() => { const cw = document.documentElement.clientWidth; return JSON.stringify({cw, "
            "sw: document.documentElement.scrollWidth, off: [...document.querySelectorAll('body *')]"
            ".filter(e => e.getBoundingClientRect().right > cw + 1 && !e.closest('.scroll'))"
            ".map(e => e.tagName + '.' + e.className).slice(0, 5)}); })()")
    browser = Browser(tmp_path / "chromium")
    try:
        for width in (1280, 1024):
            browser.send("Emulation.setDeviceMetricsOverride", session=True, width=width, height=900,
                         deviceScaleFactor=1, mobile=False)
            pages = {"list": (f"{base}/", "!!document.querySelector('table.runs')"),
                     "run": (f"{base}/?run={run}", "document.querySelectorAll('.finding').length > 0"),
                     "compare": (f"{base}/index.html?run={run}&compare={other}",
                                 "!!document.querySelector('.verdict')")}
            for page, (url, ready) in pages.items():
                browser.goto(url)
                browser.wait(f"document.readyState === 'complete' && {ready}", 180)
                shown = json.loads(browser.js(fits))
                browser.screenshot(tmp_path / f"{page}_{width}.png")
                assert shown["sw"] <= shown["cw"] and not shown["off"], (page, width, shown)
                if page == "list":       # every column in sight, the table within the page
                    right = browser.js("Math.max(...[...document.querySelectorAll('table.runs th')]"
                                       ".map(e => e.getBoundingClientRect().right))")
                    assert right <= shown["cw"], (width, right)
                    assert browser.js("document.querySelector('.scroll').scrollWidth <= "
                                      "document.querySelector('.scroll').clientWidth")
                if page == "run":        # the query went through the redirect
                    assert browser.js("location.pathname + location.search") == f"/index.html?run={run}"
                    option = browser.js("document.querySelector('select[name=run]').selectedOptions[0].text")
                    assert option.startswith("model.remat=MLP+Attn "), option
                    assert browser.js("document.querySelector('select[name=run]').title").startswith(names["remat"])
    finally:
        browser.close()
        proc.terminate()
        proc.wait(timeout=30)
