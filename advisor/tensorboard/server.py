"""`advisor serve`: the Advisor pages on 127.0.0.1 without TensorBoard.

Served by cheroot (a production WSGI server, installed with xprof), not werkzeug's development
server, which under 200 clients dropped connections from its 128-deep queue and kept idle ones
forever: THREADS request threads, connections waiting for one queued without bound (a listen
backlog of BACKLOG), at most KEEP_ALIVE idle connections kept open, each closed after IDLE_S. The
socket is bound with SO_REUSEADDR: a restart binds the port at once, even where a browser held a
connection. `python benchmarks/serve_load.py` measures it (docs/tensorboard.md).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path
from typing import Callable

from ..errors import AdvisorError
from ..report.escape import visible
from .app import AdvisorApp, wsgi
from .jobs import Budget, Jobs

HOST = "127.0.0.1"
THREADS = 16        # requests take about a millisecond and hold the GIL: more threads only wait for it
BACKLOG = 1024
KEEP_ALIVE = 256
IDLE_S = 10


def make_server(app: Callable, port: int):
    """A cheroot server of `app` on 127.0.0.1:port, bound (AdvisorError if it cannot be) but not yet serving."""
    from cheroot import wsgi as cheroot_wsgi

    class Server(cheroot_wsgi.Server):
        def error_log(self, msg="", level=20, traceback=False):
            # one line, never a traceback, and nothing of a request shown as terminal control
            print(f"advisor: serve: {visible(msg)}", file=sys.stderr, flush=True)

    # Bound here first for the reason in one line (cheroot's message names every address it tried),
    # and for a port 0 to name: cheroot sets SO_REUSEADDR only on a named port.
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError as err:
            raise AdvisorError(f"{HOST}:{port}: {err.strerror or err}; choose another --port (0: any free one)") \
                from None
        port = probe.getsockname()[1]
    server = Server((HOST, port), app, numthreads=THREADS, request_queue_size=BACKLOG, timeout=IDLE_S,
                    accepted_queue_size=-1)
    server.keep_alive_conn_limit = KEEP_ALIVE
    try:
        server.prepare()        # binds with SO_REUSEADDR, listens, starts the threads
    except OSError as err:
        raise AdvisorError(f"{HOST}:{port}: {err}; choose another --port (0: any free one)") from None
    return server


def serve(logdir: Path, port: int, workers: int, budget: Budget, say: Callable[[str], None]) -> None:
    """Serve until stopped: Ctrl-C raises KeyboardInterrupt, SIGTERM SystemExit (cleanup's handlers);
    the server's threads are stopped on the way out, and the analyses by Jobs.stop at exit."""
    server = make_server(wsgi(AdvisorApp(logdir, profile_links=False, jobs=Jobs(workers, budget))), port)
    try:
        say(f"advisor: serving {logdir} at http://{HOST}:{server.bind_addr[1]}/ ({how_to_stop()})")
        server.serve()
    finally:
        server.stop()


def how_to_stop() -> str:
    """What stops this process: Ctrl-C, unless it was started ignoring SIGINT (kept so, as POSIX
    tools do: `advisor serve ... &` from a shell without job control), then a kill."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return f"`kill {os.getpid()}` stops it"
    return "Ctrl-C stops"
