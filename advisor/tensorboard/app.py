"""The Advisor pages as one WSGI app (werkzeug), used by the TensorBoard plugin and by `advisor serve`.

Routes (relative: the plugin serves them under data/plugin/advisor/): index.html (the run picker
and the selected run's report, or two runs compared), runs (JSON, newest first), status (JSON: an
analysis's progress), advisor.js, advisor.css, index.js (TensorBoard's entry). A request never reads
a trace: it looks up the cache or starts a worker.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Callable, Optional

from werkzeug.wrappers import Request, Response

from .. import __version__
from ..report import escape
from ..report.html import CSS, head, run_section
from ..units import mib
from . import assets, cache
from .jobs import Jobs
from .links import finding_links
from .runs import Run, list_runs

CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'self'")


def _e(x) -> str:
    return escape.html(x)


class AdvisorApp:
    """profile_links: link findings into TensorBoard's Profile tab (False without TensorBoard)."""

    def __init__(self, logdir: str | Path, profile_links: bool = True, jobs: Optional[Jobs] = None):
        self.logdir = Path(logdir)
        self.profile_links = profile_links
        self.jobs = jobs or Jobs()

    def routes(self) -> dict[str, Callable]:
        return {"/index.js": self._static(assets.INDEX_JS, "text/javascript"),
                "/advisor.js": self._static(assets.ADVISOR_JS, "text/javascript"),
                "/advisor.css": self._static(CSS + assets.EXTRA_CSS, "text/css"),
                "/index.html": self.index, "/runs": self.runs, "/status": self.status}

    def _static(self, text: str, mimetype: str) -> Callable:
        @Request.application
        def serve(request: Request) -> Response:
            return _respond(text, mimetype)
        return serve

    # -- runs and jobs ---------------------------------------------------------------------------

    def _find(self, name: Optional[str]) -> tuple[list[Run], Optional[Run]]:
        runs = list_runs(self.logdir)
        return runs, next((r for r in runs if r.name == name), None) if name else None

    def _key(self, run: Run) -> str:
        from ..locate import find_runs
        return cache.run_key(find_runs(run.path)[0])

    def _state(self, run: Run, other: Optional[Run]) -> tuple[dict, Optional[str]]:
        """Start what is missing (each run's analysis, then the comparison); the status and the
        cache key of what the page shows once done."""
        key = self._key(run)
        st = self.jobs.submit(key, "analyze", str(run.path))
        if other is None or st["state"] != "done":
            return st, key
        other_key = self._key(other)
        st = self.jobs.submit(other_key, "analyze", str(other.path))
        if st["state"] != "done":
            return st, other_key
        ckey = cache.compare_key(key, other_key)
        return self.jobs.submit(ckey, "compare", key, other_key, run.name, other.name), ckey

    # -- routes ----------------------------------------------------------------------------------

    @Request.application
    def runs(self, request: Request) -> Response:
        return _respond(json.dumps([r.to_json() for r in list_runs(self.logdir)]), "application/json")

    @Request.application
    def status(self, request: Request) -> Response:
        runs, run = self._find(request.args.get("run"))
        _, other = self._find(request.args.get("compare"))
        if run is None:
            return _respond(json.dumps({"state": "failed", "error": "no such run"}), "application/json", 404)
        st, _ = self._state(run, other)
        return _respond(json.dumps(st), "application/json")

    @Request.application
    def index(self, request: Request) -> Response:
        name, other_name = request.args.get("run"), request.args.get("compare") or None
        runs, run = self._find(name)
        other = next((r for r in runs if r.name == other_name), None) if other_name else None
        body = [self._picker(runs, run, other)]
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
        page = (head(title, '<link rel="stylesheet" href="advisor.css">') + "<body>" + "".join(body)
                + f'<p class="meta">advisor {_e(__version__)}</p><script src="advisor.js"></script></body></html>\n')
        return _respond(page, "text/html")

    # -- pieces ----------------------------------------------------------------------------------

    def _picker(self, runs: list[Run], run: Optional[Run], other: Optional[Run]) -> str:
        def options(selected: Optional[Run], blank: str) -> str:
            return f'<option value="">{_e(blank)}</option>' + "".join(
                f'<option value="{_e(r.name)}"{" selected" if r is selected else ""}>{_e(r.name)}</option>'
                for r in runs)
        return ('<header class="bar"><h1>Advisor</h1><form method="get" action="index.html">'
                f'<label>run <select name="run" data-go>{options(run, "choose a run")}</select></label>'
                f'<label>compare with <select name="compare" data-go>{options(other, "none")}</select></label>'
                '<noscript><button>open</button></noscript></form></header>')

    def _run_table(self, runs: list[Run]) -> str:
        rows = "".join(
            f'<tr><td><a href="index.html?run={_q(r.name)}">{_e(r.name)}</a></td>'
            f"<td>{_e(_when(r.mtime))}</td><td>{_e(', '.join(r.hosts))}</td><td class=n>{_e(mib(r.size))}</td></tr>"
            for r in runs)
        return (f"<p>{len(runs)} profile run(s), newest first; a run is analyzed when opened.</p>"
                '<table class="runs"><tr><th>run</th><th>recorded</th><th>hosts</th><th>trace size</th></tr>'
                f"{rows}</table>")

    def _content(self, run: Run, other: Optional[Run]) -> str:
        st, key = self._state(run, other)
        if st["state"] != "done":
            what = f"{run.name} and {other.name}" if other else run.name
            if st["state"] == "failed":
                self.jobs.forget_failure(key)      # a reload tries again
                return f"<p>Could not analyze <code>{_e(what)}</code>: {_e(st.get('error'))}</p>"
            query = f"run={_q(run.name)}" + (f"&compare={_q(other.name)}" if other else "")
            return (f'<div id="progress" data-status="status?{_e(query)}">analyzing <code>{_e(what)}</code>: '
                    f'<span class="stage">{_e(st.get("stage", st["state"]))}</span></div>')
        doc = cache.read(key) or {}
        if "failed" in doc:
            return f"<p>Could not analyze <code>{_e(run.name)}</code>: {_e(doc['failed'].get('reason'))}</p>"
        if other is not None:
            return doc.get("html", "")
        run_doc = doc["run"]
        hosts = list(run.hosts)
        module = run_doc["summary"].get("step_module")
        return run_section(run_doc, doc["figures"], lambda f: self._links(f, run.name, hosts, module))

    def _links(self, finding: dict, run: str, hosts: list[str], module: Optional[str]) -> str:
        links = finding_links(finding, run, hosts, module)
        search = next((link.search for link in links if link.search), None)
        find = f" (search for <code>{_e(search)}</code>)" if search else ""
        if not self.profile_links:
            return (f'<p class="tools">in TensorBoard\'s Profile tab: '
                    f"{_e(', '.join(link.title for link in links))}{find}</p>")
        # The page is data/plugin/advisor/index.html: three levels up is TensorBoard's own page.
        anchors = "".join(f'<a href="../../../{_e(link.url)}" target="_top" data-tool="{_e(link.tool)}">'
                          f"{_e(link.title)}</a>" for link in links)
        return f'<p class="tools">open in the Profile tab: {anchors}{find}</p>'


def _q(text: str) -> str:
    import urllib.parse
    return escape.html(urllib.parse.quote(text, safe="", errors="surrogateescape"))


def _when(mtime: float) -> str:
    return datetime.datetime.fromtimestamp(mtime).strftime("%Y-%m-%d %H:%M:%S")


def _respond(body: str, mimetype: str, status: int = 200) -> Response:
    r = Response(body, status=status, mimetype=mimetype)
    r.headers["Content-Security-Policy"] = CSP
    r.headers["X-Content-Type-Options"] = "nosniff"
    r.headers["Cache-Control"] = "no-store" if mimetype in ("application/json", "text/html") else "max-age=60"
    return r


def wsgi(app: AdvisorApp) -> Callable:
    """The routes as one WSGI application at the root (for `advisor serve`): / goes to index.html."""
    routes = app.routes()

    def application(environ, start_response):
        path = environ.get("PATH_INFO") or "/"
        if path == "/":
            return Response(status=302, headers={"Location": "index.html"})(environ, start_response)
        handler = routes.get(path)
        if handler is None:
            return _respond("not found", "text/plain", 404)(environ, start_response)
        return handler(environ, start_response)
    return application
