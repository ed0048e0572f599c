"""Loading a descriptor: TOML parsed, validated against the schema, cases resolved into CaseSpecs.

Every error is one line ``file:line: key: what was expected``.
"""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel, ValidationError

from kit.backends import registry
from kit.core.records import paths
from kit.core.baselines.baselinekind import of_golden
from kit.core.noise.calibration import load_record, measured_on
from kit.core.errors import BadInput
from kit.core.records.jsonio import read_input_bytes, sha256_bytes
from kit.core.noise.power import named_calibration, read_power
from kit.core.records.spec import CaseSpec
from kit.core.records.text import printable
from kit.core.noise.falsefailure import Budget
from kit.core.records.records import GoldenMode
from kit.descriptor import nesting
from kit.descriptor.baselines import Baselines
from kit.descriptor.code_settings import warn_code_settings
from kit.descriptor.falsefailure import descriptor_budget
from kit.descriptor.host import Host
from kit.descriptor.schema import (CASE_NAME, MAX_NAME, CaseBase, CustomNotebook, Descriptor, ModelRef, Release,
                                   Resources, case_golden_kind, case_schemas, golden_kind, options_schema)


class LoadedDescriptor:
    """A validated descriptor with its file, its digest and its cases' schemas applied; the baselines its cases
    name are read by its ``baselines``."""

    def __init__(self, path: Path, text: str, doc: Descriptor, cases: dict[str, CaseBase], host: Host | None = None,
                 lineage_applied: bool = False):
        self.path, self.text, self.doc, self.cases = path, text, doc, cases
        # The hardware its cases resolve for (kit.descriptor.host): this machine's, or the one a run recorded.
        self.host = host or Host()
        # Its baseline lists already name what the lineage resolves them to (``with_baselines``): none to apply.
        self.lineage_applied = lineage_applied
        self._lines: dict[tuple, int] | None = None  # each key's line, indexed on the first message that needs one

    @functools.cached_property
    def baselines(self) -> Baselines:
        """What each case is judged against, read from the files the document names (kit.descriptor.baselines)."""
        return Baselines(self)

    @property
    def name(self) -> str:
        """The descriptor's name: what its runs, records and lineage entries are filed under."""
        return self.doc.name

    def resolve(self, relative: str) -> Path:
        """A path the document names, relative to the descriptor's own folder (the document travels with its
        files), resolved."""
        return (self.path.parent / relative).resolve()

    def resolve_name(self, relative: str) -> Path:
        """``relative`` with its folders resolved but its own name kept: a content-addressed file is checked
        under the name the descriptor gives it, a link's own, not its target's."""
        given = Path(relative)
        return self.resolve(str(given.parent)) / given.name

    def where(self, *loc: str) -> str:
        """``file:line`` of a key, for messages about values that parsed but are wrong."""
        if self._lines is None:
            self._lines = _key_lines(self.text)
        return f"{self.shown}:{_line_of(self._lines, loc)}"

    @functools.cached_property
    def sha256(self) -> str:
        """The digest of the bytes the descriptor was read from (its text, UTF-8 as the file holds it): what
        decided a run is what was validated, and the file is not read a second time to say so."""
        return sha256_bytes(self.text.encode("utf-8"))

    @functools.cached_property
    def shown(self) -> str:
        """The descriptor's path as messages show it, worked out once: a plan names a place for each key of each
        case (``where``), and asks for it a dozen times per case."""
        return paths.display(self.path)

    def release(self, name: str) -> Release:
        """The [releases.NAME] table a run targets; an unknown name is refused in one line naming those the
        descriptor has."""
        if name not in self.doc.releases:
            known = ", ".join(self.doc.releases) or "none"
            raise BadInput(f"{paths.display(self.path)}: no release named {name!r} "
                           f"(releases: {known}; add a [releases.{name}] table)")
        return self.doc.releases[name]

    def model_ref(self, name: str, case: CaseBase) -> ModelRef:
        """The model a case scores: its [models] entry where it names one, else the descriptor's model; an
        unknown entry is refused at its line."""
        if case.model is None:
            return self.doc.model
        if case.model not in self.doc.models:
            raise BadInput(f"{self.where('cases', name, 'model')}: cases.{name}.model: no [models] entry "
                           f"{case.model!r} (have: {', '.join(self.doc.models) or 'none'})")
        return self.doc.models[case.model]

    def case_notebook(self, name: str, case: CaseBase) -> Path:
        """The notebook a case names: a packaged one by name, or the descriptor's own marked trusted.

        A case notebook is code whose result the gate records; a plain string therefore names only the
        kit's own notebooks, and anything else must say it is code the descriptor vouches for."""
        where = f"{self.where('cases', name, 'notebook')}: cases.{name}.notebook"
        given = case.notebook
        if isinstance(given, CustomNotebook):
            if not given.trusted:
                raise BadInput(f"{where}: trusted = false: a case notebook is code the gate runs; "
                               "set trusted = true to run it, or name a packaged notebook")
            path = self.resolve(given.path)
        else:
            assert given is not None, f"case {name} names no notebook"  # called only for a case that names one
            path = (paths.NOTEBOOKS / given).resolve()
            if not packaged_notebook(path):
                raise BadInput(f"{where}: {given!r} is not in the kit's notebooks folder ({paths.NOTEBOOKS}); "
                               f"a notebook of your own runs as code: write notebook = {{path = {given!r}, "
                               "trusted = true}")
        if path.suffix != ".ipynb":
            raise BadInput(f"{where}: {paths.display(path)} is not a notebook (a case notebook ends in .ipynb)")
        return path

    def model_where(self, case: CaseBase) -> str:
        """``file:line`` of the digest a case's model folder is held to."""
        if case.model is None:
            return self.where("model", "digest")
        return self.where("models", case.model, "digest")

    def resources(self, case: str) -> Resources:
        """What a case asks of the machine it runs on (GPUs, nodes, CPUs)."""
        return self.cases[case].resources

    def kernel(self, case: str) -> str:
        """The kernel a case runs in outside a named release."""
        own = self.cases[case]
        return own.kernel or self.doc.defaults.kernel or registry.get(own.backend).kernel

    def retries(self, case: str) -> int:
        """How often a case's notebook is run again after a failure of its own: the case's setting, else the
        descriptor's default."""
        own = self.cases[case].retries
        return self.doc.defaults.retries if own is None else own

    def case_specs(self, only: list[str] | None = None, release: str | None = None,
                   resolve_calibration: bool = True) -> list[CaseSpec]:
        """The resolved cases; under a named release each backend runs in that release's kernel,
        with its engine options, and the release's identity becomes part of the case's inputs.
        ``resolve_calibration=False`` leaves calibrated cases without bounds (what calibrating measures)."""
        d = self.doc.defaults
        rel = self.release(release) if release else None
        names = list(self.cases)
        if only:
            unknown = [n for n in only if n not in self.cases]
            if unknown:
                raise BadInput(f"{paths.display(self.path)}: no case named {unknown[0]!r} "
                               f"(cases: {', '.join(names)})")
            names = [n for n in names if n in only]
        specs = []
        for name in names:
            c = self.cases[name]
            model = self.model_ref(name, c)
            info = registry.get(c.backend)
            notebook = self.case_notebook(name, c) if c.notebook else paths.NOTEBOOKS / info.notebook
            kernel, identity = self.kernel(name), {}
            if rel is not None and release:
                built = rel.backends.get(c.backend)
                if built is None:
                    raise BadInput(f"{self.where('releases', release)}: release {release!r} names no "
                                   f"{c.backend} build, which case {name} needs "
                                   f"(add [releases.{release}.backends.{c.backend}])")
                c = case_schemas()[c.backend].model_validate({**self.doc.cases[name], **built.options})
                kernel, identity = built.kernel, {"name": release, **built.identity()}
            baselines = self.baselines
            calibration = baselines.calibration(name, c) if c.calibration is not None and resolve_calibration else None
            power, limit, no_power = baselines.power(name, c, calibration) if calibration else (None, None, None)
            if c.reference is not None:
                golden, no_baseline, runtime = None, None, ""
                reference = baselines.reference(name, c)
            else:
                (golden, no_baseline, runtime), reference = baselines.case_golden(name, c), None
            if no_baseline is None and calibration is not None:
                no_baseline = baselines.calibration_missing(name, c, calibration) or no_power
            specs.append(CaseSpec(
                name=name, backend=c.backend, kernel=kernel, notebook=str(notebook),
                timeout_s=c.timeout_s or d.timeout_s, model_path=str(self.resolve(model.path)),
                model_digest=model.digest, fixture_path=str(self.resolve(self.doc.fixture.path)),
                golden_path=str(golden) if golden is not None else "", golden_kind=case_golden_kind(c),
                bound=c.bound, top_n=c.top_n or d.top_n, descriptor=str(self.path),
                bucket_bounds=calibration["bounds"] if calibration else dict(c.bucket_bounds),
                buckets=c.buckets, prompt_ids=c.prompts,
                options=c.backend_options(), release=identity, repeats=c.repeats,
                repeat_launches=c.repeat_launches, repeat_prompts=c.repeat_prompts, exact_repeats=c.exact_repeats,
                calibration_launches=c.calibration_launches, calibration=calibration, drift=c.drift,
                decode=c.decode or 0, reference=reference, no_baseline=no_baseline, runtime=runtime, power=power,
                detectable_limit=limit,
            ))
        return specs

    def check_cases(self) -> None:
        """The rules that depend only on the document, for every case, whichever a run selects: a typo in one
        case is found by `check --case another` too."""
        for name, c in self.cases.items():
            if c.golden is not None and c.golden not in self.doc.goldens:
                raise BadInput(f"{self.where('cases', name, 'golden')}: cases.{name}.golden: "
                               f"no [goldens] entry {c.golden!r} (have: {', '.join(self.doc.goldens)})")
            if of_golden(case_golden_kind(c)).bounded and c.bound is None and c.calibration is None:
                raise BadInput(f"{self.where('cases', name)}: cases.{name}: a semantic golden needs a `bound` "
                               "or a `calibration` record")
            if c.exact_repeats and c.repeats == 1 and c.repeat_launches == 1:
                raise BadInput(f"{self.where('cases', name, 'exact_repeats')}: cases.{name}.exact_repeats: "
                               "nothing is repeated; set `repeats` or `repeat_launches` above 1")
            self.model_ref(name, c)
            info = registry.get(c.backend)
            if c.decode and not info.decodes:
                raise BadInput(f"{self.where('cases', name, 'decode')}: cases.{name}.decode: backend {c.backend} "
                               f"has no decode path the kit can drive (backends that decode: "
                               f"{', '.join(n for n, i in registry.registry().items() if i.decodes) or 'none'})")
            if c.notebook:
                self.case_notebook(name, c)

    def false_failure_budget(self) -> Budget:
        """The gate's false-failure rate (``[defaults] false_failure_rate``) split over every drift case of the
        descriptor, whichever a run selects (kit.descriptor.falsefailure)."""
        return descriptor_budget(self.doc.defaults.false_failure_rate, self.cases)

    def calibration_where(self, name: str) -> str:
        """``file:line: cases.NAME.calibration``: the start of every refusal of a case's calibration records."""
        return f"{self.where('cases', name, 'calibration')}: cases.{name}.calibration"


