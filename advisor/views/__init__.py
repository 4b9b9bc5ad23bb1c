"""Derived views of a loaded run, between `load/` and the rules and renderers.

One module per view, each computed once per run from the `Profile` (never from files):
`summary` (step time, memory, devices, collectives), `idle` (the device's idle time in the steps:
host-bound, the efficiency verdict and `compare` read it), `efficiency`, `parallelism`.
"""
