"""advisor's command line.

Exit codes: 0 the command ran (whatever it found); 2 bad input (a path, a trace, a config,
a rule id): one line on stderr says what is wrong and what to do; 3 `analyze` read some runs
but not others (see advisor/errors.py).
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import click
from rich.console import Console

from .bad_input import Group, user_errors
from .engine import ENGINES
from .errors import EXIT_SOME_RUNS_FAILED, AdvisorError
from .outputs import refuse_overwrite, write_text
from .report import formats
from .report.escape import terminal
from .version import __version__

_err = Console(stderr=True, highlight=False, soft_wrap=True)
SET_HELP = ("Override a config key, e.g. --set model.scan_layers=false, --set model.remat=MLP+Attn (a set: its "
            "items joined by '+', none for the empty set) (repeatable).")


def cache_option(fn):
    """--no-cache for the commands that compile a workload; the choice reaches their child processes."""
    @functools.wraps(fn)
    def wrapper(*args, no_cache=False, **kwargs):
        from .compile_cache import choose
        choose(not no_cache)
        return fn(*args, **kwargs)
    return click.option("--no-cache", is_flag=True,
                        help="Compile from scratch: neither read nor write the compilation cache "
                             "($XDG_CACHE_HOME/advisor/jax, by default ~/.cache/advisor/jax; at most 2 GiB, "
                             "the least recently used programs evicted).")(wrapper)


def _trace_path(ctx, param, value):
    """A trace path or URL: a URL as given (a Path would fold gs://b into gs:/b), a path normalised."""
    from .locate import is_url

    if value is None or is_url(value):
        return value
    return str(Path(value))


def rule_options(fn):
    """--select/--ignore/--option/--device-memory, shared by the commands that run rules."""
    fn = click.option("--device-memory", metavar="SIZE",
                      help="Device memory capacity (e.g. 24GB) where the trace does not record it (CPU traces).")(fn)
    fn = click.option("--option", multiple=True, metavar="RULE.KEY=VALUE",
                      help="Override a rule threshold, e.g. --option host-bound.min_idle_share=0.3 (repeatable).")(fn)
    fn = click.option("--ignore", multiple=True, metavar="RULE",
                      help="Skip these rules (repeatable, or joined by '+').")(fn)
    fn = click.option("--select", multiple=True, metavar="RULE",
                      help="Run only these rules (repeatable, or joined by '+'; none: no rule).")(fn)
    return fn


def peak_options(fn):
    """--peak-flops/--peak-bandwidth: the device peaks efficiency is measured against."""
    fn = click.option("--peak-bandwidth", metavar="RATE",
                      help="Peak memory bandwidth, e.g. 3.35TB/s or 819GB/s: replaces the device table's figure "
                           "(needed on CPU and unknown devices; see advisor calibrate).")(fn)
    fn = click.option("--peak-flops", metavar="RATE",
                      help="Peak matmul FLOP/s for the step's matmul dtype, e.g. 989T or 989e12: replaces the "
                           "device table's figure (needed on CPU and unknown devices; see advisor calibrate).")(fn)
    return fn


def rule_job(select, ignore, option, device_memory, **given):
    """The Job of a command's options (advisor/user_input.py): the rules and thresholds of the project's
    config, overridden by the command line."""
    from .user_input import job, read_project_settings

    return job(select or None, ignore, option_flags=option, device_memory=device_memory,
               project=read_project_settings(Path.cwd()), **given)


def format_option(command: str, **help):
    """--format: the formats `command` offers (advisor/report/formats.py's one list)."""
    return click.option("--format", "fmt", type=click.Choice(formats.names(command)), default="text",
                        show_default=True, **help)


def _progress(enabled: bool):
    if not enabled:
        return lambda msg: None
    return lambda msg: _err.print(terminal("advisor:", "dim") + " " + terminal(msg))


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="advisor")
def main():
    """Diagnose JAX/Flax training steps from their profiler traces.

    \b
    Exit codes: 0 the command ran, whatever it found; 1 `advisor check` failed;
    2 bad input (one line on stderr says why); 3 `analyze` of many runs: some could
    not be read (the others are reported, the unreadable ones listed with why).
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@main.command()
@click.argument("path", callback=_trace_path)
@format_option("analyze", help="jsonl: one JSON document per run, each printed as soon as it and the runs "
                                "before it (by path) are done.")
@click.option("--output", type=click.Path(path_type=Path), help="Write the report to this file (needed for html).")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Runs analyzed at once, each in a process of its own (default: one per core; 1: one after "
                   "the other in this process). With --engine ray: the CPUs of the local Ray.")
@click.option("--engine", type=click.Choice(list(ENGINES)), default="process", show_default=True,
              help="process: worker processes on this machine; ray: one Ray task per host file "
                   "(needs Ray: pip install -e '.[ray]' in advisor's clone).")
@click.option("--ray-address", metavar="ADDRESS",
              help="With --engine ray: join this Ray cluster (e.g. auto, or ray://head:10001) instead of "
                   "starting a local Ray for the command; local: a local Ray even where the default engine "
                   "would be faster (fewer than 2 idle cores, or one host file), which --engine ray alone "
                   "runs instead, saying so.")
@click.option("--steps", "steps_text", metavar="A:B",
              help="Analyze only the steps numbered A to B-1 (A: or :B for open ends, N for one step): "
                   "every figure is over those steps, and the report says which.")
@click.option("--mesh", "mesh_text", metavar="NAME=SIZE,...",
              help="The device mesh's axes, major first as in Mesh(devices.reshape(sizes), names), e.g. "
                   "data=2,pipe=2,tensor=2: names the axes of the parallelism section (else they are inferred "
                   "from the HLO's device groups and named by what runs over them).")
@click.option("--compile-check", "compile_advice", is_flag=True,
              help="For a trace recorded by a bundled workload: compile the workload with each recommended config "
                   "change (on this machine, when its backend is the trace's) and print the compiled peak; a change "
                   "the compiler refutes is not printed as a fix.")
@rule_options
@peak_options
@user_errors
def analyze(path, fmt, output, jobs, engine, ray_address, steps_text, mesh_text, compile_advice, select, ignore,
            option, device_memory, peak_flops, peak_bandwidth):
    """Diagnose existing traces: a logdir, a run folder or one .xplane.pb, as a path or a URL
    (gs://bucket/logdir, s3://..., file://..., any fsspec URL).

    Reads only: nothing is written into PATH. A folder holding many runs gives one analysis per run,
    the runs analyzed in parallel (--jobs, --engine); a run that cannot be read is listed with why,
    and the exit code is 3 (the others are reported). A report of many runs ends with a fleet table.
    Rule selection and thresholds also come from [tool.advisor] in ./pyproject.toml or [advisor] in ./setup.cfg.
    """
    from .engine import default_jobs, iter_results

    formats.check_output(fmt, output)
    refuse_overwrite({"--output": output}, [path])
    if ray_address and engine != "ray":
        raise AdvisorError("--ray-address joins a Ray cluster: give --engine ray too")
    job = rule_job(select, ignore, option, device_memory, steps=steps_text, peak_flops=peak_flops,
                   peak_bandwidth=peak_bandwidth, mesh=mesh_text or None, compile_check=compile_advice, documents=True)
    results = iter_results(path, job, jobs=jobs or default_jobs(), engine=engine, ray_address=ray_address,
                           progress=_progress(sys.stderr.isatty()),
                           notice=lambda msg: _err.print(terminal(f"advisor: note: {msg}")))
    failed = _emit(results, fmt, output, path)
    if failed:
        for f in failed:
            _err.print(terminal(f"advisor: not analyzed: {f['reason']}"))
        sys.exit(EXIT_SOME_RUNS_FAILED)


@main.command("run-workload")
@click.argument("name")
@click.option("--preset", default="tiny", show_default=True, help="tiny (CPU-sized), small, or seed (the tutorial's).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--steps", type=int, default=None, help="Profiled steps (default: the preset's train.steps).")
@click.option("--logdir", type=click.Path(path_type=Path), default=Path("advisor_traces"), show_default=True,
              help="Where the trace is written (TensorBoard logdir layout).")
@format_option("run-workload")
@click.option("--output", type=click.Path(path_type=Path), help="Write the report to this file (needed for html).")
@click.option("--verify", is_flag=True,
              help="Apply each recommended config change (and each alternative) alone, re-run, time it against the "
                   "run as it is in interleaved paired rounds, and rank the findings by the measured gain.")
@click.option("--compile-check/--no-compile-check", "compile_advice", default=True, show_default=True,
              help="Compile the workload with each recommended config change before printing it (peak memory "
                   "from XLA's buffer assignment); a change the compiler refutes is not printed as a fix.")
@click.option("--memory-limit", metavar="SIZE",
              help="Plan for this much device memory (e.g. 24GB): the pre-flight check uses it as the capacity.")
@click.option("--hosts", type=click.IntRange(1), default=1, show_default=True,
              help="CPU: run as this many local jax.distributed processes (gloo), one host each, into one run "
                   "folder; parallel.data counts the devices of all hosts.")
@rule_options
@cache_option
@user_errors
def run_workload(name, preset, overrides, steps, logdir, fmt, output, verify, compile_advice, memory_limit, hosts,
                 select, ignore, option, device_memory):
    """Profile a bundled workload (transformer or mlp), then diagnose it.

    Before running, the step is compiled and its memory compared with the device's capacity
    (or --memory-limit): a step that cannot fit is not run; the report is an out-of-memory
    finding with the config changes that fit, each estimated by compiling it.
    """
    from advisor import workloads

    from .runner import add_metadata, profile_workload
    from .settings import parse_size_flag
    from .workload_memory import OutOfMemory

    formats.check_output(fmt, output)
    limit = parse_size_flag(memory_limit, "--memory-limit")
    job = rule_job(select, ignore, option, device_memory, memory_limit=limit)   # the capacity the run is planned for
    items = list(overrides) + ([f"train.steps={steps}"] if steps is not None else [])
    config = workloads.resolve(name, preset, items)
    from advisor.workloads import parallel
    progress = _progress(True)
    if hosts > 1:
        if verify:
            raise AdvisorError("--verify re-runs one process at a time: leave out --hosts to verify")
        from .host_launcher import profile_hosts
        run_dir = profile_hosts(name, preset, config, hosts, logdir, progress)
    else:
        parallel.ensure_cpu_devices(parallel.devices_needed(config))    # before JAX starts its CPU backend
    try:
        if hosts == 1:
            run_dir = profile_workload(name, preset, config, logdir, progress, limit)
    except OutOfMemory as err:       # the report is the finding that says which changes fit (--output aside)
        from .memory_plan import out_of_memory_document
        _emit([out_of_memory_document(name, preset, items, err, progress)], "json" if fmt == "html" else fmt, None,
              f"{name} ({preset})", "run-workload")
        return
    progress(f"trace written to {run_dir}")
    from .engine import analyze_path

    progress("analyzing")
    analyses = analyze_path(run_dir, job)
    from .compiled_advice import compile_check
    from .verification import verify_workload
    if compile_advice and hosts == 1:
        checked = compile_check(name, preset, items, analyses[0], progress)
        add_metadata(run_dir, compile_checked=checked)     # analyze, serve and the tab show it too
    if verify:
        verify_workload(name, preset, items, analyses[0], logdir, progress, limit)
    _emit([a.document() for a in analyses], fmt, output, str(run_dir), "run-workload")


@main.command("compare")
@click.argument("base", callback=_trace_path)
@click.argument("new", callback=_trace_path)
@format_option("compare")
@click.option("--output", type=click.Path(path_type=Path), help="Write the report to this file (needed for html).")
@peak_options
@user_errors
def compare_cmd(base, new, fmt, output, peak_flops, peak_bandwidth):
    """Compare two runs (or two folders of runs, matched by name): step time with its measured
    spread, peak memory, MFU (against the same peak on both sides), op time by category, findings
    added and removed."""
    from .compare import compare, match_runs, metrics
    from .engine import analyze_path
    from .user_input import job as user_job

    formats.check_output(fmt, output)
    refuse_overwrite({"--output": output}, [base, new])
    job = user_job(peak_flops=peak_flops, peak_bandwidth=peak_bandwidth, documents=True)
    pairs = match_runs(analyze_path(base, job), analyze_path(new, job), base, new)
    if not pairs:
        raise AdvisorError(f"no runs with the same name under {base} and {new}; compare two runs, "
                           "or two folders that hold runs in same-named subfolders")
    from .run_label import from_summary
    results = [(name, compare(metrics(b), metrics(n), *(from_summary(d["run"]["summary"].get("run")) for d in (b, n))))
               for name, b, n in pairs]
    formats.write(fmt, "compare", formats.Compared(results, base, new, pairs), output, _note)


@main.command("check")
@click.argument("path", required=False, callback=_trace_path)
@click.option("--workload", metavar="NAME", help="Run this bundled workload and check it (instead of PATH).")
@click.option("--entry", metavar="FILE.py:FUNCTION",
              help="Profile and check your own training step (instead of PATH): FUNCTION takes no arguments and "
                   "returns a callable that runs one step (docs/check.md); or module:function.")
@click.option("--base-dir", type=click.Path(path_type=Path), metavar="DIR",
              help="With --entry: a checkout of the base branch; the same entry relative to it is profiled and "
                   "timed against this one, interleaved.")
@click.option("--preset", default="tiny", show_default=True)
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help=SET_HELP)
@click.option("--steps", type=int, default=None)
@click.option("--logdir", type=click.Path(path_type=Path), default=None,
              help="Where --workload or --entry writes its trace (default: a temporary folder, removed after).")
@click.option("--baseline", type=click.Path(path_type=Path), help="Compare with this baseline file.")
@click.option("--write-baseline", type=click.Path(path_type=Path), help="Create or update this baseline file.")
@click.option("--fail-on", type=click.Choice(["info", "warning", "error"]), default="error", show_default=True,
              help="Fail on findings of at least this severity.")
@click.option("--max-step-time-regression", default="10%", show_default=True,
              help="Fail when the step time grows by more than this (interleaved: the median paired ratio; "
                   "recorded baseline: beyond the measured noise).")
@click.option("--max-memory-regression", default="5%", show_default=True,
              help="Fail when peak memory grows by more than this.")
@click.option("--min-mfu", metavar="PCT",
              help="Fail when the step's MFU (model FLOPs / (step time x devices x peak)) is below this, e.g. 35%; "
                   "the peak is the device table's, or --peak-flops/--peak-bandwidth, or advisor calibrate's.")
@click.option("--base-python", metavar="PATH",
              help="Time the base side with this interpreter (another checkout's venv with advisor installed), "
                   "interleaved with this one (needs --workload or --entry).")
@click.option("--rounds", type=click.IntRange(3, 100), default=8, show_default=True,
              help="Interleaved timing rounds (base, candidate); doubled once when undecided.")
@click.option("--round-steps", type=click.IntRange(1, 100), default=2, show_default=True,
              help="Steps each side runs per round.")
@click.option("--strict-time", is_flag=True,
              help="Fail when step time cannot be judged (measurements not comparable) instead of warning.")
@click.option("--allow-partial", is_flag=True,
              help="Judge a partial analysis (part of the trace unreadable) instead of exiting 2.")
@click.option("--junit", type=click.Path(path_type=Path), help="Write JUnit XML: one test case per rule and budget.")
@click.option("--sarif", type=click.Path(path_type=Path), help="Write SARIF 2.1.0 with the findings.")
@click.option("--html", "html_out", type=click.Path(path_type=Path), help="Write the HTML report of the checked run.")
@format_option("check")
@rule_options
@peak_options
@cache_option
@user_errors
def check_cmd(path, workload, entry, base_dir, preset, overrides, steps, logdir, baseline, write_baseline, fail_on,
              max_step_time_regression, max_memory_regression, min_mfu, base_python, rounds, round_steps,
              strict_time, allow_partial, junit, sarif, html_out, fmt, select, ignore, option, device_memory,
              peak_flops, peak_bandwidth):
    """Pre-merge check: fail when the training step got slower, heavier, or gained a known anti-pattern.

    \b
    Checks PATH (one run), or runs --workload, or your own step (--entry FILE.py:FUNCTION)
    itself. With --workload and a baseline that records its workload (or --base-python), or
    --entry with --base-dir (the base branch's checkout), step time is measured for both sides in
    this job, interleaved, and judged on the paired ratios: load that slows both sides cancels.
    Against a baseline recorded at another moment, a slower step time that the machine's
    noise could explain is a warning ("not judged"), a failure with --strict-time.
    Exit codes:
      0  the check passed (or --write-baseline wrote the baseline)
      1  the check failed: a finding at or above --fail-on, a finding new since the baseline,
         or a step-time / peak-memory regression beyond its budget
      2  the check could not run: bad input, a missing baseline, a backend or device mismatch,
         a partial analysis (without --allow-partial)
    Under GitHub Actions it also writes ::error/::warning annotations and appends a
    Markdown summary to $GITHUB_STEP_SUMMARY.
    """
    from . import check
    from .report import ci

    if sum(map(bool, (path, workload, entry))) != 1:
        raise AdvisorError("give one of a trace PATH, --workload NAME or --entry FILE.py:FUNCTION to check")
    if base_python and not (workload or entry):
        raise AdvisorError("--base-python times the base side by running it: give --workload NAME or --entry too")
    if base_dir is not None and not entry:
        raise AdvisorError("--base-dir holds the base side of --entry FILE.py:FUNCTION: give --entry too")
    if base_dir is not None and baseline:
        raise AdvisorError("--base-dir profiles the base side, which is then the baseline: drop --baseline")
    if not baseline and not write_baseline and not base_python and base_dir is None and min_mfu is None:
        raise AdvisorError("give --baseline FILE to compare with, or --write-baseline FILE to create one "
                           "(or --min-mfu to judge efficiency alone)")
    refuse_overwrite({"--junit": junit, "--sarif": sarif, "--html": html_out, "--write-baseline": write_baseline},
                     [path])
    # --write-baseline onto --baseline updates it (read first, replaced whole): the other outputs never
    refuse_overwrite({"--junit": junit, "--sarif": sarif, "--html": html_out}, [baseline])
    job = rule_job(select, ignore, option, device_memory, peak_flops=peak_flops, peak_bandwidth=peak_bandwidth)
    request = check.Request(
        job, path, workload, preset,
        tuple(overrides), steps, logdir, baseline, write_baseline, fail_on,
        check.parse_percent(max_step_time_regression, "--max-step-time-regression"),
        check.parse_percent(max_memory_regression, "--max-memory-regression"),
        check.parse_percent(min_mfu, "--min-mfu") if min_mfu is not None else None,
        base_python, rounds, round_steps, strict_time, allow_partial, entry, base_dir)
    result = check.run(request, _progress(True), lambda line: _err.print(terminal(line)))
    if result is None:      # the baseline written: nothing to judge
        sys.exit(0)
    if junit:
        ci.junit(result, junit)
    if sarif:
        ci.sarif(result, list(job.rules), sarif)
    if html_out:
        from .report.html import render_report
        label = (f"{workload} ({preset}) {' '.join(request.items)}".strip() if workload and logdir is None
                 else entry if entry and logdir is None else result.path)      # a temporary folder is not named
        write_text(html_out, render_report([result.document], label, "check", check=result))
    ci.github(result)
    inputs = [result.path] + ([str(baseline)] if baseline else []) + ([base_python] if base_python else []) \
        + ([str(base_dir)] if base_dir is not None else [])
    formats.write(fmt, "check", formats.Checked(result, inputs))
    sys.exit(0 if result.passed else 1)


@main.command("sweep")
@click.argument("name")
@click.option("--preset", default="tiny", show_default=True)
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Applied to every row; a value as for run-workload's --set.")
@click.option("--vary", multiple=True, metavar="KEY=V1,V2,...", required=True,
              help="Values to try for one key, separated by commas (repeatable: the rows are every combination). "
                   "Each value is written as for --set, a set's items joined by '+' and none for the empty set: "
                   "--vary model.remat=none,MLP+Attn,Block is three rows.")
@click.option("--steps", type=int, default=None)
@click.option("--logdir", type=click.Path(path_type=Path), default=Path("advisor_traces"), show_default=True)
@click.option("--memory-limit", metavar="SIZE", help="Plan for this much device memory (see run-workload).")
@format_option("sweep")
@cache_option
@user_errors
def sweep(name, preset, overrides, vary, steps, logdir, memory_limit, fmt):
    """Run a grid of configurations and compare them in one table (ratios to the first row)."""
    from .settings import parse_size_flag
    from .sweep import grid, run_grid

    limit = parse_size_flag(memory_limit, "--memory-limit")
    base = list(overrides) + ([f"train.steps={steps}"] if steps is not None else [])
    rows = run_grid(name, preset, base, grid(name, preset, base, vary), logdir, _progress(True), limit)
    formats.write(fmt, "sweep", formats.Swept(rows, name, preset))


@main.command("tune")
@click.argument("name")
@click.option("--preset", default="tiny", show_default=True)
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Applied to every row (as run-workload's --set).")
@click.option("--vary", multiple=True, metavar="KEY=V1,V2,...", help="Search these axes (as sweep's --vary) instead of "
              "those the findings name (the workload is then not profiled first).")
@click.option("--budget", type=click.FloatRange(min=0), default=180.0, show_default=True,
              help="Seconds for timing the rows that fit; the rows left are reported as not timed.")
@click.option("--device-memory", metavar="SIZE", help="The capacity the rows are compiled against (default: the "
              "device's limit; on CPU the host's available memory).")
@click.option("--logdir", type=click.Path(path_type=Path), default=Path("advisor_traces"), show_default=True)
@format_option("tune")
@cache_option
@user_errors
def tune_cmd(name, preset, overrides, vary, budget, device_memory, logdir, fmt):
    """Search the settings the findings name together, drop the combinations that do not fit (compiled,
    not run), time the others against the workload as given, and print the best that fits."""
    from .settings import parse_size_flag
    from .tune import tune

    doc = tune(name, preset, list(overrides), list(vary), logdir, budget,
               parse_size_flag(device_memory, "--device-memory"), _progress(True))
    formats.write(fmt, "tune", doc)


@main.command()
@click.option("--size", type=click.IntRange(min=64, max=16384), default=2048, show_default=True,
              help="The matmul benchmark's square size.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16"]), default="float32", show_default=True,
              help="The matmul benchmark's dtype (XLA:CPU runs bfloat16 slower than float32).")
@click.option("--stream-mib", type=click.IntRange(min=16, max=4096), default=256, show_default=True,
              help="The DRAM stream benchmark's array size in MiB (at least 4 times the largest cache).")
@user_errors
def calibrate(size, dtype, stream_mib):
    """Measure this host's peak matmul FLOP/s and its memory bandwidth roofs, one per cache level and one
    for DRAM, on JAX's default device (a matmul and stream benchmarks, best of 5), and store them with
    what identifies this machine (name, CPU model, cores, memory) in the user cache folder
    ($ADVISOR_CACHE_DIR, else ~/.cache/advisor): `analyze` then measures efficiency against them on
    traces whose run records this machine (runs of run-workload and advisor.trace), labelled "measured on
    <host> by advisor calibrate"; an op is judged against the roof of the fastest level its data fits in."""
    from . import calibrate as cal
    from .report import calibrate_text

    entry = cal.measure(size, dtype, stream_mib)
    calibrate_text.render(entry, cal.save(entry), dtype, size, click.echo)


@main.command("rules")
@format_option("rules")
def list_rules(fmt):
    """List every rule: id, default severity, backends, what it detects."""
    from . import rules as catalog

    formats.write(fmt, "rules", catalog.ALL)


@main.command()
@click.argument("rule_id")
@format_option("explain")
@user_errors
def explain(rule_id, fmt):
    """What a rule detects, why it matters, how to fix it (from the rule's own docs): rendered on a
    terminal, the Markdown source when piped."""
    from . import rules as catalog

    formats.write(fmt, "explain", catalog.select([rule_id])[0])


@main.command()
@click.argument("logdir", type=click.Path(path_type=Path))
@click.option("--port", type=click.IntRange(0, 65535), default=6007, show_default=True,
              help="Port on 127.0.0.1 (0: any free port).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Runs analyzed at once, each in a worker process.")
@click.option("--time-budget", type=click.FloatRange(0, min_open=True), metavar="SECONDS",
              help="Wall time an analysis may take before it is stopped and the next run's starts "
                   "(default: $ADVISOR_ANALYSIS_TIMEOUT_S, else 600).")
@click.option("--memory-budget", type=click.FloatRange(0, min_open=True), metavar="MIB",
              help="Private memory an analysis (its worker and the worker's children) may use before it is "
                   "stopped (default: $ADVISOR_ANALYSIS_MEMORY_MB, else 2048).")
@user_errors
def serve(logdir, port, workers, time_budget, memory_budget):
    """Serve the Advisor pages of TensorBoard's Advisor tab for LOGDIR on localhost, without
    TensorBoard: the runs newest first, each analyzed when opened (cached in ~/.cache/advisor)."""
    from .tensorboard.jobs import Budget
    from .tensorboard.server import serve as serve_logdir

    if not logdir.is_dir():
        raise AdvisorError(f"{logdir}: no such folder; give a TensorBoard logdir (a folder of profile runs)")
    budget = Budget.from_env(time_budget, memory_budget)
    serve_logdir(logdir, port, workers, budget, lambda line: _err.print(line, markup=False))


def _note(line: str) -> None:
    _err.print(terminal(line))


def _emit(results, fmt: str, output, read_from: str, command: str = "analyze") -> list[dict]:
    """The runs' report in the format asked (advisor/report/formats.py); the runs that failed, {"path", "reason"}."""
    return formats.write(fmt, command, formats.Runs(results, read_from, command), output, _note)


def entry() -> None:
    """The `advisor` program: signals end it cleanly (exit 128+N, temporary folders removed), and the
    folders of advisor runs killed outright (SIGKILL) before they could clean up are swept first.
    Not in `main`, which tests and other programs call in their own process."""
    import signal

    from . import cleanup
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN and sys.stderr.isatty():
        # Inherited (a shell without job control starts `advisor ... &` so): kept, as POSIX tools do.
        _err.print(f"advisor: note: this process ignores SIGINT, as it was started (in the background by a "
                   f"shell without job control?): Ctrl-C will not stop it; `kill {os.getpid()}` will",
                   markup=False)
    cleanup.install_signal_handlers(sigint=True)
    cleanup.sweep()
    main(prog_name="advisor")


if __name__ == "__main__":
    entry()
