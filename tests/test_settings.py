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
