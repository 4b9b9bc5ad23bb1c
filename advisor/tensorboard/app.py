"""The Advisor pages as one WSGI app (werkzeug), used by the TensorBoard plugin and by `advisor serve`.

Routes (relative: the plugin serves them under data/plugin/advisor/): index.html (the run picker
and the selected run's report, or two runs compared), runs (JSON, newest first), status (JSON: an
analysis's progress), analyze (POST: start what a page shows), advisor.js, advisor.css, index.js
(TensorBoard's entry). A request never reads a trace nor walks the logdir: it reads the last
listing (runs.RunIndex) and the cache. Reads are GET (or HEAD) and start nothing; an analysis starts
only on a POST from the Advisor page itself (same origin), so that a page elsewhere cannot make this
machine analyze (`<img src=http://127.0.0.1:PORT/status?run=...>` did).

A run travels in URLs and in the page's attributes as its name's bytes percent-encoded (`run_ref`),
and query strings are decoded as the file system's names are (undecodable bytes kept): a name with
control characters, bidi marks or bytes that are not UTF-8 opens the run it names.
"""

from __future__ import annotations

import collections
import datetime
import functools
import json
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Callable, Optional

from werkzeug.utils import redirect
from werkzeug.wrappers import Request, Response

from ..errors import AdvisorError
from ..locate import RUN_METADATA
from ..report import escape
from ..report.html import CSS, head, run_section
from ..units import mib
from ..version import __version__
from . import assets, cache
from .jobs import Budget, Jobs
from .links import finding_links
from .runs import DATED_BY, Run, RunIndex

REPORTS_KEPT = 32      # finished reports kept as HTML (a cache key names what they were made from)
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'self'")


def _e(x) -> str:
    return escape.html(x)


def run_ref(name: str) -> str:
    """A run's name as URLs and the page's attributes carry it: its bytes percent-encoded (ASCII)."""
    return urllib.parse.quote(name, safe="", errors="surrogateescape")


def _allow(*methods: str) -> Callable:
    """Only these HTTP methods reach the route (405 for the others)."""
    def wrap(fn):
        @functools.wraps(fn)
        def route(self, request: Request) -> Response:
            if request.method not in methods:
                r = _respond("method not allowed", "text/plain", 405)
                r.headers["Allow"] = ", ".join(methods)
                return r
            return fn(self, request)
        return route
    return wrap


