"""The rules on the corpus: small training programs written the way users write them.

Each program's trace (fixtures/corpus/, recorded by fixtures/record_corpus.py) is analyzed
once, in-process; every rule is held to the verdict tests/corpus/expectations.py gives it.
"""

import re

import pytest

from advisor.engine import analyze_all
from advisor.job import Job
from advisor.settings import Settings
from corpus.expectations import CASES, RULES, expectation, satisfied
from corpus.traces import FIXTURES, materialize

# (case, rule) -> why advisor still gets it wrong; these are strict xfails, to be removed
# as the rules are corrected.
KNOWN_WRONG: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """case -> rule -> its findings; each trace loaded on first use, once."""
    cache: dict[str, dict[str, list]] = {}

    def get(case):
        if case not in cache:
            logdir = materialize(case, tmp_path_factory.mktemp("corpus"))
            analyses, failed = analyze_all(logdir,
                                           Job(settings=Settings(device_memory=CASES[case].get("device_memory"))))
            assert not failed and len(analyses) == 1, failed
            by_rule = {rule: [] for rule in RULES}
            for f in analyses[0].findings:
                by_rule.setdefault(f.rule, []).append(f)
            cache[case] = by_rule
            get.efficiency[case] = analyses[0].summary.get("efficiency") or {}
        return cache[case]
    get.efficiency = {}       # case -> summary.efficiency
    return get


def test_every_case_has_a_recorded_trace():
    missing = [c for c in CASES if not any((FIXTURES / c).rglob("*.xplane.pb*"))]
    assert not missing, f"run fixtures/record_corpus.py {' '.join(missing)}"


def test_expectations_name_known_rules_and_verdicts():
    from advisor.rules import ALL
    assert set(RULES) == {r.id for r in ALL}
    for case in CASES.values():
        for rule, (verdict, reason) in case["expect"].items():
            assert rule in RULES and reason
            assert verdict in ("fire", "silent", "at most info", "at most warning")


def _params():
    for case in CASES:
        for rule in RULES:
            marks = []
            if (case, rule) in KNOWN_WRONG:
                marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_WRONG[(case, rule)]))
            yield pytest.param(case, rule, marks=marks, id=f"{case}-{rule}")


@pytest.mark.parametrize("case, rule", list(_params()))
def test_rule_on_corpus(reported, case, rule):
    verdict, reason = expectation(case, rule)
    got = [f.severity for f in reported(case)[rule]]
    assert satisfied(verdict, got), f"{rule} on {case}: expected {verdict} ({reason}), reported {got or 'nothing'}"


MENTIONS = [(case, rule, text) for case, c in CASES.items() for rule, text in c.get("mentions", {}).items()]


AVOIDS = [(case, rule, text) for case, c in CASES.items() for rule, text in c.get("avoids", {}).items()]


@pytest.mark.parametrize("case, rule, text", AVOIDS, ids=[f"{c}-{r}" for c, r, _ in AVOIDS])
def test_finding_gives_no_wrong_advice(reported, case, rule, text):
    """Advice that does not apply to the program (a scan for layers of different shapes, unrolling a
    recurrence over time) is not given."""
    for f in reported(case)[rule]:
        said = f"{f.title} {f.recommendation.text}"
        assert text not in said, said


@pytest.mark.parametrize("case, rule, text", MENTIONS, ids=[f"{c}-{r}" for c, r, _ in MENTIONS])
def test_finding_names_the_users_function(reported, case, rule, text):
    """The finding names the user's function and points at the program's own file."""
    findings = reported(case)[rule]
    assert findings, f"{rule} did not fire on {case}"
    f = findings[0]
    assert text in f.title or text in (f.source or ""), (f.title, f.source)
    assert f.source and f.source.split(":")[0].endswith(f"{case}.py"), f.source


@pytest.mark.parametrize("case", list(CASES))
def test_the_verdict_and_host_bound_read_one_idle_figure(reported, case):
    """A host-bound verdict comes with a host-bound finding, and both give the same idle share (the
    idle view): before, the verdict took idle from the union of op events and said host-bound on 11
    corpus programs where the rule, reading executions, was silent."""
    found = reported(case)["host-bound"]
    eff = reported.efficiency[case]
    if eff.get("bound") == "host":
        assert found, eff["verdict"]
        said = float(re.search(r"idle (\d+)% of the step", eff["verdict"]).group(1))
        assert abs(said - 100 * found[0].evidence["idle_share"]) <= 0.51, (eff["verdict"], found[0].evidence)