def packaged_notebook(path: str | Path) -> bool:
    """Whether ``path`` is one of the kit's own notebooks (not code a descriptor brought)."""
    return Path(path).resolve().is_relative_to(paths.NOTEBOOKS.resolve())


def load_descriptor(path: str | Path) -> LoadedDescriptor:
    """A descriptor read and validated: TOML parsed, nesting bounded, the schema and each case's backend options
    applied, every value checked; refused in one line ``file:line: key: what``."""
    path = Path(path)
    shown = paths.display(path)
    if not path.is_file():
        raise BadInput(f"descriptor {shown} does not exist")
    text = _read_text(path, shown)
    too_deep = f"values nested more than {nesting.MAX_DEPTH} deep (a descriptor needs six levels at most)"
    line = nesting.deep_line(text)
    if line is not None:
        raise BadInput(f"{shown}:{line}: {too_deep}")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise BadInput(f"{shown}:{m.group(1) if m else '?'}: TOML syntax error: {exc}") from None
    except RecursionError:  # what deep_line counts, it does not count otherwise
        raise BadInput(f"{shown}: {too_deep}") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300): tomllib raises it bare
        raise BadInput(f"{shown}: a value TOML cannot hold: {exc}") from None
    deep = nesting.deep_key(raw)
    if deep is not None:
        key = printable(".".join(deep[:6])) + (f"... ({len(deep)} keys)" if len(deep) > 6 else "")
        at = min((n for k, n in _key_lines(text).items() if k[:len(deep)] == deep), default=_locate(text, deep))
        raise BadInput(f"{shown}:{at}: {key}: {too_deep}")
    return _validate(path, shown, text, raw)


