"""A rule's message as data (advisor/message.py): templates with unit specs turn a check's figures into
the finding; a remedy's wording is the bundled workload's or the user's Flax/JAX terms; an info
finding's fix says what freed memory would buy."""

import copy

import pytest

from advisor.message import Message, fill
from advisor.remedies import Kind, Remedy, user_terms
from advisor.rule import Rule

MIB = 2 ** 20


def test_unit_specs_format_as_every_report_does():
    text = fill("{a:pct} {b:ms} {c:mib} {d:size} {e:flop} {f:si FLOP/s} {g:,.0f} {h}",
                dict(a=0.1234, b=2.5e6, c=3 * MIB, d=512, e=2.02e9, f=3.08e12, g=12345.6, h="x{y}"))
    assert text == "12.3% 2.50 ms 3.0 MiB 512 B 2.02 GFLOP 3.08 TFLOP/s 12,346 x{y}"


MESSAGE = Message(title="{count} things take {share:pct}", bundled="remat the blocks (remat=MLP+Attn)",
                  gain="about {saving:mib} less", cost="recompute", metric="peak_memory", buys=True)


def _check(profile):
    yield RULE.finding(profile, remedy=Remedy(Kind.REMAT, "blocks"), severity="info", impact=0.25,
                       evidence={"count": 3}, count=3, share=0.25, saving=64 * MIB)


RULE = Rule(id="example", severity="warning", backends=("cpu", "gpu", "tpu"), summary="an example",
            check=_check, message=MESSAGE, doc="example: a test")


@pytest.fixture
def profile(loaded_profile):
    (analysis,) = loaded_profile("transformer_scan")
    return copy.copy(analysis.profile)


def test_the_finding_from_the_figures_on_the_users_code(profile):
    profile.run_metadata = {}
    (f,) = RULE.run(profile)
    assert (f.rule, f.severity, f.title, f.impact, f.evidence) == ("example", "info", "3 things take 25.0%", 0.25,
                                                                   {"count": 3})
    r = f.recommendation
    assert r.text.startswith(user_terms(Remedy(Kind.REMAT, "blocks")) + "; no memory pressure")   # buys, on info
    assert (r.config, r.cost, r.remedy) == ({}, "recompute", Remedy(Kind.REMAT, "blocks"))
    assert r.expected.to_json() == {"metric": "peak_memory", "saving": 64 * MIB, "unit": "bytes",
                                    "text": "about 64.0 MiB less"}


def test_a_bundled_workload_reads_its_own_wording_and_config_change(profile):
    assert profile.run_metadata.get("workload") == "transformer"
    (f,) = RULE.run(profile)
    assert f.recommendation.text.startswith("remat the blocks (remat=MLP+Attn)")
    assert f.recommendation.config == {"model.remat": ["MLP", "Attn"]}


def test_a_variant_and_a_step_time_gain_in_ms(profile):
    timed = MESSAGE.but(bundled=None, fix="do less", metric="step_time", buys=False, gain="up to {saving:ms}")
    f = RULE.finding(profile, message=timed, impact=0.1, evidence={}, count=1, share=0.1, saving=1_234_567.0)
    assert (f.severity, f.recommendation.text, f.recommendation.config) == ("warning", "do less", {})
    assert f.recommendation.expected.to_json() == {"metric": "step_time", "saving": 1.235, "unit": "ms",
                                                   "text": "up to 1.23 ms"}
