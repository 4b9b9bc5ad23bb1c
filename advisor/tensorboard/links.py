"""Links from a finding into the Profile plugin's tools for the same run.

The Profile plugin (xprof) reads its selection from the TensorBoard page's query string: `run`,
`tag` (the tool: trace_viewer, memory_viewer, op_profile, hlo_stats), `host` (`hosts` for
the trace viewer), `moduleName` and `opName`. Of the tools, only the graph viewer selects that op (it
shows its neighbourhood in the HLO graph); for the others the op's name is shown beside the links,
to search for. Op profile and HLO stats are left out on the CPU backend, where xprof leaves them
empty (../shared/XPROF_NOTES.md).
"""

from __future__ import annotations

import dataclasses
import functools
import urllib.parse
from typing import Any, Iterator, Optional

OP_KEYS = ("instruction", "op", "op_name", "hlo_op")    # evidence keys whose values name HLO ops
MODULE_KEYS = ("module", "step_module")
TOOL_TITLES = {"trace_viewer": "trace viewer", "memory_viewer": "memory viewer", "graph_viewer": "graph viewer",
               "op_profile": "op profile", "hlo_stats": "HLO stats"}


@dataclasses.dataclass(frozen=True)
class Link:
    tool: str
    url: str              # relative to the TensorBoard page
    search: Optional[str]   # the op name to type into the tool's search, where it cannot be selected

    @property
    def title(self) -> str:
        return TOOL_TITLES.get(self.tool, self.tool)


def _walk(value: Any, keys: tuple[str, ...]) -> Iterator[str]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k in keys and isinstance(v, str) and v:
                yield v
            else:
                yield from _walk(v, keys)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, keys)


def _first(values: Iterator[str]) -> Optional[str]:
    return next(iter(values), None)


@functools.lru_cache(maxsize=1)
def _reads_buffers() -> frozenset[str]:
    """The rules that read the buffers live at the memory peak (Rule.needs): the memory viewer shows them."""
    from advisor import rules
    from advisor.rule import readers

    return frozenset(readers(rules.ALL)["buffers"])


def profile_url(run: str, tool: str, host: Optional[str] = None, module: Optional[str] = None,
                op: Optional[str] = None) -> str:
    """The TensorBoard URL (query and fragment) that opens the Profile plugin on this run and tool."""
    params = {"run": run, "tag": tool}
    if host:
        params["host"] = host
        if tool == "trace_viewer":
            params["hosts"] = host      # the trace viewer can show several hosts: it reads `hosts`
    if module:
        params["moduleName"] = module
    if op:
        params["opName"] = op
    return "?" + urllib.parse.urlencode(params, errors="surrogateescape") + "#profile"


def finding_links(finding: dict, run: str, hosts: list[str], step_module: Optional[str],
                  backend: str = "") -> list[Link]:
    """The Profile plugin's tools that show what a finding is about."""
    evidence = finding.get("evidence") or {}
    op = _first(_walk(evidence, OP_KEYS))
    module = _first(_walk(evidence, MODULE_KEYS)) or step_module
    named_host = _first(_walk(evidence, ("host",)))
    host = named_host if named_host in hosts else (hosts[0] if hosts else None)
    links = [Link("trace_viewer", profile_url(run, "trace_viewer", host), op)]
    if finding.get("rule") in _reads_buffers() or op:
        links.append(Link("memory_viewer", profile_url(run, "memory_viewer", host, module), op))
    if op and module:
        links.append(Link("graph_viewer", profile_url(run, "graph_viewer", host, module, op), None))
    if op and backend != "cpu":
        links.append(Link("op_profile", profile_url(run, "op_profile", host, op=op), op))
        links.append(Link("hlo_stats", profile_url(run, "hlo_stats", host, op=op), op))
    return links