def _read_text(path: Path, shown: str) -> str:
    """The descriptor's text; TOML is UTF-8, so other bytes are refused at the line that holds them."""
    data = read_input_bytes(path, f"descriptor {shown}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BadInput(f"{shown}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x}); "
                       "a TOML descriptor is UTF-8") from None


def derive(desc: LoadedDescriptor, releases: dict[str, dict] | None = None,
           case_updates: dict[str, dict] | None = None) -> LoadedDescriptor:
    """The descriptor with releases added (or replaced) and case entries amended, validated as the file
    is. It keeps the file's path, so relative paths resolve as before and manifests name the file the
    rest came from; what a refresh gates a release it just built with."""
    raw = desc.doc.model_dump()
    raw["releases"] = {**raw["releases"], **(releases or {})}
    raw["cases"] = {name: {**entry, **(case_updates or {}).get(name, {})} for name, entry in raw["cases"].items()}
    return _validate(desc.path, paths.display(desc.path), desc.text, raw)


def for_host(desc: LoadedDescriptor, host: Host) -> LoadedDescriptor:
    """The same descriptor resolved for ``host``'s hardware (a run's recorded one) instead of this machine's."""
    return LoadedDescriptor(desc.path, desc.text, desc.doc, desc.cases, host)


def with_golden(desc: LoadedDescriptor, entry: str, path: Path) -> LoadedDescriptor:
    """The same descriptor with one [goldens] entry naming another file (an absolute path resolves to itself):
    what a regen checks a new golden with."""
    doc = desc.doc.model_copy(update={"goldens": {**desc.doc.goldens, entry: str(path.resolve())}})
    return LoadedDescriptor(desc.path, desc.text, doc, desc.cases, desc.host)


