"""The Advisor tab in a real TensorBoard (`tensorboard --logdir` on a copy of a fixture logdir: the
Profile plugin writes its cache files into the logdir it serves), loaded in headless Chromium as a
person would: pick the run, read the findings, follow a finding's link into the Profile plugin's
trace viewer for the same run. One TensorBoard and one browser for the module.

ADVISOR_SCREENSHOT_DIR=docs/img makes the test write docs/img/tensorboard-advisor.png."""

from __future__ import annotations

import html
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from browser import CHROMIUM, Browser, frame
from conftest import FIXTURES, analyze_json

pytest.importorskip("tensorboard")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tb")
    logdir = tmp / "logdir"
    shutil.copytree(FIXTURES / "transformer_scan", logdir)
    run = next((logdir / "plugins" / "profile").iterdir()).name
    port = _free_port()
    env = dict(os.environ, ADVISOR_CACHE_DIR=str(tmp / "cache"), TF_CPP_MIN_LOG_LEVEL="2")
    tb = Path(sys.executable).with_name("tensorboard")
    cmd = [str(tb)] if tb.exists() else [sys.executable, "-m", "tensorboard.main"]
    log = open(tmp / "tensorboard.log", "w")
    proc = subprocess.Popen([*cmd, "--logdir", str(logdir), "--port", str(port), "--host", "127.0.0.1"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(url + "/data/plugins_listing", timeout=5).read()
                break
            except OSError:
                assert proc.poll() is None, (tmp / "tensorboard.log").read_text()[-3000:]
                assert time.monotonic() < end, "tensorboard did not start in 90 s"
                time.sleep(0.5)
        yield url, run, tmp
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_the_advisor_tab_is_listed_beside_the_profile_tab(tensorboard):
    import json

    url, _, _ = tensorboard
    listing = json.loads(urllib.request.urlopen(url + "/data/plugins_listing").read())
    assert listing["advisor"]["enabled"] and listing["advisor"]["tab_name"] == "Advisor"
    assert listing["profile"]["enabled"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not CHROMIUM:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    b = Browser(tmp_path_factory.mktemp("chromium"), 1280, 1100)
    yield b
    b.close()


def test_the_tab_shows_the_findings_and_links_into_the_trace_viewer(tensorboard, browser):
    url, run, tmp = tensorboard
    browser.goto(url + "/#advisor")
    doc = frame("/data/plugin/advisor/index.html")
    browser.wait(f"{doc} && {doc}.querySelector('select[name=run]')", 90)
    # pick the run, as a person does: the page analyzes it in a worker and reloads when done
    browser.js(f"(() => {{ const s = {doc}.querySelector('select[name=run]'); s.value = {run!r}; "
               "s.dispatchEvent(new Event('change')); })()")
    browser.wait(f"{doc} && {doc}.querySelectorAll('.finding').length", 180)
    expected = analyze_json(FIXTURES / "transformer_scan")["runs"][0]["findings"]
    shown = browser.js(f"[...{doc}.querySelectorAll('.finding')].map(s => s.id)")
    assert shown == [f"rule-{f['rule']}" for f in expected]       # the same findings, in the same order
    text = browser.js(f"{doc}.body.innerText")
    for f in expected:
        assert f["title"] in text
    # the TensorBoard URL names the run shown, and opens it again (a link to share)
    assert f"advisor_run={run}" in browser.js("location.search")
    shot_dir = os.environ.get("ADVISOR_SCREENSHOT_DIR")
    shot = browser.screenshot((Path(shot_dir) if shot_dir else tmp) / "tensorboard-advisor.png")
    assert shot.stat().st_size > 10_000
    # the tab follows TensorBoard's dark mode (TensorBoard sets a class on its page's body)
    assert not browser.js(f"{doc}.documentElement.classList.contains('dark')")
    browser.js("document.body.classList.add('dark-mode')")
    assert browser.wait(f"{doc}.documentElement.classList.contains('dark')", 10)
    browser.js("document.body.classList.remove('dark-mode')")
    assert browser.wait(f"!{doc}.documentElement.classList.contains('dark')", 10)
    # the finding's link opens the Profile plugin's trace viewer on the same run
    browser.js(f"{doc}.querySelector('#rule-scan-dynamic-update-slice a[data-tool=trace_viewer]').click()")
    profile = frame("/data/plugin/profile/trace_viewer@")
    src = browser.wait(f"{profile} && {profile}.querySelector('iframe') && "
                       f"{profile}.querySelector('iframe').src", 90)
    assert "trace_viewer_index.html" in src and f"run%3D{run}" in src
    assert html.escape(run) in browser.js(f"{profile}.location.search")


def test_a_tensorboard_url_opens_a_runs_report(tensorboard, browser):
    url, run, _ = tensorboard
    browser.goto("about:blank")
    browser.goto(f"{url}/?advisor_run={run}#advisor")
    doc = frame("/data/plugin/advisor/index.html")
    assert browser.wait(f"{doc} && {doc}.querySelectorAll('.finding').length", 120)
    assert browser.js(f"{doc}.querySelector('select[name=run]').value") == run
    # the graph viewer takes the op a finding names: it opens with that op and module selected
    link = f"{doc}.querySelector('#rule-missing-remat a[data-tool=graph_viewer]')"
    params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(browser.js(f"{link}.href")).query))
    browser.js(f"{link}.click()")
    graph = frame("/data/plugin/profile/graph_viewer")
    search = browser.wait(f"{graph} && {graph}.location.search", 90)
    shown = dict(urllib.parse.parse_qsl(search[1:]))
    assert shown["opName"] == params["opName"] and shown["moduleName"] == params["moduleName"]
    assert shown["run"] == run
