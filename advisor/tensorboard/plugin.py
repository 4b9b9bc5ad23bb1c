"""The TensorBoard plugin: an "Advisor" tab, active when the logdir holds profile runs
(`<run>/plugins/profile/<run>/*.xplane.pb`); registered by the `tensorboard_plugins` entry point."""

from __future__ import annotations

import time

from tensorboard.plugins import base_plugin

from .app import AdvisorApp
from .runs import has_runs

PLUGIN_NAME = "advisor"


class AdvisorPlugin(base_plugin.TBPlugin):
    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext):
        self._logdir = context.logdir
        self._app = AdvisorApp(context.logdir) if context.logdir else None
        self._active = False
        self._checked = float("-inf")

    def get_plugin_apps(self):
        return self._app.routes() if self._app else {}

    def is_active(self) -> bool:
        # TensorBoard asks on every page load: once true it stays true (a run is not unrecorded);
        # while false, the logdir is walked again at most every 5 s.
        if not self._active and self._logdir and time.monotonic() - self._checked > 5:
            self._checked = time.monotonic()
            self._active = has_runs(self._logdir)
        return self._active

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="Advisor", disable_reload=True)