def with_records(desc: LoadedDescriptor, records: dict[str, Path]) -> LoadedDescriptor:
    """The same descriptor with each named case's calibration replaced by one record (an absolute path), and its
    power records left out: they were measured against the record it no longer uses."""
    cases = {name: (c.model_copy(update={"calibration": str(records[name].resolve()), "power": None})
                    if name in records else c) for name, c in desc.cases.items()}
    return LoadedDescriptor(desc.path, desc.text, desc.doc, cases, desc.host)


def with_baselines(desc: LoadedDescriptor, goldens: Mapping[str, tuple[Path, Path | None]],
                   records: Mapping[str, Path], power: Mapping[str, Path]) -> LoadedDescriptor:
    """The same descriptor with new baselines in place, and no lineage left to apply: each exact [goldens] entry's
    new golden first (``goldens``: entry -> (new, the one it supersedes, if any)), each case's new calibration record
    in place of its list's record of the same class of hardware, each case's new power record beside the others, and
    every other exact entry, calibration list and power list as the lineage resolves it now (absolute paths). A power
    record measured against a record the case no longer uses says nothing of its bounds and is left out. What
    `baseline make` checks the baselines it made with; its [baselines] table stays, for its fallback order."""
    b = desc.baselines

    def class_of(path: Path) -> str | None:
        return measured_on({"fingerprint": load_record(path).fingerprint})

    exact = {n: b.golden_files(n) for n in desc.doc.goldens if of_golden(golden_kind(n)).per_runtime}
    for name, (new, superseded) in goldens.items():
        exact[name] = [new, *(f for f in exact[name] if superseded is None or f.resolve() != superseded.resolve())]
    update: dict[str, dict] = {}
    for name, c in desc.cases.items():
        if c.calibration is None:
            continue
        listed = [r.path for r in b.calibration_records(name, c) if r.path is not None]
        if name in records:
            listed = [records[name], *(f for f in listed if class_of(f) != class_of(records[name]))]
        used = {load_record(f).sha256 for f in listed}
        kept = [f for f in b.power_files(name, c) if named_calibration(read_power(f), paths.display(f)) in used]
        measured = [power[name]] if name in power else []
        update[name] = {"calibration": [str(f.resolve()) for f in listed],
                        "power": [str(f.resolve()) for f in [*measured, *kept]] or None}
    doc = desc.doc.model_copy(update={
        "goldens": {**desc.doc.goldens, **{n: [str(f.resolve()) for f in files] for n, files in exact.items()}}})
    cases = {name: c.model_copy(update=update[name]) if name in update else c for name, c in desc.cases.items()}
    return LoadedDescriptor(desc.path, desc.text, doc, cases, desc.host, lineage_applied=True)


