"""`baseline status` names, per case, the baseline it would use on this host and how it stands (matches, falls
back by a named rule, missing); the lineage's heads are the baselines in use, each checked against its file;
`baseline adopt` gives listed baselines their first entries once, and `baseline log` shows the chains."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from kit.backends.hf.kernels import exact_runtime
from kit.baselines.adopt import adopt
from kit.core.baselines.baselinekind import CALIBRATION, EXACT_GOLDEN, IN_KERNEL_REFERENCE, SEMANTIC_GOLDEN
from kit.descriptor.standing import Standing, gaps, plan_rows
from kit.core.noise.calibration import load_record
from kit.core.errors import BadInput
from kit.core.baselines.lineage import LineageEntry, write_entry
from kit.core.host.runtime import accelerator
from kit.descriptor.load import load_descriptor
from kit.descriptor.plan import resolve
from kit.core.records.paths import display
from support import golden_made_on, parity_kit, write_descriptor

pytestmark = pytest.mark.unit

ELSEWHERE_CPU = "cpu (x86-64-v9)"
ELSEWHERE_RUNTIME = "torch-cpu x86_64 aten=avx512 onednn=avx512_core_amx mkl=GenuineIntel Some Xeon"


def record_elsewhere(embedded, folder: Path, name: str = ELSEWHERE_CPU) -> Path:
    """The embedded hf-bf16 record its listed power record was measured against, as if measured on the class of
    CPU ``name`` (it loads: written canonically under its own digest, its figures its samples'). The record copied
    is the power record's, whichever class this host is, so that a power record relabelled onto the copy
    (support.power_against) re-derives its figures under the bounds it was measured under."""
    from kit.core.noise.power import read_power
    from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes

    case = embedded.doc["cases"]["hf-bf16"]
    here = embedded.descriptor.parent
    measured_against = read_power((here / case["power"][0]).resolve())["record_sha256"]
    own = next(p for p in ((here / f).resolve() for f in case["calibration"])
               if load_record(p).sha256 == measured_against)
    doc = json.loads(own.read_text())
    doc["fingerprint"]["runtime"]["accelerator"] = {"name": name, "driver": ""}
    data = canonical_bytes(doc)
    folder.mkdir(parents=True, exist_ok=True)
    return atomic_write_bytes(folder / f"{sha256_bytes(data)}.json", data)


def hf_case(embedded, calibration, **more) -> dict:
    # Its power records were measured against the embedded records: a case listing others cannot list them.
    case = {k: v for k, v in embedded.doc["cases"]["hf-bf16"].items() if k not in ("calibration", "power")}
    return {**case, "calibration": calibration, **more}


def rows_of(desc: Path, *cases: str):
    loaded = load_descriptor(desc)
    return plan_rows(resolve(loaded, list(cases) or None), list(loaded.baselines.lineage()))


def test_the_embedded_descriptor_stands_on_baselines_of_this_host_or_says_so(embedded, host_class):
    rows = rows_of(embedded.descriptor)
    by = {(r.case, r.kind): r for r in rows}
    assert by[("checkpoint", EXACT_GOLDEN)].standing == Standing.MATCH
    assert by[("levanter-native", IN_KERNEL_REFERENCE)].standing == Standing.IN_KERNEL
    # The decode cases were hand-set (0.075) until their decode steps were calibrated: no case stands on a guess.
    assert not [r for r in rows if r.standing == Standing.HAND_SET]
    for case in ("hf-bf16", "hf-bf16-decode", "vllm-pp1-decode"):
        cal = by[(case, CALIBRATION)]
        # This host's class of CPU has a record of its own, or the case falls back by its stated rule: never silently.
        assert cal.standing == (Standing.MATCH if host_class.recorded else Standing.FALLBACK)
        if cal.standing == Standing.FALLBACK:  # accept_noise_changes = ["hardware"] adds the rule "device" to its order
            assert cal.rule.startswith("fallback order ['hardware', 'device'] took it by its rule \"device\": noise "
                                       "measured on cpu (") and f"this host is {host_class.accelerator};" in cal.rule
        # Made before backtests (the first records), or by `baseline make` with its backtest: a chain's first.
        assert cal.lineage in ("first of its chain, made before backtests", "first of its chain")
        assert cal.made_at and cal.file


def test_a_host_with_no_baselines_sees_each_gap_with_what_closes_it(tmp_path, embedded):
    other = golden_made_on(embedded.goldens["exact"], tmp_path / "goldens" / "exact-elsewhere.json", "a host",
                           ELSEWHERE_RUNTIME)
    record = record_elsewhere(embedded, tmp_path / "calibrations")
    cases = {"checkpoint": {**embedded.doc["cases"]["checkpoint"], "cpu_kernels": "native"},
             "hf-bf16": hf_case(embedded, str(record), accept_noise_changes=[]),
             "hf-fallback": hf_case(embedded, str(record), accept_noise_changes=["hardware"])}
    desc = write_descriptor(tmp_path, embedded, goldens={"semantic": embedded.goldens["semantic"], "exact": [other]},
                            cases=cases)
    by = {(r.case, r.kind): r for r in rows_of(desc)}
    exact = by[("checkpoint", EXACT_GOLDEN)]
    assert exact.standing == Standing.MISSING
    assert exact.rule.startswith(f"no baseline for this runtime: goldens.exact ({desc}:")
    assert exact.remedy and exact.remedy.startswith("parity-kit golden make ")
    here = accelerator("cpu")["name"]
    missing = by[("hf-bf16", CALIBRATION)]
    assert (missing.standing, missing.rule) == (Standing.MISSING, f"no record measured on {here} (listed: "
                                                                  f"{ELSEWHERE_CPU}), and the case accepts no hardware "
                                                                  "change")
    fallback = by[("hf-fallback", CALIBRATION)]
    assert fallback.standing == Standing.FALLBACK
    # One record or several, a case that accepts the hardware change takes another class's by the rule "device".
    assert fallback.rule == (f"fallback order ['hardware', 'device'] took it by its rule \"device\": noise measured "
                             f"on {ELSEWHERE_CPU}, this host is {here}; its bounds apply, its drift test does not")
    assert [r.case for r in gaps(list(by.values()))] == ["checkpoint", "hf-bf16", "hf-fallback"]
    proc = parity_kit("baseline", "status", str(desc), "--json")
    assert proc.returncode == 7, proc.stderr  # no baseline for this runtime, as the gate says it
    assert {(r["case"], r["standing"]) for r in json.loads(proc.stdout)} >= {("checkpoint", Standing.MISSING),
                                                                             ("hf-fallback", Standing.FALLBACK)}


def lineage_descriptor(tmp_path, embedded, listed: Path) -> Path:
    return write_descriptor(tmp_path, embedded, cases={"hf-bf16": hf_case(embedded, [str(listed)])},
                            baselines={"lineage": str(tmp_path / "lineage")})


def entry_for(record: Path, lineage: Path, supersedes: str | None = None, **more) -> LineageEntry:
    r = load_record(record)
    fields = dict(descriptor="test", kind=CALIBRATION, case="hf-bf16", baseline=r.sha256,
                  file=os.path.relpath(record, lineage),
                  runtime=r.fingerprint["runtime"]["accelerator"]["name"], supersedes=supersedes, reason="test",
                  command=("parity-kit", "calibrate"), created_at=r.created_at, bounds=r.bounds)
    return LineageEntry(**{**fields, **more})


def test_the_head_of_a_chain_is_the_record_in_use_and_the_superseded_one_is_left_out(tmp_path, embedded):
    here = accelerator("cpu")["name"]
    old = record_elsewhere(embedded, tmp_path / "calibrations", here)  # a record of this class, listed
    doc = json.loads(old.read_text())
    doc["created_at"] = "2026-12-02T12:00:00+00:00"  # a remade record: other bytes, same figures
    from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes

    data = canonical_bytes(doc)
    new = atomic_write_bytes(tmp_path / "calibrations" / f"{sha256_bytes(data)}.json", data)
    lineage = tmp_path / "lineage"
    first = entry_for(old, lineage)
    write_entry(lineage, first)
    write_entry(lineage, entry_for(new, lineage, supersedes=first.sha256, reason="remade for torch 2.14"))
    desc = lineage_descriptor(tmp_path, embedded, old)
    spec = load_descriptor(desc).case_specs(["hf-bf16"])[0]
    assert spec.calibration is not None and spec.calibration["path"] == str(new)
    rows = rows_of(desc)
    row = next(r for r in rows if r.kind is CALIBRATION)
    assert row.lineage == "2nd of its chain, made before backtests, bounds never moved"
    golden = next(r for r in rows if r.kind is SEMANTIC_GOLDEN)  # the descriptor keeps a lineage; this has none
    assert golden.lineage == "no lineage entry: listed by hand, never backtested"
    proc = parity_kit("baseline", "log", str(desc))
    assert proc.returncode == 0, proc.stderr
    assert f"hf-bf16: calibration on {here} (2 baselines, bounds never moved)" in proc.stdout
    assert "remade for torch 2.14" in proc.stdout


def test_a_head_whose_file_is_not_what_its_entry_names_is_refused(tmp_path, embedded):
    here = accelerator("cpu")["name"]
    listed = record_elsewhere(embedded, tmp_path / "calibrations", here)
    lineage = tmp_path / "lineage"
    other = record_elsewhere(embedded, tmp_path / "other", ELSEWHERE_CPU)
    forged = entry_for(listed, lineage, file=os.path.relpath(other, lineage))  # names one file, points at another
    write_entry(lineage, forged)
    desc = lineage_descriptor(tmp_path, embedded, listed)
    with pytest.raises(BadInput, match=re.escape(f"names {other} with SHA-256 {forged.baseline}; the file's is ")):
        load_descriptor(desc).case_specs(["hf-bf16"])


def test_adopt_writes_each_first_entry_once_and_log_shows_the_chains(tmp_path, embedded):
    here = accelerator("cpu")["name"]
    listed = record_elsewhere(embedded, tmp_path / "calibrations", here)
    desc = lineage_descriptor(tmp_path, embedded, listed)
    written = adopt(desc)
    kinds = sorted(json.loads(p.read_text())["kind"] for p in written)
    assert kinds == ["calibration", "exact-golden", "exact-golden", "exact-golden", "semantic-golden",
                     "semantic-golden"]
    assert adopt(desc) == []  # idempotent: every entry is there
    proc = parity_kit("baseline", "log", str(desc), "--case", "hf-bf16", "--json")
    chains = json.loads(proc.stdout)
    assert [(c["kind"], c["runtime"], len(c["steps"])) for c in chains] == [("calibration", here, 1)]
    assert chains[0]["steps"][0]["reason"] == "made before baselines kept a lineage"
    assert chains[0]["steps"][0]["backtest"] is None
    proc = parity_kit("baseline", "log", str(desc), "--case", "nope")
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.strip() == f"parity-kit: bad input: {display(desc)}: no case named 'nope' (cases: hf-bf16)"


def test_no_lineage_folder_means_nothing_to_adopt_into(tmp_path, embedded):
    desc = write_descriptor(tmp_path, embedded, cases={"checkpoint": embedded.doc["cases"]["checkpoint"]})
    with pytest.raises(BadInput, match=r"no \[baselines\] table to keep a lineage in"):
        adopt(desc)


def test_the_pinned_runtime_name_is_what_the_embedded_exact_golden_records():
    assert exact_runtime({"cpu_kernels": "avx2"}).startswith("torch-cpu x86_64 aten=avx2")


def test_every_run_names_its_baselines_in_its_manifest_and_summary(tmp_path, embedded):
    from kit.core.records.results import RunView
    from kit.views.summary import baseline_table

    rows = [r.to_dict() for r in rows_of(embedded.descriptor, "hf-bf16", "hf-bf16-decode")]
    view = RunView(tmp_path, {"baselines": rows, "started_at": "2026-12-31T00:00:00+00:00", "cases": []}, {}, {})
    table = baseline_table(view)
    cal = table.loc[("hf-bf16", "calibration")]
    assert cal["standing"] in (Standing.MATCH, Standing.FALLBACK)
    assert cal["lineage"] == "first of its chain, made before backtests"
    assert cal["age (days)"] >= 29  # the embedded records were made by 2026-12-02
    assert table.loc[("hf-bf16-decode", "calibration")]["standing"] in (Standing.MATCH, Standing.FALLBACK)


def test_a_power_record_of_a_superseded_record_is_left_out_and_of_one_never_listed_refused(tmp_path, embedded):
    power = (embedded.descriptor.parent / embedded.doc["cases"]["hf-bf16"]["power"][0]).resolve()
    measured_against = json.loads(power.read_text())["record_sha256"]
    old = embedded.descriptor.parent.parent / "calibrations" / f"{measured_against}.json"
    new = _remade(old, tmp_path / "calibrations")  # other bytes, same figures
    lineage = tmp_path / "lineage"
    first = entry_for(old, lineage)
    write_entry(lineage, first)
    write_entry(lineage, entry_for(new, lineage, supersedes=first.sha256, reason="remade"))
    desc = write_descriptor(tmp_path, embedded, cases={"hf-bf16": hf_case(embedded, [str(old)], power=[str(power)])},
                            baselines={"lineage": str(lineage)})
    spec = load_descriptor(desc).case_specs(["hf-bf16"])[0]
    assert spec.calibration["path"] == str(new) and spec.power is None  # it says nothing of the bounds in use
    never = write_descriptor(tmp_path / "never", embedded,
                             cases={"hf-bf16": hf_case(embedded, [str(new)], power=[str(power)])})
    with pytest.raises(BadInput, match=f"{re.escape(display(power))} was measured against calibration record "
                                       f"{measured_against[:12]}, which the case does not list"):
        load_descriptor(never).case_specs(["hf-bf16"])


@pytest.mark.parametrize("absolute", [True, False])
def test_a_lineage_head_outside_the_descriptors_tree_is_refused(tmp_path, embedded, absolute):
    # A head the descriptor does not list reaches the gate through its entry alone: a diff of the repository
    # must show its file, so it cannot name one elsewhere on the machine (an absolute path, or ../../x).
    from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes

    here = accelerator("cpu")["name"]
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    old = record_elsewhere(embedded, repo / "calibrations", here)
    doc = json.loads(old.read_text())
    doc["created_at"] = "2026-12-05T12:00:00+00:00"
    data = canonical_bytes(doc)
    outside = atomic_write_bytes(tmp_path / "elsewhere" / f"{sha256_bytes(data)}.json", data)
    lineage = repo / "lineage"
    first = entry_for(old, lineage)
    write_entry(lineage, first)
    file = str(outside) if absolute else os.path.relpath(outside, lineage)
    entry = write_entry(lineage, entry_for(outside, lineage, supersedes=first.sha256, file=file))
    desc = write_descriptor(repo, embedded, cases={"hf-bf16": hf_case(embedded, [str(old)])},
                            baselines={"lineage": str(lineage)})
    with pytest.raises(BadInput) as refused:
        load_descriptor(desc).case_specs(["hf-bf16"])
    assert str(refused.value).endswith(f"lineage entry {display(entry)} names {display(outside)}, outside "
                                       f"{display(repo)}; a lineage entry names a baseline inside the descriptor's "
                                       "tree (set [baselines] root to widen it)")


def test_baseline_make_never_writes_outside_the_descriptors_tree(tmp_path, embedded):
    # A descriptor at a repository's root: the default ../calibrations is outside the repository.
    from kit.baselines.make import MakeRequest, _folders, make_baselines

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    record = record_elsewhere(embedded, repo / "calibrations")
    case = hf_case(embedded, [str(record)], accept_noise_changes=[])
    desc = write_descriptor(repo, embedded, cases={"hf-bf16": case}, baselines={"lineage": str(repo / "lineage")})
    with pytest.raises(BadInput) as refused:
        make_baselines(MakeRequest(desc, reason="new host"))
    assert str(refused.value) == (f"{display(desc)}: [baselines] puts exact-golden files in "
                                  f"{display(tmp_path / 'goldens')}, outside {display(repo)}; name a folder "
                                  "inside the descriptor's tree (or set [baselines] root)")
    assert not (tmp_path / "goldens").exists() and not (repo / "lineage").exists()
    rooted = write_descriptor(repo, embedded, name="rooted.toml", cases={"hf-bf16": case},
                              baselines={"lineage": str(repo / "lineage"), "root": ".."})
    plan = resolve(load_descriptor(rooted))
    assert plan.outline.tree_root == tmp_path and _folders(plan)["exact-golden"] == tmp_path / "goldens"


def _remade(old: Path, folder: Path, raise_to: float | None = None) -> Path:
    """``old`` made again: its samples as they are (other bytes: a later time), or with one sample's error on one
    prompt raised to ``raise_to``; every figure re-derived from the samples, the file named by its SHA-256."""
    import dataclasses

    from kit.core.noise.calibration import CalibrationRecord
    from kit.core.records.jsonio import atomic_write_bytes, canonical_bytes, sha256_bytes

    r = load_record(old)
    samples = list(r.samples)
    if raise_to is not None:
        first = samples[0]
        prompt = next(iter(first.errors))
        samples[0] = dataclasses.replace(first, errors={**first.errors, prompt: raise_to})
    derived = {"prompts", "buckets", "drift", "decode", "path"}
    fields = {f.name: getattr(r, f.name) for f in dataclasses.fields(r) if f.name not in derived}
    new = CalibrationRecord.measured(buckets={p: v["bucket"] for p, v in r.prompts.items()},
                                     **{**fields, "samples": samples, "created_at": "2026-12-05T12:00:00+00:00"})
    data = canonical_bytes(new.to_dict())
    return atomic_write_bytes(folder / f"{sha256_bytes(data)}.json", data)


def _chain(tmp_path, embedded, raise_to: float | None, **claims) -> tuple[Path, Path, Path]:
    """A descriptor listing a record of this host's class and a lineage whose head remakes it; the head's entry
    claims ``claims`` over what it would honestly say."""
    here = accelerator("cpu")["name"]
    old = record_elsewhere(embedded, tmp_path / "calibrations", here)
    new = _remade(old, tmp_path / "calibrations", raise_to)
    lineage = tmp_path / "lineage"
    first = entry_for(old, lineage)
    write_entry(lineage, first)
    head = write_entry(lineage, entry_for(new, lineage, supersedes=first.sha256, **claims))
    return lineage_descriptor(tmp_path, embedded, old), new, head


def test_an_entry_claiming_bounds_that_are_not_its_records_own_is_refused(tmp_path, embedded):
    # The forged entry: one sample raised to 0.03 (figures re-derived), the old bounds claimed.
    here = accelerator("cpu")["name"]
    old_bounds = load_record(record_elsewhere(embedded, tmp_path / "probe", here)).bounds
    desc, new, head = _chain(tmp_path, embedded, 0.03, bounds=old_bounds)
    with pytest.raises(BadInput) as refused:
        load_descriptor(desc).case_specs(["hf-bf16"])
    message = str(refused.value)
    assert f"lineage entry {display(head)} states bounds {{" in message and "\n" not in message
    assert "but its record's own, from its samples, are {" in message
    assert parity_kit("baseline", "status", str(desc)).returncode == 3  # status no longer says "never moved"


def test_a_head_looser_than_its_parent_beyond_its_margin_is_refused_unless_a_reason_was_given(tmp_path, embedded,
                                                                                          host_class):
    desc, new, head = _chain(tmp_path, embedded, 0.03)  # an honest entry: the new record's own bounds
    with pytest.raises(BadInput) as refused:
        load_descriptor(desc).case_specs(["hf-bf16"])
    message = str(refused.value)
    assert f"lineage entry {display(head)} loosens bucket " in message
    assert "x), beyond its parent's margin of" in message
    assert message.endswith("and the command that made it gave no reason for that (--accept-looser REASON)")

    accepted = tmp_path / "accepted"
    desc, new, head = _chain(accepted, embedded, 0.03,
                             command=("parity-kit", "baseline", "make", "--accept-looser", "torch 2.14 rounds more"))
    spec = load_descriptor(desc).case_specs(["hf-bf16"])[0]
    assert spec.calibration["sha256"] == load_record(new).sha256  # loosened, and said so


def test_baseline_verify_re_derives_every_entry_and_log_refuses_a_forged_chain(tmp_path, embedded):
    honest, _, _ = _chain(tmp_path / "honest", embedded, None)
    proc = parity_kit("baseline", "verify", str(honest))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("verified: 2 lineage entries")
    here = accelerator("cpu")["name"]
    old_bounds = load_record(record_elsewhere(embedded, tmp_path / "probe", here)).bounds
    forged, _, head = _chain(tmp_path / "forged", embedded, 0.03, bounds=old_bounds)
    proc = parity_kit("baseline", "verify", str(forged))
    assert proc.returncode == 3
    assert proc.stdout.startswith(f"refused: lineage entry {display(head)} states bounds ")
    log = parity_kit("baseline", "log", str(forged))
    assert log.returncode == 3 and "bounds never moved" not in log.stdout
    assert f"lineage entry {display(head)} states bounds " in log.stderr


def test_baseline_make_refuses_a_looser_record_unless_a_reason_is_given(tmp_path, embedded, host_class):
    from kit.baselines.make import Made, _judge_moves, with_moves

    old = record_elsewhere(embedded, tmp_path / "calibrations", accelerator("cpu")["name"])
    same, looser = _remade(old, tmp_path / "same"), _remade(old, tmp_path / "looser", 0.03)
    assert _judge_moves(with_moves(Made(CALIBRATION, "hf-bf16", "here", same, old)), None) == []
    made = with_moves(Made(CALIBRATION, "hf-bf16", "here", looser, old))
    (refusal,) = _judge_moves(made, None)
    assert refusal.startswith("hf-bf16: the new record loosens bucket ") and "beyond its parent's margin" in refusal
    assert refusal.endswith("find why its noise grew, or bless it with --accept-looser REASON")
    assert _judge_moves(made, "a new CPU class rounds more") == []
    moved = [m for m in made.moves if m.after != m.before]
    assert moved and all(m.ratio > 1 for m in moved)  # the evidence shows each move as a ratio


def _new_chain(tmp_path, embedded, **claims) -> tuple[Path, Path]:
    """A descriptor listing a record of this host's class that has no entry (its head's entry deleted), and a lineage
    whose one entry starts a new chain for that class with a record about as loose as a forger would like."""
    here = accelerator("cpu")["name"]
    old = record_elsewhere(embedded, tmp_path / "calibrations", here)
    looser = _remade(old, tmp_path / "calibrations", 0.03)
    head = write_entry(tmp_path / "lineage", entry_for(looser, tmp_path / "lineage", **claims))
    return lineage_descriptor(tmp_path, embedded, old), head


def test_a_record_starting_a_new_chain_for_a_class_that_had_one_needs_a_reason(tmp_path, embedded):
    desc, head = _new_chain(tmp_path / "forged", embedded)
    proc = parity_kit("baseline", "verify", str(desc))
    assert proc.returncode == 3, proc.stdout
    line, here = proc.stdout.strip(), accelerator("cpu")["name"]
    assert line.startswith(f"refused: lineage entry {display(head)} starts a new chain for {here}, which had ")
    assert "\n" not in line
    assert "bucket " in line and line.endswith("a record that does not supersede its class's needs a reason "
                                               "(--accept-looser REASON), as a looser one does")
    said, _ = _new_chain(tmp_path / "said", embedded,
                         command=("parity-kit", "baseline", "make", "--accept-looser", "a new chain for torch 2.14"))
    assert load_descriptor(said).baselines.verify_lineage() == []


@pytest.mark.parametrize("given", ["--case", "--accept-looser=--case", "  ", "42"])
def test_a_reason_is_words_not_a_flag(tmp_path, embedded, given):
    command = ("parity-kit", "baseline", "make", "--accept-looser", given) if "=" not in given else (
        "parity-kit", "baseline", "make", given)
    desc, head = _new_chain(tmp_path, embedded, command=command)
    (problem,) = load_descriptor(desc).baselines.verify_lineage()
    assert problem.startswith(f"lineage entry {display(head)} starts a new chain")
    from kit.baselines.make import MakeRequest, make_baselines

    with pytest.raises(BadInput) as refused:
        make_baselines(MakeRequest(desc, reason="new CPU class", accept_looser=given.split("=", 1)[-1]))
    assert str(refused.value).startswith("--accept-looser: ")
    with pytest.raises(BadInput) as refused:
        make_baselines(MakeRequest(desc, reason=given.split("=", 1)[-1]))
    assert str(refused.value).startswith("--reason: ")


def test_runtimes_that_differ_only_in_spaces_key_one_chain(tmp_path, embedded):
    here = accelerator("cpu")["name"]
    old = record_elsewhere(embedded, tmp_path / "calibrations", here)
    first = entry_for(old, tmp_path / "lineage")
    write_entry(tmp_path / "lineage", first)
    looser = _remade(old, tmp_path / "calibrations", 0.03)
    write_entry(tmp_path / "lineage", entry_for(looser, tmp_path / "lineage", runtime=f" {here}  "))
    desc = lineage_descriptor(tmp_path, embedded, old)
    with pytest.raises(BadInput) as refused:
        load_descriptor(desc).baselines.lineage()
    assert f"on {here} has 2 current baselines" in str(refused.value)
