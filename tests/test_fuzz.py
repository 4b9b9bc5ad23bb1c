"""Seeded fuzz: 200 mutants of a real trace (byte flips anywhere and inside the metadata plane's
HLO, truncation, zeroed ranges, duplicated chunks), analyzed in process with the engine.

Each mutant must give one clear line (AdvisorError: exit 2 on the command line), a report
identical to the unmutated one, a report that warns what it could not read, or the same findings
with other numbers (a flip inside a size the trace records, such as an HLO shape's dimension that
the FLOP and byte counts read: no reader can tell it from a real value): never an exception, a
rule's internal error, or other findings without a warning.
benchmarks/fuzz.py runs 10,000 of the same mutants.
"""

import collections
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import fuzz  # noqa: E402

N = 200


@pytest.fixture(scope="module")
def fuzzer():
    f = fuzz.Fuzzer("transformer_scan")
    yield f
    f.close()


@pytest.mark.slow
def test_mutants_are_rejected_or_the_same_or_warned(fuzzer):
    outcomes = collections.Counter()
    wrong = []
    for i, kind, mutant in fuzz.mutants(fuzzer.data, seed=0, n=N):
        outcome, detail = fuzzer.run(mutant)
        outcomes[(kind, outcome)] += 1
        if outcome not in ("rejected", "same", "warned", "numbers"):
            wrong.append(f"mutant {i} ({kind}): {outcome}: {detail}")
    assert not wrong, "\n".join(wrong)
    kinds = {kind for kind, _ in outcomes}
    assert kinds == set(fuzz.KINDS)
    # the mix is real: flips inside the HLO are caught by warnings, truncations by one-line errors
    assert outcomes[("hlo_flip", "warned")] > 0 and outcomes[("truncate", "rejected")] > 0


def test_the_unmutated_trace_reports_no_warnings(fuzzer):
    assert fuzzer.run(fuzzer.data) == ("same", "")
    assert fuzzer.baseline["warnings"] == [] and fuzzer.baseline["findings"]


def test_a_stat_that_is_not_a_number_is_one_clear_error(fuzzer):
    """Mutant 2745 of benchmarks/fuzz.py's 10,000 (seed 0): a flipped stat id makes an op's
    device_ordinal name a source file; that was a ValueError from int(), now the one-line error."""
    (mutant,) = [m for i, _, m in fuzz.mutants(fuzzer.data, seed=0, n=2746) if i == 2745]
    outcome, detail = fuzzer.run(mutant)
    assert outcome == "rejected" and "device_ordinal stat is not a number" in detail, (outcome, detail)
