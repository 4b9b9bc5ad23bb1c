"""Derived views of a loaded run, between `load/` and the rules and renderers.

Every derived number is a view: `views.<name>.of(profile)`, computed once per run from the `Profile`
and the settings the job bound to it (`bound.py`), never from files. `ops` (each op's work and
bound), `peak` (the peaks utilizations divide by), `idle`, `efficiency` (with `basis`), `memory`,
`step_time`, `op_table` (each op per step under a key that matches it across programs),
`parallelism` and `summary` (what `runs[].summary` holds). docs/architecture.md says where a new
one goes.
"""
