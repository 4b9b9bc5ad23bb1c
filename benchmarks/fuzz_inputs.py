"""Fuzz what users and their colleagues give advisor besides traces: command-line values, config files,
side files (advisor_run.json, memory.prof) and baselines. benchmarks/fuzz.py fuzzes the traces.

Each case builds one hostile input, passes it through the code the command runs (the option and config
parsers, the side-file readers, the rules on a loaded run, the check against a baseline) and renders the
result as text and JSON; JSON is parsed strictly and JUnit by expat. Outcomes:

- rejected: one clear line (AdvisorError; exit 2 on the command line);
- ok: analyzed (a bad side file is a warning), rendered, every output parsed;
- TRACEBACK: any other exception, a rule's internal error, or an output its parser refuses.

    nice -n 10 python benchmarks/fuzz_inputs.py [-n 10000] [--kinds options,config,side,baseline] [--seed 0]

Every TRACEBACK is printed with its input. tests/test_hostile_inputs.py runs a few hundred cases.
"""

from __future__ import annotations

import argparse
import collections
import copy
import gzip
import io
import json
import random
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ("transformer_scan", "gpu_data_parallel")

VALUES = ["", " ", "0", "-0", "1", "-1", "0.5", "1e308", "-1e308", "1e999", "nan", "NaN", "inf", "-inf", "0x10",
          "1_000", "1,5", "true", "false", "yes", "maybe", "16G", "16Gi", "16GB", "2.5GiB", "-5GB", "1e3MiB", "[1]",
          "'", '"', "\x00", "\x1b[31m", "é", "1" * 400, "9" * 5000, "%0A::error::x", "$x^$", "[bold]", "None"]


def _rule_ids():
    from advisor.rules import ALL
    return {r.id: r for r in ALL}


def rand_value(rng):
    return (rng.choice(VALUES) if rng.random() < 0.8
            else "".join(chr(rng.randrange(0, 0x2FF)) for _ in range(rng.randrange(8))))


def rand_option(rng, rules):
    bad = rng.random() < 0.2
    rule = (rng.choice(["nope", "", "host-bound.x", "..", "\n"]) if bad and rng.random() < 0.3
            else rng.choice(list(rules)))
    keys = list(rules[rule].options) if rule in rules else []
    key = rng.choice(keys) if keys and not (bad and rng.random() < 0.3) else rand_value(rng)
    sep = rng.choice(["", "==", ":"]) if bad and rng.random() < 0.3 else "="
    value = rand_value(rng) if bad else rng.choice(["0", "0.3", "1", "2", "1e9", "64MiB", "0.999", "1e-9", "5"])
    return f"{rule}.{key}{sep}{value}"


def toml_value(rng, depth=0):
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return str(rng.choice([0, 1, -1, 5, 10**30, -(10**30)]))
    if kind == 1:
        return rng.choice(["nan", "inf", "-inf", "0.5", "1e308", "-0.0"])
    if kind == 2:
        return rng.choice(["true", "false"])
    if kind == 3:
        return json.dumps(rand_value(rng))
    if kind == 4:
        return rng.choice(["1979-05-27", "1979-05-27T07:32:00Z", "07:32:00"])
    if kind == 5:
        return json.dumps(rng.choice(list(_rule_ids())))
    if kind in (6, 7):
        return "[" + ", ".join(toml_value(rng, depth + 1) for _ in range(rng.randrange(4))) + "]"
    return "{" + ", ".join(f"k{i} = {toml_value(rng, depth + 1)}" for i in range(rng.randrange(3))) + "}"