def _validate(path: Path, shown: str, text: str, raw: dict) -> LoadedDescriptor:
    try:
        doc = Descriptor.model_validate(raw)
    except ValidationError as exc:
        raise BadInput(_format_error(shown, text, exc, ())) from None
    cases: dict[str, CaseBase] = {}
    for name, entry in doc.cases.items():
        loc = ("cases", name)
        if not CASE_NAME.match(name):
            raise BadInput(f"{shown}:{_locate(text, loc)}: case name {name!r} must match {CASE_NAME.pattern}")
        if len(name) > MAX_NAME:
            raise BadInput(f"{shown}:{_locate(text, loc)}: case name {name[:24]}... is {len(name)} characters long, "
                           f"more than {MAX_NAME}: the files a run keeps of a case are named after it, and a file "
                           "system allows 255 bytes a name")
        backend = entry.get("backend")
        if backend not in case_schemas():
            raise BadInput(f"{shown}:{_locate(text, (*loc, 'backend'))}: cases.{name}.backend: "
                           f"unknown backend {backend!r} (registered: {', '.join(case_schemas())})")
        try:
            cases[name] = case_schemas()[backend].model_validate(entry)
        except ValidationError as exc:
            raise BadInput(_format_error(shown, text, exc, loc, case_schemas()[backend])) from None
        _check_reference(shown, text, doc, name, entry, cases[name])
    _check_calibrations(shown, text, cases)
    _check_goldens(shown, text, doc)
    _check_releases(shown, text, doc)
    warn_code_settings(lambda *loc: f"{shown}:{_locate(text, loc)}", doc, cases)
    loaded = LoadedDescriptor(path.resolve(), text, doc, cases)
    loaded.check_cases()
    return loaded


