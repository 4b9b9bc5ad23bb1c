"""benchmarks/gpu_check.py on CPU, in process: its tiny preset on a subset (three programs and one
Transformer row), the figures against the paper counts, the files it writes, and its bad input.
The whole tiny preset (all eight programs, seven rows and --verify) is the script itself."""

import json
import os
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402
import gpu_check_programs as progs  # noqa: E402

SUBSET = ["gemm", "elementwise", "attention_xla", "attention_cudnn", "f32_scan"]
RAN = [k for k in SUBSET if k != "attention_cudnn"]      # cuDNN's attention needs a GPU


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_check") / "out"
    env = {k: os.environ.get(k) for k in ("XDG_CACHE_HOME", "ADVISOR_CACHE_DIR", "ADVISOR_COMPILE_CACHE")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(gpu_check.PRESETS["tiny"], "row_time_steps", 2)      # the suite's -O0 step is slow
        code = gpu_check.main(["--out", str(out), "--preset", "tiny", "--only", ",".join(SUBSET)])
    assert {k: os.environ.get(k) for k in env} == env       # the caches went under --out, and back
    return code, out, json.loads((out / "gpu_check.json").read_text()), (out / "gpu_check.md").read_text()


def test_it_writes_everything_under_out_and_no_cache(checked):
    code, out, results, _ = checked
    assert code == 0 and results["complete"]
    assert results["skipped"] == [{"key": "attention_cudnn",
                                   "reason": "needs a CUDA GPU (cuDNN attention); JAX's backend here is cpu"}]
    assert sorted(p.name for p in out.iterdir()) == ["advisor", "attention_xla", "elementwise", "gemm",
                                                     "gpu_check.json", "gpu_check.md", "rows"]
    assert sorted(p.name for p in (out / "advisor").iterdir()) == sorted(f"{k}.json" for k in RAN)
    for logdir in (out / "gemm", out / "rows" / "f32_scan"):
        assert list(logdir.glob("plugins/profile/*/*.xplane.pb"))


def test_advisor_counts_the_paper_flops_on_cpu(checked):
    _, _, results, _ = checked
    gemm, elementwise, attention = (results["programs"][k] for k in ("gemm", "elementwise", "attention_xla"))
    assert gemm["paper"]["flops"] == 2 * 2 * 256 ** 3
    assert gemm["advisor"]["matmul_flops_per_step"] == gemm["paper"]["flops"]
    assert elementwise["advisor"]["matmul_flops_per_step"] == 0
    assert elementwise["advisor"]["bytes_per_step"] == pytest.approx(elementwise["paper"]["bytes"], rel=0.01)
    # XLA's attention: every score computed and masked, the forward's P kept for the backward
    assert attention["advisor"]["matmul_flops_per_step"] == pytest.approx(attention["paper"]["flops"] * 12 / 7)
    row = results["rows"]["f32_scan"]
    assert row["advisor"]["model_flops_per_step"] == pytest.approx(row["paper"]["model_flops"], rel=0.005)
    for entry in [gemm, elementwise, attention, row]:
        assert entry["untraced_ms"] > 0 and entry["advisor"]["step_time_ms"] > 0


def test_the_table_has_a_row_per_run_and_says_what_was_not_measured(checked):
    _, _, results, table = checked
    lines = table.splitlines()
    for key in RAN:
        assert sum(line.startswith(f"| {key} |") for line in lines) == 1, key
    assert "- attention_cudnn: needs a CUDA GPU (cuDNN attention); JAX's backend here is cpu" in lines
    gemm = next(line for line in lines if line.startswith("| gemm |"))
    assert "6.711e07 | 6.711e07 (x1.000)" in gemm
    assert "| GEMM size: unaligned -> aligned | gemm_unaligned -> gemm | not measured (gemm_unaligned did not run)" \
        in table
    assert "`--verify`" not in table                    # verify was not asked for
    row = results["rows"]["f32_scan"]
    assert row["command"] == ("advisor run-workload transformer --preset tiny --set model.dtype=float32 "
                              "--set model.scan_layers=true --set model.remat= --set optimizer.num_minibatches=4")


def test_the_transformer_paper_count_follows_remat():
    from advisor import workloads

    def paper(*overrides):
        return progs.transformer_paper(workloads.resolve("transformer", "seed", list(overrides)))
    model, hardware = paper("model.remat=")
    assert model == hardware == pytest.approx(3.257e13, rel=1e-3)      # ../shared/h100-traces/README.md
    # remat recomputes every matmul of a block but its last: 14·d² + 4·T·d per token and layer
    tokens, layers, d, t = 64 * 512, 12, 1024, 512
    assert paper("model.remat=MLP,Attn") == (model, pytest.approx(model + tokens * layers * (14 * d * d + 4 * t * d)))
    assert paper("model.remat=Block")[1] > paper("model.remat=MLP,Attn")[1]


def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    assert gpu_check.main(["--out", str(taken), "--preset", "tiny"]) == 2
    assert [p.name for p in taken.iterdir()] == ["keep.txt"]
    assert gpu_check.main(["--out", str(tmp_path / "new"), "--preset", "tiny", "--only", "gemm,nope"]) == 2
    assert gpu_check.main(["--out", str(tmp_path / "new"), "--preset", "full"]) == 2      # no GPU here
    assert not (tmp_path / "new").exists()
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("gpu_check: ") for line in err)
    assert "exists and is not an empty folder" in err[0] and "unknown keys nope" in err[1]
    assert "--preset full needs a CUDA GPU" in err[2]
