"""The JSON report: a stable shape for tools and CI."""

from __future__ import annotations

import json

from .. import __version__

SCHEMA_VERSION = 1


def render(docs: list[dict], read_from: str) -> str:
    """docs: the runs (Analysis.to_json())."""
    doc = {
        "schema_version": SCHEMA_VERSION,
        "advisor_version": __version__,
        "read": read_from,
        "runs": docs,
    }
    return json.dumps(doc, indent=2, default=str)
