"""pipeline-bubble on the corpus pipelines (Parts 3.1, 3.2 and 5 in style, 8 simulated CPU
devices): it fires where padding is a large share of the schedule, with the microbatch count that
shrinks it and the gain from the counts, and stays silent where microbatches already fill it."""

import pytest

from advisor.engine import analyze_all
from advisor.job import Job
from advisor.rules import BY_ID
from advisor.views import parallelism
from corpus.traces import materialize


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cache = {}

    def get(case):
        if case not in cache:
            analyses, failed = analyze_all(materialize(case, tmp_path_factory.mktemp("bubble")),
                                           Job((BY_ID["pipeline-bubble"],)))
            assert not failed
            cache[case] = analyses[0]
        return cache[case]
    return get


def test_fires_on_two_microbatches_with_the_count_that_fixes_it(run):
    (f,) = run("pipeline_gpipe_m2").findings
    ev = f.evidence
    assert ev["bubble_fraction"] == pytest.approx(3 / 5, abs=1e-4)
    assert ev["target_microbatches"] == 16 and ev["bubble_fraction_after"] == pytest.approx(3 / 19, abs=1e-4)
    assert f.recommendation.remedy.value == 16 and "16 microbatches" in f.recommendation.text
    assert "smaller" in f.recommendation.cost and "transfers" in f.recommendation.cost
    # the gain: the measured schedule time scaled by (1 + 3/16) / (1 + 3/2)
    pipe = parallelism.of(run("pipeline_gpipe_m2").profile).pipeline
    gain_ms = pipe.time_s * 1e3 * (1 - (1 + 3 / 16) / (1 + 3 / 2))
    assert f.recommendation.expected.saving == pytest.approx(gain_ms, rel=0.01)


def test_fires_on_the_looping_pipeline(run):
    (f,) = run("pipeline_looping").findings
    assert f.evidence["loops"] == 2 and f.evidence["microbatches"] == 4
    assert f.evidence["target_microbatches"] == 8
    assert f.evidence["bubble_fraction_after"] == pytest.approx(3 / 19, abs=1e-4)


@pytest.mark.parametrize("case", ["pipeline_gpipe_m16", "parallel_3d", "tensor_parallel_sync"])
def test_silent_where_the_bubble_is_small_or_there_is_no_pipeline(run, case):
    assert not run(case).findings


def test_threshold_option(run):
    from advisor.job import Job

    rule = BY_ID["pipeline-bubble"]
    (f,) = Job((rule,), {rule.id: {"max_bubble": 0.1}}).analyze(run("pipeline_gpipe_m16").profile).findings
    assert f.evidence["target_microbatches"] == 32