def _check_reference(shown: str, text: str, doc: Descriptor, name: str, entry: dict, case: CaseBase) -> None:
    """A case is judged against a [goldens] entry or an in-kernel reference, one of the two; a reference's
    model is a [models] entry and its options are valid options of the case's backend."""
    loc = ("cases", name)
    if (case.golden is None) == (case.reference is None):
        what = "names both" if case.golden is not None else "names neither"
        raise BadInput(f"{shown}:{_locate(text, loc)}: cases.{name}: {what} a `golden` and a `reference`; "
                       "a case is judged against one of them")
    ref = case.reference
    if ref is None:
        return
    where = f"{shown}:{_locate(text, (*loc, 'reference'))}: cases.{name}.reference"
    if ref.model is not None and ref.model not in doc.models:
        raise BadInput(f"{where}: no [models] entry {ref.model!r} (have: {', '.join(doc.models) or 'none'})")
    if case.bound is not None or case.bucket_bounds or case.calibration:
        raise BadInput(f"{where}: a reference is compared bit for bit; the case can have no bound or calibration")
    try:
        case_schemas()[case.backend].model_validate({**entry, **ref.options, "reference": None,
                                                     "golden": GoldenMode.EXACT})
    except ValidationError as exc:
        raise BadInput(_format_error(shown, text, exc, (*loc, "reference"), case_schemas()[case.backend])) from None


def _check_calibrations(shown: str, text: str, cases: dict[str, CaseBase]) -> None:
    """A calibration names at least one record: an empty one would leave a semantic case with no bound at all
    (neither hand-set nor measured), which passes everything."""
    for name, case in cases.items():
        given = case.calibration
        if given is None:
            continue
        where = f"{shown}:{_locate(text, ('cases', name, 'calibration'))}: cases.{name}.calibration"
        if given == []:
            raise BadInput(f"{where}: an empty list; name a record, or one per class of hardware")
        if any(not f.strip() for f in ([given] if isinstance(given, str) else given)):
            raise BadInput(f"{where}: an empty path names no record; name a calibration record "
                           "(calibrations/<sha256>.json, relative to the descriptor)")


def _check_goldens(shown: str, text: str, doc: Descriptor) -> None:
    """A list of files is for exact goldens only (one per runtime); a semantic golden holds on any."""
    for name, files in doc.goldens.items():
        if isinstance(files, str):
            continue
        where = f"{shown}:{_locate(text, ('goldens', name))}: goldens.{name}"
        if not of_golden(golden_kind(name)).per_runtime:
            raise BadInput(f"{where}: a {golden_kind(name)} golden is one file, not a list "
                           "(only an exact entry names one golden per runtime)")
        if not files:
            raise BadInput(f"{where}: the list names no golden file")


# The case keys a release may override besides its engine's options: a slower build may need longer.
RELEASE_MAY_SET = frozenset({"timeout_s"})
# Case keys that are not how a case is judged, yet are not a release's either: the release names its
# own kernel, and the executor takes resources and retries from the case, so a release's would be ignored.
_NOT_JUDGMENT = frozenset({"kernel", "resources", "retries"})


def _check_releases(shown: str, text: str, doc: Descriptor) -> None:
    """Every release has a plain name (a control runs it in a folder of that name), names known backends, and
    its options are valid for every case they apply to."""
    for rname, rel in doc.releases.items():
        problem = paths.plain_name_problem(rname)
        if problem:
            raise BadInput(f"{shown}:{_locate(text, ('releases', rname))}: release name {rname!r} is not a plain "
                           f"name for a folder: {problem}")
        for backend, built in rel.backends.items():
            loc = ("releases", rname, "backends", backend)
            if backend not in case_schemas():
                raise BadInput(f"{shown}:{_locate(text, loc)}: {'.'.join(loc)}: "
                               f"unknown backend {backend!r} (registered: {', '.join(case_schemas())})")
            _check_release_option_keys(shown, text, loc, built.options)
            for cname, entry in doc.cases.items():
                if entry.get("backend") != backend or not built.options:
                    continue
                try:
                    case_schemas()[backend].model_validate({**entry, **built.options})
                except ValidationError as exc:
                    err = exc.errors()[0]
                    key = ".".join((*loc, "options", *map(str, err["loc"])))
                    raise BadInput(f"{shown}:{_locate(text, (*loc, 'options'))}: {key}: {err['msg']} "
                                   f"(for case {cname})") from None


