"""Rule selection and thresholds from the project's config file and the command line
(the CLI run in-process, in a folder holding the config file)."""

import json

from conftest import FIXTURES, cli

SCAN = FIXTURES / "transformer_scan"


def rules_fired(proc):
    assert proc.returncode == 0, proc.stderr
    return {f["rule"] for f in json.loads(proc.stdout)["runs"][0]["findings"]}


def test_pyproject_section(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.advisor]\nignore = ["float32-activations"]\n'
        '[tool.advisor.options.scan-dynamic-update-slice]\nmin_total_share = 0.9\nmin_share = 0.9\n')
    fired = rules_fired(cli("analyze", SCAN, "--format", "json", cwd=tmp_path))
    assert fired == {"missing-remat"}     # float32 ignored, scan threshold raised above its share


def test_setup_cfg_section(tmp_path):
    (tmp_path / "setup.cfg").write_text("[advisor]\nselect = missing-remat\nmissing-remat.min_share = 0.95\n")
    assert rules_fired(cli("analyze", SCAN, "--format", "json", cwd=tmp_path)) == set()


def test_command_line_overrides_the_file(tmp_path):
    (tmp_path / "setup.cfg").write_text("[advisor]\nmissing-remat.min_share = 0.95\n")
    fired = rules_fired(cli("analyze", SCAN, "--format", "json", "--option", "missing-remat.min_share=0.5",
                                cwd=tmp_path))
    assert "missing-remat" in fired


def test_unknown_keys_are_refused(tmp_path):
    (tmp_path / "setup.cfg").write_text("[advisor]\nmissing-remat.threshold = 0.5\n")
    proc = cli("analyze", SCAN, cwd=tmp_path)
    assert proc.returncode == 2 and "unknown option missing-remat.threshold" in proc.stderr
    assert "min_share" in proc.stderr
    (tmp_path / "setup.cfg").write_text("[advisor]\nno-such-rule.min_share = 0.5\n")
    proc = cli("analyze", SCAN, cwd=tmp_path)
    assert proc.returncode == 2 and "unknown rule 'no-such-rule'" in proc.stderr
    proc = cli("analyze", SCAN, "--option", "missing-remat.min_share=lots")
    assert proc.returncode == 2 and "not a number" in proc.stderr


def test_device_memory_is_a_setting_never_a_fact():
    """--device-memory is the capacity the analysis uses (the summary, the rules); the trace's own
    stays the profile's, and a run analyzed again without the setting has none."""
    from advisor.job import Job
    from advisor.load.loader import load_run
    from advisor.locate import find_runs
    from advisor.settings import Settings, device_capacity

    (run,) = find_runs(FIXTURES / "transformer_accumulate")
    profile = load_run(run)
    assert profile.device_capacity_bytes is None          # a CPU trace records none
    given = Job(settings=Settings(device_memory=10**9)).analyze(profile)
    assert profile.device_capacity_bytes is None and device_capacity(profile) == 10**9
    assert given.summary["device_capacity_bytes"] == 10**9
    assert "unneeded-grad-accumulation" in {f.rule for f in given.findings}
    without = Job().analyze(profile)
    assert without.summary["device_capacity_bytes"] is None
    assert "unneeded-grad-accumulation" not in {f.rule for f in without.findings}


def test_user_input_becomes_one_job_whoever_asks():
    """The command line's words and the API's give the same Job; an error names the setting as the user
    wrote it."""
    import pytest

    from advisor.errors import AdvisorError
    from advisor.user_input import API, RuleConfig, job

    cli_job = job(("missing-remat+host-bound",), ("host-bound",), option_flags=["missing-remat.min_share=0.5"],
                  device_memory="1GB", steps="1:3", peak_flops="100T", mesh="data=2", project=RuleConfig())
    api_job = job("missing-remat+host-bound", ["host-bound"], {"missing-remat": {"min_share": "0.5"}},
                  device_memory=10**9, steps=slice(1, 3), peak_flops=100e12, mesh={"data": 2}, names=API)
    assert cli_job.rules == api_job.rules and [r.id for r in cli_job.rules] == ["missing-remat"]
    assert cli_job.options == api_job.options == {"missing-remat": {"min_share": 0.5}}
    assert (cli_job.settings.device_memory, cli_job.settings.steps, cli_job.settings.mesh) == \
        (api_job.settings.device_memory, api_job.settings.steps, api_job.settings.mesh) == \
        (10**9, slice(1, 3), (("data", 2),))
    assert cli_job.settings.peaks.flops_per_s == api_job.settings.peaks.flops_per_s == 100e12
    with pytest.raises(AdvisorError, match="^--device-memory expects"):
        job(device_memory="lots")
    with pytest.raises(AdvisorError, match="^device_memory expects"):
        job(device_memory="lots", names=API)
    project = RuleConfig(select=["host-bound"], options={"host-bound": {"min_idle_share": "0.3"}})
    from_project = job(project=project)
    assert [r.id for r in from_project.rules] == ["host-bound"]
    assert from_project.options == {"host-bound": {"min_idle_share": 0.3}}


def test_every_command_offers_the_formats_of_the_one_list():
    from advisor.cli import main
    from advisor.report import formats

    offered = {name: list(next(p.type.choices for p in command.params if p.name == "fmt"))
               for name, command in main.commands.items() if any(p.name == "fmt" for p in command.params)}
    assert offered == {name: formats.names(name) for name in offered}
    assert {c for f in formats.FORMATS for c in f.commands} == set(offered)
