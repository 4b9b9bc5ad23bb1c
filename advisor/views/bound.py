"""What the views are computed from besides the trace: the user's settings for the run.

The job (advisor/job.py) binds them to the profile once, before any view is computed: the peaks
the user gave, else advisor calibrate's figures for the machine the run records (read by the job:
a view never reads a file), the mesh, and the rules' options that views read too (`Rule.binds`).
A view is then `views.<name>.of(profile)`, computed on first use from the profile and these
settings and kept on the profile, so that every reader sees the same figures whoever reads first.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, TypeVar

from ..model import Profile
from ..peak_table import UserPeaks

MIN_IDLE_SHARE = 0.2    # idle this share of the steps or more is host-bound (host-bound's min_idle_share default)
_KEY = "settings"       # where they are kept among the profile's views
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Settings:
    peaks: Optional[UserPeaks] = None           # --peak-flops/--peak-bandwidth: in place of the device table's
    calibration: Optional[UserPeaks] = None     # advisor calibrate's, for the machine the run records
    calibration_unused: str = ""                # why a calibration of a host of the trace's name is not used
    this_host: str = ""                         # the machine analyzing (a CPU trace's peaks the user gives name it)
    mesh: Optional[tuple[tuple[str, int], ...]] = None     # --mesh: the axes, major first
    min_idle_share: float = MIN_IDLE_SHARE      # idle steps are host-bound from this share


def bind(profile: Profile, settings: Settings) -> None:
    """The settings the profile's views are computed with; views computed with others are dropped."""
    if profile.views.get(_KEY) != settings:
        profile.views.clear()
        profile.views[_KEY] = settings


def settings(profile: Profile) -> Settings:
    """The settings bound to the profile (the defaults where none are)."""
    return profile.views.get(_KEY) or Settings()


def cached(profile: Profile, name: str, build: Callable[[Profile], T]) -> T:
    """The view `name` of the profile: built on first use, then kept."""
    views = profile.views
    if name not in views:
        views[name] = build(profile)
    return views[name]
