"""The Advisor tab's pages, in process (werkzeug's test client on the app TensorBoard and
`advisor serve` share): runs listed without analysis, a run analyzed by a worker when opened and
cached outside the logdir, the same findings as `advisor analyze`, links into the Profile plugin,
compare, escaping. tests/test_tensorboard.py shows the same in a real TensorBoard and browser."""

from __future__ import annotations

import html
import os
import re
import shutil
import time
import urllib.parse
from pathlib import Path

import pytest
from werkzeug.test import Client

from advisor.report import escape
from advisor.tensorboard import cache
from advisor.tensorboard.app import AdvisorApp, run_ref, wsgi
from advisor.tensorboard.links import finding_links
from advisor.tensorboard.runs import has_runs, list_runs
from conftest import FIXTURES, analyze_json, cli

HOSTILE = '<img src=x onerror="alert(1)">&amp;\x1b[31m'     # markup, an entity, a terminal escape


def _copy_run(fixture: str, dest: Path, mtime: float) -> Path:
    src = next((FIXTURES / fixture / "plugins" / "profile").iterdir())
    run = dest / "plugins" / "profile" / src.name
    shutil.copytree(src, run)
    for f in run.iterdir():
        os.utime(f, (mtime, mtime))
    return run


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """A logdir as TensorBoard users have them: a run at the root, one under a TensorBoard run
    folder (remat/), one with a hostile name; the remat run is the newest."""
    root = tmp_path_factory.mktemp("logdir")
    scan = _copy_run("transformer_scan", root, 1_700_000_000)
    remat = _copy_run("transformer_remat", root / "remat", 1_700_000_300)
    hostile = root / "plugins" / "profile" / HOSTILE
    hostile.mkdir()
    shutil.copy(scan / "vm.xplane.pb", hostile / "vm.xplane.pb")
    os.utime(hostile / "vm.xplane.pb", (1_600_000_000, 1_600_000_000))
    (root / "plugins" / "profile" / ".advisor-tracing-x").mkdir()     # a run-workload still tracing
    return root, scan.name, f"remat/{remat.name}"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    old = os.environ.get("ADVISOR_CACHE_DIR")
    path = tmp_path_factory.mktemp("cache")
    os.environ["ADVISOR_CACHE_DIR"] = str(path)     # the worker children inherit it
    yield path
    if old is None:
        os.environ.pop("ADVISOR_CACHE_DIR", None)
    else:
        os.environ["ADVISOR_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def client(logdir, cache_dir):
    app = AdvisorApp(logdir[0])
    routes = app.routes()
    return Client(lambda environ, start: routes[environ["PATH_INFO"]](environ, start))


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def _open(client, query: str, timeout: float = 180.0) -> str:
    """index.html?query once its analysis is done: as a person's page does, started by a POST to
    analyze (whenever status says a step has not started), then followed by polling status."""
    end = time.monotonic() + timeout
    while True:
        st = client.get(f"/status?{query}").json
        if st["state"] == "none":
            st = client.post(f"/analyze?{query}").json
        assert st["state"] != "failed", st
        if st["state"] == "done":
            return client.get(f"/index.html?{query}").text
        assert time.monotonic() < end, st
        time.sleep(0.3)


def test_runs_named_as_the_profile_plugin_names_them_newest_first(logdir):
    root, scan, remat = logdir
    runs = list_runs(root)
    assert [r.name for r in runs] == [remat, scan, HOSTILE]
    assert runs[0].hosts == ("vm",) and runs[0].size > 0


def test_runs_are_dated_when_they_were_recorded_not_by_their_files_time(tmp_path, cache_dir):
    """Every fixture of a clone read the clone's time, and "newest first" sorted by it: a run is dated
    by its folder's name as jax.profiler writes it, else advisor_run.json's created, else its file's
    time, and the list says which."""
    import datetime
    import json

    profile = tmp_path / "plugins" / "profile"
    for name, mtime in (("2026_01_02_03_04_05", 1_900_000_000), ("2026_05_06_07_08_09_812_2d8dde", 1_000_000_000),
                        ("named", 1_000_000_000), ("plain", 1_600_000_000)):
        (profile / name).mkdir(parents=True)
        (profile / name / "vm.xplane.pb").write_bytes(b"x")
        os.utime(profile / name / "vm.xplane.pb", (mtime, mtime))
    (profile / "named" / "advisor_run.json").write_text(json.dumps({"created": "2026-03-01T10:00:00"}))
    runs = list_runs(tmp_path)
    assert [(r.name, r.recorded_from) for r in runs] == [
        ("2026_05_06_07_08_09_812_2d8dde", "folder"), ("named", "metadata"), ("2026_01_02_03_04_05", "folder"),
        ("plain", "mtime")]
    assert runs[0].recorded == datetime.datetime(2026, 5, 6, 7, 8, 9).timestamp() and runs[3].recorded == 1_600_000_000
    page = Client(wsgi(AdvisorApp(tmp_path))).get("/index.html", base_url="http://127.0.0.1/").text
    cells = re.findall(r'<td title="([^"]*)"><span class="when">([^<]*)</span>([^<]*(?:<span[^>]*>[^<]*</span>)?)</td>',
                       page)
    assert [(when, bool(mark)) for _, when, mark in cells] == [
        ("2026-05-06 07:08:09", False), ("2026-03-01 10:00:00", False), ("2026-01-02 03:04:05", False),
        (datetime.datetime.fromtimestamp(1_600_000_000).strftime("%Y-%m-%d %H:%M:%S"), True)]
    assert [title.split(" ", 2)[1] for title, _, _ in cells] == ["the", "advisor_run.json&#x27;s", "the", "trace"]
    assert "newest recorded first" in page and "(file time)" in cells[3][2]


def test_has_runs(tmp_path, logdir):
    assert has_runs(logdir[0])
    (tmp_path / "plugins" / "profile" / "run").mkdir(parents=True)     # a run folder without a trace
    assert not has_runs(tmp_path)


def test_the_list_reads_nothing_and_escapes_names(client, logdir, cache_dir):
    root, scan, remat = logdir
    before = _snapshot(root)
    page = client.get("/index.html").text
    assert "3 profile run(s), newest recorded first" in page
    assert page.index(html.escape(remat)) < page.index(html.escape(scan))
    assert HOSTILE not in page and escape.html(HOSTILE) in page and "\x1b" not in page
    assert "<script>" not in page and 'src="advisor.js"' in page      # no inline script (CSP)
    assert not list(cache_dir.rglob("*.json"))                        # listing analyzed nothing
    assert page.count("not analyzed yet") == 3
    assert _snapshot(root) == before


def test_a_run_opened_is_analyzed_by_a_worker_with_the_findings_of_advisor_analyze(client, logdir, cache_dir):
    root, scan, _ = logdir
    before = _snapshot(root)
    first = client.get(f"/index.html?run={scan}")
    assert 'id="progress"' in first.text and "Content-Security-Policy" in first.headers
    page = _open(client, f"run={scan}")
    expected = analyze_json(FIXTURES / "transformer_scan")["runs"][0]["findings"]
    assert [f["rule"] for f in expected]
    for f in expected:
        assert f'id="rule-{f["rule"]}"' in page
        assert html.escape(f["title"]) in page
    assert page.count("<svg") >= 4
    # the link into the Profile plugin: the same run, the trace viewer, the host
    href = f'href="../../../?run={scan}&amp;tag=trace_viewer&amp;host=vm&amp;hosts=vm#profile"'
    assert href in page and 'target="_top"' in page
    assert _snapshot(root) == before                                   # nothing written into the logdir
    assert len(list(cache_dir.rglob("*.json"))) == 1                   # cached outside it


def test_the_second_open_is_served_from_the_cache(client, logdir):
    _, scan, _ = logdir
    t = time.perf_counter()
    page = client.get(f"/index.html?run={scan}").text
    assert 'id="progress"' not in page and "rule-scan-dynamic-update-slice" in page
    assert time.perf_counter() - t < 5      # generous: no analysis, only the cached document
    listing = client.get("/index.html").text          # the list shows what the cache holds
    assert "3 findings (1 warning, 2 info)" in listing and listing.count("not analyzed yet") == 2


def test_compare_two_runs(client, logdir):
    _, scan, remat = logdir
    page = _open(client, f"run={urllib.parse.quote(scan)}&compare={urllib.parse.quote(remat)}")
    assert "new / base" in page and "<svg" in page
    assert "findings added:" in page
    # the CLI's verdict and what ran on each side
    assert "step time: faster beyond the measured noise (x0.846, noise 13%)" in page
    assert "changed: model.remat: none -&gt; MLP+Attn" in page
    assert "new: transformer (tiny) model.remat=MLP+Attn train.steps=2" in page


def test_runs_are_named_by_workload_and_the_settings_that_differ(tmp_path, cache_dir):
    """The runs of one sweep differ by timestamp alone in their names: the picker and the list show
    the workload and the settings that tell them apart, beside the name (the value stays the name's run_ref);
    a stranger's advisor_run.json is text, escaped."""
    import json

    scan = _copy_run("transformer_scan", tmp_path, 1_700_000_000)
    remat = _copy_run("transformer_remat", tmp_path / "b", 1_700_000_100)
    block = _copy_run("transformer_remat_block", tmp_path / "c", 1_700_000_200)
    odd = tmp_path / "plugins" / "profile" / "odd"
    odd.mkdir()
    shutil.copy(scan / "vm.xplane.pb", odd / "vm.xplane.pb")
    (odd / "advisor_run.json").write_text(json.dumps({"workload": HOSTILE, "preset": "tiny", "config": {}}))
    page = Client(wsgi(AdvisorApp(tmp_path, profile_links=False))).get("/index.html", base_url="http://127.0.0.1/").text
    for name, shown in ((scan.name, "transformer (tiny) model.remat=none"),
                        (f"b/{remat.name}", "transformer (tiny) model.remat=MLP+Attn"),
                        (f"c/{block.name}", "transformer (tiny) model.remat=Block")):
        first = shown.split(" ", 2)[2] + f" · transformer (tiny) · {name}"       # the picker: the settings first
        assert f'<option value="{run_ref(name)}" title="{name} · {shown}">{first}</option>' in page
        assert f"{name.replace('/', '/<wbr>')}</a></td><td>{shown}</td>" in page     # a long name breaks at its /
    assert HOSTILE not in page and escape.html(HOSTILE) in page and "\x1b" not in page


def test_the_picker_leads_with_the_settings_that_tell_a_run_apart(tmp_path, cache_dir):
    """A sweep varying several settings: the picker cut "transformer_remat/… · transformer (tiny)
    model.dtype=float32 mo" at the page's width, the setting that told the run apart off-screen. Each
    option leads with the run's rarest values, its name last (name and label whole in its title and
    the table)."""
    import json

    runs = {}
    for folder, fixture, dtype in (("a", "transformer_scan", None), ("b", "transformer_remat", None),
                                   ("c", "transformer_remat", "bfloat16"), ("d", "transformer_remat_block", None)):
        run = _copy_run(fixture, tmp_path / folder, 1_700_000_000)
        if dtype:
            meta = json.loads((run / "advisor_run.json").read_text())
            meta["config"]["model"]["dtype"] = dtype
            (run / "advisor_run.json").write_text(json.dumps(meta))
        runs[folder] = f"{folder}/{run.name}"
    page = Client(wsgi(AdvisorApp(tmp_path, profile_links=False))).get("/index.html", base_url="http://127.0.0.1/").text
    shown = {ref: text for ref, text in re.findall(r'<option value="([^"]+)" title="[^"]*">([^<]*)</option>', page)}
    assert shown[run_ref(runs["b"])] == f"model.remat=MLP+Attn model.dtype=float32 · transformer (tiny) · {runs['b']}"
    assert shown[run_ref(runs["c"])] == f"model.dtype=bfloat16 model.remat=MLP+Attn · transformer (tiny) · {runs['c']}"
    assert shown[run_ref(runs["a"])] == f"model.remat=none model.dtype=float32 · transformer (tiny) · {runs['a']}"
    # the table keeps the schema's order, whole
    assert "<td>transformer (tiny) model.dtype=float32 model.remat=MLP+Attn</td>" in page
    # a run picked: its select's title is the whole label
    picked = Client(wsgi(AdvisorApp(tmp_path, profile_links=False))).get(
        f"/index.html?run={run_ref(runs['c'])}", base_url="http://127.0.0.1/").text
    assert (f'<select name="run" data-go title="{runs["c"]} · transformer (tiny) model.dtype=bfloat16 '
            'model.remat=MLP+Attn">') in picked
    assert f'<option value="{run_ref(runs["c"])}" selected title=' in picked


def test_unknown_run_and_missing_logdir(client, tmp_path):
    page = client.get("/index.html?run=%3Cb%3Enope").text
    assert "No run named <code>&lt;b&gt;nope</code>" in page
    assert client.get("/status?run=nope").status_code == 404
    empty = Client(wsgi(AdvisorApp(tmp_path)))
    assert "No profile runs under" in empty.get("/index.html").text
    assert empty.get("/").status_code == 302
    assert empty.get("/nothing").status_code == 404


def test_the_root_keeps_the_query(logdir, cache_dir):
    """http://127.0.0.1:PORT/?run=X redirected to index.html and lost the run."""
    root, scan, remat = logdir
    served = Client(wsgi(AdvisorApp(root, profile_links=False)))
    query = f"run={run_ref(remat)}&compare={run_ref(scan)}"
    moved = served.get(f"/?{query}", base_url="http://127.0.0.1/")
    assert moved.status_code == 302 and moved.headers["Location"] == f"index.html?{query}"
    assert served.get("/", base_url="http://127.0.0.1/").headers["Location"] == "index.html"
    moved = served.get(f"/?run={run_ref(HOSTILE)}", base_url="http://127.0.0.1/").headers["Location"]
    page = served.get(f"/{moved}", base_url="http://127.0.0.1/").text     # as a browser resolves it
    assert f'data-run="{run_ref(HOSTILE)}"' in page
    # bytes a header may not hold travel percent-encoded, not raw
    odd = served.get("/", base_url="http://127.0.0.1/", environ_overrides={"QUERY_STRING": "run=a\xff\r\nb"})
    assert odd.headers["Location"] == "index.html?run=a%FF%0D%0Ab"


def test_without_tensorboard_the_tools_are_named_not_linked(logdir, cache_dir):
    root, scan, _ = logdir
    served = Client(wsgi(AdvisorApp(root, profile_links=False)))
    page = _open(served, f"run={scan}")
    assert "in TensorBoard's Profile tab: trace viewer" in page
    assert "#profile" not in page


def test_links_name_the_op_to_search_and_escape_it():
    finding = {"rule": "missing-remat", "evidence": {"largest_activations": [
        {"instruction": 'fusion.1"><script>', "shape": "f32[4]"}], "module": "jit_step(3)"}}
    links = finding_links(finding, "train/run 1", ["hostA", "hostB"], "jit_train_step(9)", "gpu")
    tools = [link.tool for link in links]
    assert tools == ["trace_viewer", "memory_viewer", "graph_viewer", "op_profile", "hlo_stats"]
    memory = dict(urllib.parse.parse_qsl(links[1].url[1:].split("#")[0]))
    assert memory == {"run": "train/run 1", "tag": "memory_viewer", "host": "hostA", "moduleName": "jit_step(3)"}
    graph = dict(urllib.parse.parse_qsl(links[2].url[1:].split("#")[0]))
    assert graph["opName"] == 'fusion.1"><script>' and links[2].search is None     # selected, not searched
    assert links[3].search == 'fusion.1"><script>' and "<" not in links[3].url
    assert links[0].url.endswith("#profile")
    on_cpu = [link.tool for link in finding_links(finding, "r", ["h"], None, "cpu")]
    assert on_cpu == ["trace_viewer", "memory_viewer", "graph_viewer"]     # xprof's device tools are empty on CPU


def test_the_plugin_registers_and_is_active_only_with_runs(logdir, tmp_path):
    from importlib.metadata import entry_points

    pytest.importorskip("tensorboard")
    from tensorboard.plugins import base_plugin

    from advisor.tensorboard.plugin import AdvisorPlugin

    eps = {ep.name: ep.value for ep in entry_points(group="tensorboard_plugins")}
    assert eps["advisor"] == "advisor.tensorboard.plugin:AdvisorPlugin"
    plugin = AdvisorPlugin(base_plugin.TBContext(logdir=str(logdir[0])))
    assert plugin.is_active() and plugin.frontend_metadata().tab_name == "Advisor"
    assert {"/index.js", "/index.html", "/runs", "/status"} <= set(plugin.get_plugin_apps())
    assert not AdvisorPlugin(base_plugin.TBContext(logdir=str(tmp_path))).is_active()


def test_serve_bad_logdir_or_taken_port_is_one_line(tmp_path, logdir):
    import socket

    proc = cli("serve", tmp_path / "nope")
    assert proc.returncode == 2 and proc.stderr.startswith("advisor: error: ") and "Traceback" not in proc.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        proc = cli("serve", logdir[0], "--port", s.getsockname()[1])
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "choose another --port" in proc.stderr


def test_serve_on_localhost(logdir, cache_dir):
    import re
    import subprocess
    import sys
    import urllib.request

    proc = subprocess.Popen([sys.executable, "-m", "advisor.cli", "serve", str(logdir[0]), "--port", "0"],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)
        page = urllib.request.urlopen(url, timeout=30).read().decode()   # / redirects to index.html
        assert "3 profile run(s)" in page
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert "GET" not in proc.stderr.read()          # no access log


def test_cache_key_follows_the_run_files(logdir, tmp_path):
    from advisor.locate import find_runs

    run = tmp_path / "run"
    shutil.copytree(logdir[0] / "plugins" / "profile" / logdir[1], run)
    key = cache.run_key(find_runs(run)[0])
    assert cache.run_key(find_runs(run)[0]) == key
    os.utime(run / "vm.xplane.pb", (1, 1))
    assert cache.run_key(find_runs(run)[0]) != key


def test_an_unreadable_run_says_why_and_the_page_keeps_working(tmp_path, cache_dir):
    run = tmp_path / "plugins" / "profile" / "broken"
    run.mkdir(parents=True)
    (run / "vm.xplane.pb").write_bytes(b"\x0a\xff\xff\xff\x0f garbage")
    page = _open(Client(wsgi(AdvisorApp(tmp_path))), "run=broken")
    assert "Could not analyze <code>broken</code>" in page and "Traceback" not in page


def test_the_projects_rule_settings_apply_as_in_advisor_analyze(tmp_path, logdir, cache_dir, monkeypatch):
    """TensorBoard started in a project folder: its [tool.advisor] settings, as `advisor analyze` there."""
    root, scan, _ = logdir
    (tmp_path / "pyproject.toml").write_text('[tool.advisor]\nignore = ["missing-remat"]\n')
    monkeypatch.chdir(tmp_path)
    page = _open(Client(wsgi(AdvisorApp(root))), f"run={scan}")
    assert "rule-scan-dynamic-update-slice" in page and "rule-missing-remat" not in page
    (tmp_path / "pyproject.toml").write_text('[tool.advisor]\nignore = ["no-such-rule"]\n')
    page = Client(wsgi(AdvisorApp(root))).get("/index.html").text
    assert "unknown rule id" in page and "every rule runs with its defaults" in page


def test_serve_answers_only_requests_for_this_machine(logdir, cache_dir):
    served = Client(wsgi(AdvisorApp(logdir[0], profile_links=False)))
    assert served.get("/index.html", headers={"Host": "127.0.0.1:6007"}).status_code == 200
    assert served.get("/index.html", headers={"Host": "localhost"}).status_code == 200
    assert served.get("/index.html", headers={"Host": "[::1]:6007"}).status_code == 200
    assert served.get("/runs", headers={"Host": "evil.example:6007"}).status_code == 403


def test_the_cache_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("ADVISOR_CACHE_DIR", str(tmp_path))
    for i, key in enumerate(["old", "mid", "new"]):
        cache.write(key, {"x": "y" * 1000})
        os.utime(cache.path_for(key), (1_000 + i, 1_000 + i))
    cache.read("old")                     # used now: kept over "mid"
    cache.trim(2_500)
    assert cache.path_for("old").is_file() and cache.path_for("new").is_file()
    assert not cache.path_for("mid").is_file()


def test_the_efficiency_verdict_heads_the_run_where_the_summary_has_one():
    from advisor.report.html import run_section

    doc = analyze_json(FIXTURES / "transformer_scan")["runs"][0]
    verdict = doc["summary"]["efficiency"]["verdict"]       # its `advisor calibrate` as code
    assert verdict.replace("`advisor calibrate`", "<code>advisor calibrate</code>") in run_section(doc, [])
    doc["summary"].pop("efficiency")
    assert 'class="verdict"' not in run_section(doc, [])
    doc["summary"]["efficiency"] = {"verdict": "memory-bound <b>x</b>", "bound": "memory"}
    page = run_section(doc, [])
    assert '<p class="verdict"><b>verdict</b> memory-bound &lt;b&gt;x&lt;/b&gt;</p>' in page
    assert page.index('class="verdict"') < page.index("<h2>Findings</h2>")


def test_a_run_compile_checked_when_recorded_says_so_in_the_tab_as_in_the_cli(tmp_path, cache_dir):
    """run-workload compiles each recommended change and keeps the figures in the run's
    advisor_run.json (`compile_checked`): the tab (and serve, and analyze) show the advice as it was
    checked, not the trace's estimate (the tab said "estimated" and 67.2 MiB where the CLI said
    "compiled" and 76.6 MiB)."""
    import json

    run = _copy_run("transformer_scan", tmp_path / "logs", 1_700_000_000)
    meta_path = run / "advisor_run.json"
    meta = json.loads(meta_path.read_text())
    meta["compile_checked"] = {"base_bytes": 122204428, "variants": [       # 116.5 MiB, as run-workload compiled it
        {"config": {"model.remat": ["MLP", "Attn"]}, "required_bytes": 41876628},
        {"config": {"model.scan_layers": False}, "required_bytes": 103330612}]}
    meta_path.write_text(json.dumps(meta))
    line = "compiled: with --set model.remat=MLP+Attn: peak 116.5 MiB -> 39.9 MiB (XLA buffer assignment)"
    text = cli("analyze", tmp_path / "logs").stdout
    assert f"checked:  {line}" in text and "76.6 MiB less peak memory" in text
    routes = AdvisorApp(tmp_path / "logs").routes()
    page = _open(Client(lambda environ, start: routes[environ["PATH_INFO"]](environ, start)), f"run={run.name}")
    assert html.escape(line) in page and "76.6 MiB less peak memory" in page
    meta["compile_checked"] = {"base_bytes": "x", "variants": [{"config": 3}, "junk"]}   # a stranger's file
    meta_path.write_text(json.dumps(meta))
    assert "checked:  estimated: from this trace alone" in cli("analyze", tmp_path / "logs").stdout


def test_an_analysis_starts_and_is_followed_without_javascript(tmp_path, cache_dir):
    """A browser without scripts (or a headless screenshot) waited at "starting" forever: the page holds a
    form whose button posts the same same-origin request, answered by a redirect back to the page,
    which reloads itself while the analysis runs and shows the report when it is done."""
    run = _copy_run("transformer_remat", tmp_path / "logs", 1_700_000_000)
    routes = AdvisorApp(tmp_path / "logs").routes()
    client = Client(lambda environ, start: routes[environ["PATH_INFO"]](environ, start))
    query = f"run={run_ref(run.name)}"
    first = client.get(f"/index.html?{query}").text
    assert f'<noscript><form method="post" action="analyze?{html.escape(query)}">' in first
    # a page elsewhere cannot start one (cross-site form posts are marked so by the browser)
    assert client.post(f"/analyze?{query}", data={}, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    posted = client.post(f"/analyze?{query}", data="", content_type="application/x-www-form-urlencoded",
                         headers={"Sec-Fetch-Site": "same-origin"})      # what a browser sends for the form
    assert posted.status_code == 303 and posted.headers["Location"].endswith(f"index.html?{query}")
    end = time.monotonic() + 180
    while True:
        page = client.get(f"/index.html?{query}").text
        if 'id="progress"' not in page:
            break
        assert '<meta http-equiv="refresh" content="2">' in page and "<form" not in page.split('id="progress"')[1]
        assert time.monotonic() < end
        time.sleep(0.3)
    expected = analyze_json(FIXTURES / "transformer_remat")["runs"][0]["findings"]
    assert expected and all(f'id="rule-{f["rule"]}"' in page for f in expected)
