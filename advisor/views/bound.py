"""What the views are computed from besides the trace: the user's settings for the run.

The job (advisor/job.py) binds them to the profile once, before any view is computed
(`advisor.settings.Settings`, `bind`): the peaks the user gave, else advisor calibrate's figures
for the machine the run records (read by the job: a view never reads a file), the mesh, the device
memory, and the rules' options that views read too (`Rule.binds`). A view is then
`views.<name>.of(profile)`, computed on first use from the profile and these settings
(`settings(profile)`) and kept on the profile, so that every reader sees the same figures whoever
reads first.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from ..model import Profile
from ..settings import MIN_IDLE_SHARE, Settings, bind, device_capacity
from ..settings import bound as settings

__all__ = ["MIN_IDLE_SHARE", "Settings", "bind", "cached", "device_capacity", "settings"]
T = TypeVar("T")


def cached(profile: Profile, name: str, build: Callable[[Profile], T]) -> T:
    """The view `name` of the profile: built on first use, then kept."""
    views = profile.views
    if name not in views:
        views[name] = build(profile)
    return views[name]