def same_origin(request: Request) -> bool:
    """Whether a browser sent this from one of our own pages. Browsers mark every request with
    Sec-Fetch-Site, and every POST with Origin; a request with neither came from no web page."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("Origin")
    return origin is None or origin == f"{request.scheme}://{request.host}"


class AdvisorApp:
    """profile_links: link findings into TensorBoard's Profile tab (False without TensorBoard)."""

    def __init__(self, logdir: str | Path, profile_links: bool = True, jobs: Optional[Jobs] = None):
        self.logdir = Path(logdir)
        self.profile_links = profile_links
        self.budget_error = None
        if jobs is None:
            try:
                budget = Budget.from_env()
            except AdvisorError as err:
                budget, self.budget_error = Budget(), str(err)
            jobs = Jobs(budget=budget)
        self.jobs = jobs
        self.index_of_runs = RunIndex(self.logdir)
        self.settings, self.settings_error = project_settings(Path.cwd())
        self._made: dict[str, tuple] = {}       # piece -> (what it was made from, the piece)
        self._reports: collections.OrderedDict = collections.OrderedDict()   # (key, run) -> HTML, newest last
        self._lock = threading.Lock()

    def routes(self) -> dict[str, Callable]:
        return {"/index.js": self._static(assets.INDEX_JS, "text/javascript"),
                "/advisor.js": self._static(assets.ADVISOR_JS, "text/javascript"),
                "/advisor.css": self._static(CSS + assets.EXTRA_CSS, "text/css"),
                "/index.html": self.index, "/runs": self.runs, "/status": self.status, "/analyze": self.analyze}

    def _static(self, text: str, mimetype: str) -> Callable:
        @Request.application
        def serve(request: Request) -> Response:
            if request.method not in ("GET", "HEAD"):
                r = _respond("method not allowed", "text/plain", 405)
                r.headers["Allow"] = "GET, HEAD"
                return r
            return _respond(text, mimetype)
        return serve

    def _cached(self, piece: str, source: tuple, make: Callable[[], str]) -> str:
        """A piece of page made once for as long as what it is made from stays the same."""
        made = self._made.get(piece)
        if made is None or made[0] != source:
            made = (source, make())
            self._made[piece] = made
        return made[1]

    # -- runs and jobs ---------------------------------------------------------------------------

    def _selected(self, request: Request) -> tuple[Optional[str], Optional[str]]:
        """The run and the run to compare it with, named in the query (see run_ref): decoded as the
        listing's names are (os.walk's, surrogateescape). Picked in the form without its script, the
        values are run_refs, sent encoded once more (`picked`)."""
        q = dict(urllib.parse.parse_qsl(request.environ.get("QUERY_STRING", ""), errors="surrogateescape"))
        names = [q.get("run") or None, q.get("compare") or None]
        if q.get("picked"):
            names = [urllib.parse.unquote(n, errors="surrogateescape") if n else None for n in names]
        return names[0], names[1]

    def _key(self, run: Run) -> str:
        return cache.run_key(run.files(), self.settings)

    def _state(self, run: Run, other: Optional[Run], start: bool) -> tuple[dict, Optional[str]]:
        """The status, and the cache key, of what the page shows once done: each run's analysis, then
        the comparison. With start, what is missing is started (one step at a time); without, the
        first step not done says "none" if it has not started."""
        def step(key: str, kind: str, *args: str) -> dict:
            return self.jobs.submit(key, kind, *args) if start else self.jobs.status(key)

        key = self._key(run)
        st = step(key, "analyze", str(run.path), self.settings)
        if other is None or st["state"] != "done":
            return st, key
        other_key = self._key(other)
        st = step(other_key, "analyze", str(other.path), self.settings)
        if st["state"] != "done":
            return st, other_key
        ckey = cache.compare_key(key, other_key)
        return step(ckey, "compare", key, other_key, run.name, other.name), ckey

    def _json_state(self, request: Request, start: bool) -> Response:
        name, other_name = self._selected(request)
        run, other = self.index_of_runs.get(name), self.index_of_runs.get(other_name)
        if run is None:
            return _respond(json.dumps({"state": "failed", "error": "no such run"}), "application/json", 404)
        try:
            st, _ = self._state(run, other, start)
        except OSError as err:      # its files went between the listing and now
            st = {"state": "failed", "error": f"the run's files changed while reading them: {err.strerror}"}
        return _respond(json.dumps(st), "application/json")

    # -- routes ----------------------------------------------------------------------------------

    @Request.application
    @_allow("GET", "HEAD")
    def runs(self, request: Request) -> Response:
        listing = self.index_of_runs
        body = self._cached("runs", (listing.generation,), lambda: json.dumps([r.to_json() for r in listing.runs()]))
        return _respond(body, "application/json")

    @Request.application
    @_allow("GET", "HEAD")
    def status(self, request: Request) -> Response:
        """What the page's analysis is at; starts nothing ("none": not started)."""
        return self._json_state(request, start=False)

    @Request.application
    @_allow("POST")
    def analyze(self, request: Request) -> Response:
        """Start what the page shows (each run's analysis, then the comparison); its status."""
        if not same_origin(request):
            return _respond(json.dumps({"state": "failed", "error": "an analysis starts only from the Advisor "
                                        "page itself"}), "application/json", 403)
        answer = self._json_state(request, start=True)
        if request.mimetype == "application/x-www-form-urlencoded":     # the page's form, without scripts
            back = urllib.parse.urlencode({k: request.args[k] for k in ("run", "compare") if k in request.args})
            return redirect(f"index.html?{back}", 303)
        return answer

    @Request.application
    @_allow("GET", "HEAD")
    def index(self, request: Request) -> Response:
        name, other_name = self._selected(request)
        runs = self.index_of_runs.runs()
        run, other = self.index_of_runs.get(name), self.index_of_runs.get(other_name)
        if name is None and other_name is None:       # the run list, the page every tab loads first
            return _respond(self._cached("list", self._table_source(), lambda: self._page(runs, None, None, None)),
                            "text/html")
        return _respond(self._page(runs, run, other, name), "text/html")

    def _page(self, runs: list[Run], run: Optional[Run], other: Optional[Run], name: Optional[str]) -> bytes:
        body = [self._picker(runs, run, other)]
        if self.settings_error:
            body.append(f"<p>{_e(self.settings_error)}: every rule runs with its defaults.</p>")
        if self.budget_error:
            body.append(f"<p>{_e(self.budget_error)}: each analysis has the default budget.</p>")
        if not runs:
            body.append(f"<p>No profile runs under <code>{_e(self.logdir)}</code> "
                        "(a run is a folder plugins/profile/RUN/ holding .xplane.pb files).</p>")
        elif run is None:
            if name:
                body.append(f"<p>No run named <code>{_e(name)}</code> in this logdir.</p>")
            body.append(self._run_table(runs))
        else:
            body.append(self._content(run, other))
        title = f"advisor: {run.name}" if run else "advisor"
        data = (f' data-run="{run_ref(run.name)}"' + (f' data-compare="{run_ref(other.name)}"' if other else "")
                if run else "")
        page = (head(title, '<link rel="stylesheet" href="advisor.css">') + f"<body{data}>" + "".join(body)
                + f'<p class="meta">advisor {_e(__version__)}</p><script src="advisor.js"></script></body></html>\n')
        return page.encode()

    # -- pieces ----------------------------------------------------------------------------------

    def _picker(self, runs: list[Run], run: Optional[Run], other: Optional[Run]) -> str:
        """Each option's value is the run's run_ref, its text what the run ran, the settings that
        tell it apart first, then its name as shown (escape.html): a select is cut at the page's width,
        and a long name would hide the settings. Its title, and the select's, the name and the label."""
        def make() -> str:
            shown, full = _shown_names(self._labels(runs, True), True), _shown_names(self._labels(runs))
            return "".join(f'<option value="{run_ref(r.name)}" title="{_e(full[r.name])}">{_e(shown[r.name])}</option>'
                           for r in runs)
        options = self._cached("options", (self.index_of_runs.generation,), make)

        def select(name: str, chosen: Optional[Run], blank: str) -> str:
            if chosen is None:
                return f'<select name="{name}" data-go><option value="">{_e(blank)}</option>{options}</select>'
            ref = f'<option value="{run_ref(chosen.name)}" '
            title = _shown_names({chosen.name: self._labels(runs).get(chosen.name, "")})[chosen.name]
            return (f'<select name="{name}" data-go title="{_e(title)}"><option value="">{_e(blank)}</option>'
                    + options.replace(ref, ref + "selected ", 1) + "</select>")
        return ('<header class="bar"><h1>Advisor</h1><form method="get" action="index.html">'
                f'<label>run {select("run", run, "choose a run")}</label>'
                f'<label>compare with {select("compare", other, "none")}</label>'
                '<input type="hidden" name="picked" value="1"><noscript><button>open</button></noscript>'
                '</form></header>')

    def _table_source(self) -> tuple:
        """What the run table is made from: the listing, the analyses that ended, and the time in
        steps of 5 s (another process may have analyzed a run into the same cache)."""
        return self.index_of_runs.generation, self.jobs.generation, int(time.monotonic() // 5)

    def _run_table(self, runs: list[Run]) -> str:
        def make() -> str:
            ran = self._labels(runs)
            rows = "".join(
                f'<tr><td><a href="index.html?run={run_ref(r.name)}">{_wbr(r.name)}</a></td><td>{_e(ran[r.name])}</td>'
                f"{_recorded(r)}{_hosts(r)}<td class=n>{_e(mib(r.size))}</td>"
                f"<td>{_e(self._brief(r))}</td></tr>"
                for r in runs)
            return (f"<p>{len(runs)} profile run(s), newest recorded first; a run is analyzed when opened.</p>"
                    '<div class="scroll"><table class="runs"><colgroup><col><col><col class="when"><col class="hosts">'
                    '<col class="size"><col class="brief"></colgroup><tr><th>run</th><th>workload and settings</th>'
                    f"<th>recorded</th><th>hosts</th><th>trace size</th><th>analysis</th></tr>{rows}</table></div>")
        return self._cached("table", self._table_source(), make)

    def _labels(self, runs: list[Run], settings_first: bool = False) -> dict[str, str]:
        """_labels of the listing, read again only when the listing changes (its advisor_run.json files
        are among what the listing stamps)."""
        return self._cached(f"labels{settings_first:d}", (self.index_of_runs.generation,),
                            lambda: _labels(runs, settings_first))

    def _brief(self, run: Run) -> str:
        """The cached analysis's findings by severity; nothing is analyzed to list a run."""
        from ..findings import SEVERITIES

        brief = cache.read_brief(run.listed_key(self.settings))
        if brief is None:
            return "not analyzed yet"
        if brief.get("failed"):
            return "could not be read"
        sev = brief.get("severities") or []
        counts = ", ".join(f"{sev.count(s)} {s}" for s in reversed(SEVERITIES) if sev.count(s))
        text = f"{len(sev)} finding{'' if len(sev) == 1 else 's'}" + (f" ({counts})" if counts else "")
        return text + (", partly read" if brief.get("partial") else "")

    def _content(self, run: Run, other: Optional[Run]) -> str:
        try:
            st, key = self._state(run, other, start=False)
        except OSError as err:      # its files went between the listing and now
            return (f"<p>The files of <code>{_e(run.name)}</code> changed while reading them "
                    f"({_e(err.strerror)}): reload.</p>")
        if st["state"] != "done":
            what = f"{run.name} and {other.name}" if other else run.name
            if st["state"] == "failed":
                self.jobs.forget_failure(key)      # a reload tries again, unless a budget stopped it
                return f"<p>Could not analyze <code>{_e(what)}</code>: {_e(st.get('error'))}</p>"
            query = f"run={run_ref(run.name)}" + (f"&compare={run_ref(other.name)}" if other else "")
            stage = "starting" if st["state"] == "none" else st.get("stage", st["state"])
            # the page's script starts the analysis (a POST: reads start nothing) and follows it; without
            # scripts a form's button posts the same request, and a running analysis's page reloads itself
            idle = st["state"] == "none"
            plain = (f'<form method="post" action="analyze?{_e(query)}"><button type="submit">analyze</button>'
                     "</form>" if idle else '<meta http-equiv="refresh" content="2">')
            return (f'<div id="progress" data-status="status?{_e(query)}" data-start="analyze?{_e(query)}">'
                    f'analyzing <code>{_e(what)}</code>: <span class="stage">{_e(stage)}</span>'
                    f"<noscript>{plain}</noscript></div>")
        made = self._reports.get((key, run.name))
        if made is None:
            made = self._report(key, run, other)
            with self._lock:
                self._reports[(key, run.name)] = made
                while len(self._reports) > REPORTS_KEPT:
                    self._reports.popitem(last=False)
        return made

    def _report(self, key: str, run: Run, other: Optional[Run]) -> str:
        """A finished analysis or comparison as HTML, from the cache."""
        doc = cache.read(key) or {}
        if "failed" in doc:
            return f"<p>Could not analyze <code>{_e(run.name)}</code>: {_e(doc['failed'].get('reason'))}</p>"
        if other is not None:
            return doc.get("html", "")
        run_doc = doc["run"]
        hosts = list(run.hosts)
        module, backend = run_doc["summary"].get("step_module"), run_doc.get("backend", "")
        return run_section(run_doc, doc["figures"], lambda f: self._links(f, run.name, hosts, module, backend))

    def _links(self, finding: dict, run: str, hosts: list[str], module: Optional[str], backend: str) -> str:
        links = finding_links(finding, run, hosts, module, backend)
        search = next((link.search for link in links if link.search), None)
        find = f" (search for <code>{_e(search)}</code>)" if search else ""
        if not self.profile_links:
            return (f'<p class="tools">in TensorBoard\'s Profile tab: '
                    f"{_e(', '.join(link.title for link in links))}{find}</p>")
        # The page is data/plugin/advisor/index.html: three levels up is TensorBoard's own page.
        anchors = "".join(f'<a href="../../../{_e(link.url)}" target="_top" data-tool="{_e(link.tool)}">'
                          f"{_e(link.title)}</a>" for link in links)
        return f'<p class="tools">open in the Profile tab: {anchors}{find}</p>'


def project_settings(folder: Path) -> tuple[str, Optional[str]]:
    """The rules and options of the project TensorBoard was started in ([tool.advisor] in its
    pyproject.toml or setup.cfg), as `advisor analyze` run there reads them: a JSON string (part of
    the cache key, passed to the worker), and the reason when they could not be read."""
    from ..errors import AdvisorError
    from ..user_input import job, read_project_settings

    try:
        project = read_project_settings(folder)
        options = job(project=project).options      # checked as the worker's job will be
    except AdvisorError as err:
        return json.dumps({}), str(err)
    return json.dumps({"select": project.select, "ignore": project.ignore, "options": options},
                      sort_keys=True, default=str), None


def _labels(runs: list[Run], settings_first: bool = False) -> dict[str, str]:
    """Each run's workload and the settings that tell it from the other runs of that workload (from
    its advisor_run.json; "" for a trace no bundled workload recorded): a sweep's runs differ by what
    they set, not only by their timestamps. settings_first: run_label.settings_first's order."""
    from ..run_label import labels, read
    from ..run_label import settings_first as first

    infos = [read(r.path / RUN_METADATA) for r in runs]
    return {r.name: text for r, text in zip(runs, (first if settings_first else labels)(infos))}


def _shown_names(labels: dict[str, str], label_first: bool = False) -> dict[str, str]:
    """The run's name and its label beside it (before it with label_first)."""
    if label_first:
        return {name: f"{text} · {name}" if text else name for name, text in labels.items()}
    return {name: f"{name} · {text}" if text else name for name, text in labels.items()}


def _when(mtime: float) -> str:
    return datetime.datetime.fromtimestamp(mtime).strftime("%Y-%m-%d %H:%M:%S")


def _recorded(run: Run) -> str:
    """The run list's recorded cell: when, and (its title) what says so; a file's time marked as such."""
    mark = ' <span class="meta">(file time)</span>' if run.recorded_from == "mtime" else ""
    return (f'<td title="{_e(DATED_BY[run.recorded_from])}"><span class="when">{_e(_when(run.recorded))}</span>'
            f'{mark}</td>')


def _wbr(name: str) -> str:
    """A run's name escaped, where it may break: after each `/` (a long name wraps by its folders)."""
    return "/<wbr>".join(_e(part) for part in name.split("/"))


def _hosts(run: Run, shown: int = 3) -> str:
    """The run list's hosts cell: up to `shown` names; beyond, how many and the first (every name in
    its title)."""
    names = ", ".join(run.hosts)
    if len(run.hosts) <= shown:
        return f"<td>{_e(names)}</td>"
    return f'<td title="{_e(names)}">{len(run.hosts)} hosts: {_e(run.hosts[0])}, …</td>'


def _respond(body: str, mimetype: str, status: int = 200) -> Response:
    r = Response(body, status=status, mimetype=mimetype)
    r.headers["Content-Security-Policy"] = CSP
    r.headers["X-Content-Type-Options"] = "nosniff"
    r.headers["Cache-Control"] = "no-store" if mimetype in ("application/json", "text/html") else "max-age=60"
    return r


LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def wsgi(app: AdvisorApp) -> Callable:
    """The routes as one WSGI application at the root (for `advisor serve`): / goes to index.html.
    Only requests addressed to this machine by name are served (a page elsewhere that rebinds its
    own host name to 127.0.0.1 gets a 403, not the reports)."""
    routes = app.routes()

    def application(environ, start_response):
        host = environ.get("HTTP_HOST") or ""
        if (host if host.endswith("]") else host.rsplit(":", 1)[0]) not in LOCAL_HOSTS:
            return _respond("forbidden: serve is for this machine only (open http://127.0.0.1:PORT/)",
                            "text/plain", 403)(environ, start_response)
        path = environ.get("PATH_INFO") or "/"
        if path == "/":
            # the query goes along (/?run=X opens X); its bytes as sent (WSGI's latin-1), any that
            # may not stand in a header percent-encoded
            query = urllib.parse.quote((environ.get("QUERY_STRING") or "").encode("latin-1", "replace"),
                                       safe="%&=+;,/?:@!$'()*~")
            return Response(status=302, headers={"Location": "index.html" + (f"?{query}" if query else "")})(
                environ, start_response)
        handler = routes.get(path)
        if handler is None:
            return _respond("not found", "text/plain", 404)(environ, start_response)
        return handler(environ, start_response)
    return application
