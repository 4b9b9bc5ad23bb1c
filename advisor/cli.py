"""advisor's command line.

Exit codes: 0 the command ran (whatever it found); 2 bad input (a path, a trace, a config,
a rule id): one line on stderr says what is wrong and what to do.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import click
from rich.console import Console

from . import __version__
from .errors import EXIT_USAGE, AdvisorError

_err = Console(stderr=True, highlight=False, soft_wrap=True)


def _fail(message: str) -> None:
    click.echo(f"advisor: error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def user_errors(fn):
    """Turn the errors a user can cause into one line on stderr and exit code 2."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from advisor.workloads.config import ConfigError
        try:
            return fn(*args, **kwargs)
        except (AdvisorError, ConfigError) as err:
            _fail(str(err))
    return wrapper


def rule_options(fn):
    """--select/--ignore/--option/--device-memory, shared by the commands that run rules."""
    fn = click.option("--device-memory", metavar="SIZE",
                      help="Device memory capacity (e.g. 24GB) where the trace does not record it (CPU traces).")(fn)
    fn = click.option("--option", multiple=True, metavar="RULE.KEY=VALUE",
                      help="Override a rule threshold, e.g. --option host-bound.min_idle_share=0.3 (repeatable).")(fn)
    fn = click.option("--ignore", multiple=True, metavar="RULE", help="Skip these rules (repeatable).")(fn)
    fn = click.option("--select", multiple=True, metavar="RULE", help="Run only these rules (repeatable).")(fn)
    return fn


def resolve_rule_settings(select, ignore, option, device_memory):
    """Rules and thresholds from the project config, overridden by the command line."""
    from .engine import all_rules, select_rules
    from .settings import parse_option_flags, parse_size, read_project_settings, validate_options

    project = read_project_settings(Path.cwd())
    rules = select_rules(list(select) or project.select, list(ignore) or project.ignore)
    by_id = {r.id: r for r in all_rules()}
    options = validate_options(project.options, by_id)
    for rule_id, opts in validate_options(parse_option_flags(option), by_id).items():
        options.setdefault(rule_id, {}).update(opts)
    capacity = None
    if device_memory:
        try:
            capacity = int(parse_size(device_memory))
        except ValueError:
            raise AdvisorError(f"--device-memory expects a size like 24GB or 16GiB, got {device_memory!r}") from None
    return rules, options, capacity


def _progress(enabled: bool):
    if not enabled:
        return lambda msg: None
    return lambda msg: _err.print(f"[dim]advisor:[/dim] {msg}")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="advisor")
def main():
    """Diagnose JAX/Flax training steps from their profiler traces.

    \b
    Exit codes: 0 the command ran, whatever it found; 2 bad input (one line on stderr says why).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@rule_options
@user_errors
def analyze(path, fmt, select, ignore, option, device_memory):
    """Diagnose existing traces: a logdir, a run folder or one .xplane.pb.

    Reads only: nothing is written into PATH. A folder holding many runs gives one analysis per run.
    Rule selection and thresholds also come from [tool.advisor] in ./pyproject.toml or [advisor] in ./setup.cfg.
    """
    from .engine import analyze_path

    rules, options, capacity = resolve_rule_settings(select, ignore, option, device_memory)
    analyses = analyze_path(path, rules, options, progress=_progress(sys.stderr.isatty()), device_memory=capacity)
    _print(analyses, fmt, str(path))


@main.command("run-workload")
@click.argument("name")
@click.option("--preset", default="tiny", show_default=True, help="tiny (CPU-sized), small, or seed (the tutorial's).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a config key, e.g. --set model.scan_layers=false (repeatable).")
@click.option("--steps", type=int, default=None, help="Profiled steps (default: the preset's train.steps).")
@click.option("--logdir", type=click.Path(path_type=Path), default=Path("advisor_traces"), show_default=True,
              help="Where the trace is written (TensorBoard logdir layout).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@rule_options
@user_errors
def run_workload(name, preset, overrides, steps, logdir, fmt, select, ignore, option, device_memory):
    """Profile a bundled workload (transformer or mlp), then diagnose it."""
    from advisor import workloads

    rules, options, capacity = resolve_rule_settings(select, ignore, option, device_memory)
    items = list(overrides) + ([f"train.steps={steps}"] if steps is not None else [])
    config = workloads.resolve(name, preset, items)
    progress = _progress(True)
    from .runner import profile_workload

    run_dir = profile_workload(name, preset, config, logdir, progress)
    progress(f"trace written to {run_dir}")
    from .engine import analyze_path

    progress("analyzing")
    _print(analyze_path(run_dir, rules, options, device_memory=capacity), fmt, str(run_dir))


@main.command("rules")
def list_rules():
    """List every rule: id, default severity, backends, what it detects."""
    from rich.table import Table

    from .engine import all_rules

    table = Table()
    for column in ("rule", "severity", "backends"):
        table.add_column(column, no_wrap=True)
    table.add_column("detects")
    for rule in all_rules():
        table.add_row(rule.id, rule.severity, ", ".join(rule.backends), rule.summary)
    Console(highlight=False, width=None if sys.stdout.isatty() else 160).print(table)


@main.command()
@click.argument("rule_id")
@user_errors
def explain(rule_id):
    """What a rule detects, why it matters, how to fix it (from the rule's own docs)."""
    from .engine import select_rules

    rule = select_rules([rule_id])[0]
    click.echo(rule.doc.strip())


def _print(analyses, fmt: str, read_from: str) -> None:
    if fmt == "json":
        from .report.json_report import render
        click.echo(render(analyses, read_from))
    else:
        from .report.text import render
        render(analyses, Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160))


if __name__ == "__main__":
    main()
