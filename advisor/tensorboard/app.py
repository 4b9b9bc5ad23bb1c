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
from ..runner import RUN_METADATA
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
        self.settings, self.settings_error = project_settings(Path.cwd())

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
        return cache.run_key(run.files(), self.settings)

    def _state(self, run: Run, other: Optional[Run]) -> tuple[dict, Optional[str]]:
        """Start what is missing (each run's analysis, then the comparison); the status and the
        cache key of what the page shows once done."""
        key = self._key(run)
        st = self.jobs.submit(key, "analyze", str(run.path), self.settings)
        if other is None or st["state"] != "done":
            return st, key
        other_key = self._key(other)
        st = self.jobs.submit(other_key, "analyze", str(other.path), self.settings)
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
        other_name = request.args.get("compare")
        other = next((r for r in runs if r.name == other_name), None) if other_name else None
        if run is None:
            return _respond(json.dumps({"state": "failed", "error": "no such run"}), "application/json", 404)
        try:
            st, _ = self._state(run, other)
        except OSError as err:      # its files went between the listing and now
            st = {"state": "failed", "error": f"the run's files changed while reading them: {err.strerror}"}
        return _respond(json.dumps(st), "application/json")

    @Request.application
    def index(self, request: Request) -> Response:
        name, other_name = request.args.get("run"), request.args.get("compare") or None
        runs, run = self._find(name)
        other = next((r for r in runs if r.name == other_name), None) if other_name else None
        body = [self._picker(runs, run, other)]
        if self.settings_error:
            body.append(f"<p>{_e(self.settings_error)}: every rule runs with its defaults.</p>")
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
        data = (f' data-run="{_e(run.name)}"' + (f' data-compare="{_e(other.name)}"' if other else "")) if run else ""
        page = (head(title, '<link rel="stylesheet" href="advisor.css">') + f"<body{data}>" + "".join(body)
                + f'<p class="meta">advisor {_e(__version__)}</p><script src="advisor.js"></script></body></html>\n')
        return _respond(page, "text/html")

    # -- pieces ----------------------------------------------------------------------------------

    def _picker(self, runs: list[Run], run: Optional[Run], other: Optional[Run]) -> str:
        shown = _shown_names(runs)

        def options(selected: Optional[Run], blank: str) -> str:
            return f'<option value="">{_e(blank)}</option>' + "".join(
                f'<option value="{_e(r.name)}"{" selected" if r is selected else ""}>{_e(shown[r.name])}</option>'
                for r in runs)
        return ('<header class="bar"><h1>Advisor</h1><form method="get" action="index.html">'
                f'<label>run <select name="run" data-go>{options(run, "choose a run")}</select></label>'
                f'<label>compare with <select name="compare" data-go>{options(other, "none")}</select></label>'
                '<noscript><button>open</button></noscript></form></header>')

    def _run_table(self, runs: list[Run]) -> str:
        ran = _labels(runs)
        rows = "".join(
            f'<tr><td><a href="index.html?run={_q(r.name)}">{_e(r.name)}</a></td><td>{_e(ran[r.name])}</td>'
            f"<td>{_e(_when(r.mtime))}</td><td>{_e(', '.join(r.hosts))}</td><td class=n>{_e(mib(r.size))}</td>"
            f"<td>{_e(self._brief(r))}</td></tr>"
            for r in runs)
        return (f"<p>{len(runs)} profile run(s), newest first; a run is analyzed when opened.</p>"
                '<table class="runs"><tr><th>run</th><th>workload and settings</th><th>recorded</th><th>hosts</th>'
                f"<th>trace size</th><th>analysis</th></tr>{rows}</table>")

    def _brief(self, run: Run) -> str:
        """The cached analysis's findings by severity; nothing is analyzed to list a run."""
        from ..findings import SEVERITIES

        try:
            brief = cache.read_brief(self._key(run))
        except OSError:
            brief = None
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
            st, key = self._state(run, other)
        except OSError as err:      # its files went between the listing and now
            return (f"<p>The files of <code>{_e(run.name)}</code> changed while reading them "
                    f"({_e(err.strerror)}): reload.</p>")
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
    from ..engine import all_rules, select_rules
    from ..errors import AdvisorError
    from ..settings import read_project_settings, validate_options

    try:
        project = read_project_settings(folder)
        select_rules(project.select, project.ignore)
        options = validate_options(project.options, {r.id: r for r in all_rules()})
    except AdvisorError as err:
        return json.dumps({}), str(err)
    return json.dumps({"select": project.select, "ignore": project.ignore, "options": options},
                      sort_keys=True, default=str), None


def _labels(runs: list[Run]) -> dict[str, str]:
    """Each run's workload and the settings that tell it from the other runs of that workload (from
    its advisor_run.json; "" for a trace no bundled workload recorded): a sweep's runs differ by what
    they set, not only by their timestamps."""
    from ..run_label import labels, read

    return {r.name: text for r, text in zip(runs, labels([read(r.path / RUN_METADATA) for r in runs]))}


def _shown_names(runs: list[Run]) -> dict[str, str]:
    """What the run pickers show: the run's name, and its label beside it (the value stays the name)."""
    return {name: f"{name} · {text}" if text else name for name, text in _labels(runs).items()}


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
            return Response(status=302, headers={"Location": "index.html"})(environ, start_response)
        handler = routes.get(path)
        if handler is None:
            return _respond("not found", "text/plain", 404)(environ, start_response)
        return handler(environ, start_response)
    return application