def rand_pyproject(rng, rules) -> str:
    sane = rng.random() < 0.6      # most files right but one value: the parsers are reached past the first check

    def value():
        return rng.choice(["0.3", "1", "0", "5", '"0.5"', '"64MiB"', "1e9"]) if sane else toml_value(rng)

    def ids():
        return json.dumps(rng.sample(list(rules), rng.randrange(3))) if sane else toml_value(rng)
    lines = ["[tool.advisor]"]
    for key in ("select", "ignore"):
        if rng.random() < 0.5:
            lines.append(f"{key} = {ids()}")
    if rng.random() < 0.2:
        lines.append(f"options = {toml_value(rng)}")
    for _ in range(rng.randrange(4)):
        rule = rng.choice(list(rules))
        key = rng.choice(list(rules[rule].options) or ["x"]) if rng.random() < 0.9 else "x"
        lines.append(f'"{rule}.{key}" = {value()}')
    if rng.random() < 0.3:
        rule = rng.choice(list(rules))
        lines += [f'[tool.advisor.options."{rule}"]'] + [f"{k} = {value()}" for k in list(rules[rule].options)[:2]]
    if rng.random() < 0.1:
        lines = [rng.choice(["tool = 5", "[tool]\nadvisor = 3", "[tool.advisor]\n[tool.advisor]"])]
    text = "\n".join(lines) + "\n"
    if rng.random() < 0.15:
        raw = bytearray(text.encode())
        for _ in range(rng.randrange(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return raw.decode("latin-1")
    return text


def rand_setup_cfg(rng, rules) -> str:
    lines = ["[advisor]"]
    for key in ("select", "ignore"):
        if rng.random() < 0.5:
            lines.append(f"{key} = {rand_value(rng)}")
    for _ in range(rng.randrange(3)):
        lines.append(f"{rand_option(rng, rules).replace('=', ' = ', 1)}")
    return "\n".join(lines) + "\n"


def json_value(rng, depth=0):
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return rng.choice([0, -1, 10**40, 1.5, float("nan"), float("inf")])
    if kind == 1:
        return rand_value(rng)
    if kind == 2:
        return rng.choice([True, False, None])
    if kind == 3:
        return rng.choice([[], {}, ""])
    if kind == 4:
        return rng.random() * rng.choice([1, 1e6, 1e300])
    if kind in (5, 6):
        return [json_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rand_value(rng): json_value(rng, depth + 1) for _ in range(rng.randrange(4))}


META_KEYS = ["num_params", "workload", "preset", "backend", "device_kind", "compile_s", "step_wall_ms_median",
             "step_wall_ms", "config", "required_bytes", "capacity_bytes", "initial_loss", "first_step_loss"]


def rand_run_metadata(rng, good: dict) -> bytes:
    kind = rng.randrange(5)
    if kind == 0:      # a good file with some values replaced
        doc = copy.deepcopy(good)
        for _ in range(rng.randrange(1, 4)):
            doc[rng.choice(META_KEYS)] = json_value(rng)
        return json.dumps(doc).encode()
    if kind == 1:      # any JSON
        return json.dumps(json_value(rng)).encode()
    if kind == 2:      # deep
        d = rng.choice([10, 63, 65, 500, 100_000])
        return ("[" * d + "]" * d).encode()
    raw = bytearray(json.dumps(good).encode())
    if kind == 3:      # byte flips
        for _ in range(rng.randrange(1, 6)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw)
    return bytes(raw[: rng.randrange(len(raw))])     # truncated


def rand_memory_profile(rng, good: bytes) -> bytes:
    raw = gzip.decompress(good)
    kind = rng.randrange(4)
    if kind == 0:
        b = bytearray(raw)
        for _ in range(rng.randrange(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return gzip.compress(bytes(b))
    if kind == 1:
        return gzip.compress(raw[: rng.randrange(len(raw))])
    if kind == 2:
        b = bytearray(good)
        b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    return gzip.compress(bytes(rng.randrange(256) for _ in range(rng.randrange(200))))


class Harness:
    def __init__(self):
        from advisor.load.loader import load_run
        from advisor.locate import find_runs
        self.runs = [find_runs(ROOT / "fixtures" / name)[0] for name in FIXTURES]
        self.profiles = [load_run(r) for r in self.runs]
        self.rules = _rule_ids()
        self.tmp = Path(tempfile.mkdtemp(prefix="advisor-fuzz-inputs-"))
        meta = next((r.run_metadata for r in self.runs if r.run_metadata), None)
        self.good_meta = json.loads(Path(meta).read_text()) if meta else {"workload": "transformer"}
        prof = next((r.memory_profile for r in self.runs if r.memory_profile), None)
        self.good_prof = Path(prof).read_bytes() if prof else gzip.compress(b"")
        from advisor.check import save_baseline
        from advisor.job import Job
        self.baseline = self.tmp / "good_baseline.json"
        save_baseline(self.baseline, Job().analyze(self.profiles[0]).document(), None)

    def analyze(self, rng, rules=None, options=None, capacity=None, peaks=None, meta=None):
        """The rules on a loaded run, rendered; the profile restored after."""
        from advisor.job import Job
        from advisor.settings import Settings
        profile = rng.choice(self.profiles)
        saved = (list(profile.notes), profile.device_capacity_bytes, profile.run_metadata, list(profile.warnings))
        try:
            if meta is not None:
                profile.run_metadata = meta
            analysis = Job(None if rules is None else tuple(rules), options,
                           Settings(device_memory=capacity, peaks=peaks)).analyze(profile)
            self.render(analysis)
            broken = [n for n in profile.notes if n.startswith("internal error")]
            if broken:
                raise RuntimeError(broken[0])
            return analysis
        finally:
            profile.notes[:], profile.device_capacity_bytes, profile.run_metadata = saved[0], saved[1], saved[2]
            profile.warnings[:] = saved[3]

    def render(self, analysis):
        from rich.console import Console

        from advisor.report import json_report, text
        doc = analysis.document()
        text.render([doc], Console(file=io.StringIO(), width=160, highlight=False, soft_wrap=True), [], "")
        json.loads(json_report.render([doc], "x"), parse_constant=_refuse)

    def case_options(self, rng):
        from advisor.rules import select as select_rules
        from advisor.settings import parse_option_flags, parse_size_flag, parse_steps_flag, user_peaks, validate_options
        ids = list(self.rules)
        select = [rng.choice(ids + ["nope", rand_value(rng)] if rng.random() < 0.1 else ids)
                  for _ in range(rng.randrange(3))]
        ignore = [rng.choice(ids) for _ in range(rng.randrange(2))]
        flags = [rand_option(rng, self.rules) for _ in range(rng.randrange(1, 4))]
        self.last = f"--select {select} --ignore {ignore} --option {flags}"
        rules = select_rules(select, ignore)
        options = validate_options(parse_option_flags(flags), self.rules)
        sizes = [rand_value(rng)] * 2 + ["24GB", "1KB", "1e30", "16Gi"]
        capacity = parse_size_flag(rng.choice(sizes) if rng.random() < 0.3 else None, "--device-memory")
        parse_steps_flag(rng.choice([None, "", "1:3", "3:1", ":", "a:b", "-1:", "1", "1:2:3", "9" * 30 + ":"])
                         if rng.random() < 0.3 else None)
        rates = [rand_value(rng), "989T", "3.35TB/s", "1", "1e30"]
        peaks = user_peaks(*(rng.choice(rates) if rng.random() < 0.2 else None for _ in range(2)))
        self.last += f" --device-memory {capacity}"
        self.analyze(rng, rules, options, capacity, peaks)
        return f"--select {select} --ignore {ignore} --option {flags}"

    def case_config(self, rng):
        from advisor.settings import validate_options
        from advisor.user_input import read_project_settings
        folder = self.tmp / "config"
        folder.mkdir(exist_ok=True)
        for name in ("pyproject.toml", "setup.cfg"):
            (folder / name).unlink(missing_ok=True)
        if rng.random() < 0.75:
            text, name = rand_pyproject(rng, self.rules), "pyproject.toml"
        else:
            text, name = rand_setup_cfg(rng, self.rules), "setup.cfg"
        (folder / name).write_bytes(text.encode("utf-8", "surrogateescape"))
        self.last = f"{name}: {text!r}"
        settings = read_project_settings(folder)
        from advisor.rules import select as select_rules
        rules = select_rules(settings.select, settings.ignore)
        self.analyze(rng, rules, validate_options(settings.options, self.rules))
        return f"{name}: {text!r}"

    def case_side(self, rng):
        from advisor.errors import AdvisorError
        from advisor.load.loader import _run_metadata
        from advisor.load.memprof import read_memory_profile
        run = rng.choice(self.runs)
        if rng.random() < 0.6:
            data = rand_run_metadata(rng, self.good_meta)
            path = self.tmp / "advisor_run.json"
            path.write_bytes(data)
            self.last = f"advisor_run.json: {data[:300]!r}"
            warnings = []
            meta = _run_metadata(type(run)(run.xplane, None, path, run.hosts), warnings)
            self.analyze(rng, meta=meta)
            return f"advisor_run.json: {data[:300]!r}"
        data = rand_memory_profile(rng, self.good_prof)
        path = self.tmp / "memory.prof"
        path.write_bytes(data)
        self.last = f"memory.prof: {data[:100]!r}"
        try:
            read_memory_profile(path)
        except AdvisorError:
            pass         # the loader turns it into a warning
        return f"memory.prof: {len(data)} bytes"

    def case_baseline(self, rng):
        from advisor.check import read_baseline_doc, run_check
        from advisor.job import Job
        from advisor.report import ci
        doc = json.loads(self.baseline.read_text())
        kind = rng.randrange(3)
        if kind == 0:
            for _ in range(rng.randrange(1, 3)):
                target = doc["metrics"] if rng.random() < 0.8 and isinstance(doc["metrics"], dict) else doc
                key = rng.choice(list(target) + ["extra"])
                target[key] = json_value(rng)
            text = json.dumps(doc)
        elif kind == 1:
            text = json.dumps(json_value(rng))
        else:
            raw = bytearray(json.dumps(doc).encode())
            for _ in range(rng.randrange(1, 5)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            text = raw.decode("latin-1")
        path = self.tmp / "baseline.json"
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        self.last = f"baseline: {text[:300]!r}"
        base, _ = read_baseline_doc(path)
        analysis = Job().analyze(self.profiles[0])
        result = run_check(analysis.document(), base, "error", 0.1, 0.05, list(self.rules))
        ci.junit(result, self.tmp / "junit.xml")
        ET.parse(self.tmp / "junit.xml")
        ci.markdown(result)
        json.loads(json.dumps(result.to_json(), allow_nan=False, default=str))
        return f"baseline: {text[:300]!r}"


def _refuse(name):
    raise ValueError(name)


def run(n: int, kinds: list[str], seed: int, verbose: bool = True) -> dict:
    from advisor.errors import AdvisorError
    h = Harness()
    counts = {k: collections.Counter() for k in kinds}
    failures = []
    for kind in kinds:
        rng = random.Random(f"{seed}-{kind}")
        t0 = time.perf_counter()
        for i in range(n):
            h.last = ""
            try:
                getattr(h, f"case_{kind}")(rng)
                counts[kind]["ok"] += 1
            except AdvisorError:
                counts[kind]["rejected"] += 1
            except Exception as err:  # noqa: BLE001 - what the fuzzer is looking for
                counts[kind]["TRACEBACK"] += 1
                import traceback
                where = traceback.extract_tb(err.__traceback__)[-1]
                failures.append((kind, i, (f"{type(err).__name__}: {err} "
                                           f"({Path(where.filename).name}:{where.lineno})")[:400], h.last))
        if verbose:
            c = counts[kind]
            print(f"{kind:<9} {n:>6} cases  ok {c['ok']:>6}  rejected {c['rejected']:>6}  "
                  f"TRACEBACK {c['TRACEBACK']:>4}   {time.perf_counter() - t0:6.1f} s", flush=True)
    import shutil
    shutil.rmtree(h.tmp, ignore_errors=True)
    if verbose:
        for kind, i, err, what in failures[:30]:
            print(f"  {kind} #{i}: {err}\n    input: {what[:300]}")
    return {"counts": counts, "failures": failures}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=10_000)
    ap.add_argument("--kinds", default="options,config,side,baseline")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = run(args.n, args.kinds.split(","), args.seed)
    sys.exit(1 if out["failures"] else 0)


if __name__ == "__main__":
    main()