def _check_release_option_keys(shown: str, text: str, loc: tuple, options: dict) -> None:
    """A release changes how its engine runs, never how its cases are judged. Its options merge over the
    cases' own, so a `prompts`, `bound` or `drift` there would judge the candidate on other terms than
    today's pin (two prompts, no drift test) and a control would still call it qualified."""
    for key in options:
        engine_option = key not in CaseBase.model_fields and key != "backend"
        if engine_option or key in RELEASE_MAY_SET:
            continue
        where = f"{shown}:{_locate(text, (*loc, 'options', key))}: {'.'.join((*loc, 'options', key))}"
        if key in _NOT_JUDGMENT or key == "backend":
            raise BadInput(f"{where}: not an engine option of {loc[-1]}; a release sets its engine's options "
                           f"(and timeout_s), and {key} is the case's own")
        raise BadInput(f"{where}: a release may change how the engine runs, never how its cases are judged; "
                       f"{key} is a case key (set it on the case, where it holds for every release)")


def _format_error(shown: str, text: str, exc: ValidationError, prefix: tuple,
                  schema: type[BaseModel] = Descriptor) -> str:
    loc, what = _problem(exc, prefix, schema)
    return f"{shown}:{_locate(text, loc)}: {what}"


def checked_options(backend: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` held to ``backend``'s options schema as a descriptor's case options are (a notebook's option
    parameters, kit.gate.preflight): their validated values, or BadInput in the descriptor's words for the first key
    that fails, without a file or line (the caller says where the options came from)."""
    schema = options_schema(backend)
    try:
        return schema.model_validate(dict(options)).model_dump()
    except ValidationError as exc:
        raise BadInput(_problem(exc, (), schema)[1]) from None


def _problem(exc: ValidationError, prefix: tuple, schema: type[BaseModel]) -> tuple[tuple, str]:
    """The first error of a validation (its location, and ``key: what`` in words)."""
    # A misspelt key also makes its correct spelling "missing": report the typo first.
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    err = errors[0]
    loc = (*prefix, *(str(p) for p in err["loc"]))
    key = ".".join(loc) or "(top level)"
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(schema, err["loc"][:-1])
        what = f"unknown key (expected one of: {', '.join(allowed)})" if allowed else "unknown key"
    elif err["type"] == "missing":
        what = "missing required key"
    elif err["type"] == "value_error":  # a validator's own message already names the value
        what = err["msg"].removeprefix("Value error, ")
    else:
        msg = err["msg"][0].lower() + err["msg"][1:]
        what = f"{msg.replace('input should be', 'expected')}, got {err.get('input')!r}"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return loc, f"{key}: {what}{more}"


def _allowed_keys(schema: type[BaseModel], loc: tuple) -> list[str]:
    """The keys the schema accepts at a location, to suggest the right spelling."""
    model = schema
    for part in loc:
        field = model.model_fields.get(str(part))
        ann = getattr(field, "annotation", None)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        else:
            return []
    return list(model.model_fields)


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*((?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=")


def _split_key(key: str) -> tuple[str, ...]:
    parts = re.findall(r"\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_-]+)", key)
    return tuple(a or b or c for a, b, c in parts)


def _locate(text: str, loc: tuple) -> int:
    """The line of the deepest key along ``loc`` (tables and dotted keys); 1 if none is found."""
    return _line_of(_key_lines(text), loc)


def _key_lines(text: str) -> dict[tuple, int]:
    """The line each table and key of a TOML text is first given on."""
    lines: dict[tuple, int] = {}
    table: tuple = ()
    for n, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            continue
        m = _HEADER.match(line)
        if m:
            table = _split_key(m.group(1))
            lines.setdefault(table, n)
            continue
        m = _KEY.match(line)
        if m:
            lines.setdefault((*table, *_split_key(m.group(1))), n)
    return lines


def _line_of(lines: dict[tuple, int], loc: tuple) -> int:
    loc = tuple(str(p) for p in loc)
    for depth in range(len(loc), 0, -1):
        if loc[:depth] in lines:
            return lines[loc[:depth]]
    return 1
