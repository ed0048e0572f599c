"""Loading a descriptor: TOML parsed, validated against the schema, cases resolved into CaseSpecs.

Every error is one line ``file:line: key: what was expected``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pydantic import BaseModel, ValidationError

from kit.backends import registry
from kit.core import paths
from kit.core.calibration import load_record, record_for_host
from kit.core.errors import BadInput
from kit.core.golden import choose_for_host, load_golden, remake_command
from kit.core.jsonio import read_input_bytes
from kit.core.runtime import hardware
from kit.core.spec import CaseSpec
from kit.descriptor.code_settings import warn_code_settings
from kit.descriptor.schema import (CASE_NAME, CaseBase, CustomNotebook, Descriptor, ModelRef, Release, Resources,
                                   case_schemas, golden_kind)


class LoadedDescriptor:
    """A validated descriptor with its file, its digest and its cases' schemas applied."""

    def __init__(self, path: Path, text: str, doc: Descriptor, cases: dict[str, CaseBase]):
        self.path, self.text, self.doc, self.cases = path, text, doc, cases
        self._chosen: dict[str, Path | None] = {}

    @property
    def name(self) -> str:
        return self.doc.name

    def resolve(self, relative: str) -> Path:
        return (self.path.parent / relative).resolve()

    def where(self, *loc: str) -> str:
        """``file:line`` of a key, for messages about values that parsed but are wrong."""
        return f"{paths.display(self.path)}:{_locate(self.text, loc)}"

    def release(self, name: str) -> Release:
        if name not in self.doc.releases:
            known = ", ".join(self.doc.releases) or "none"
            raise BadInput(f"{paths.display(self.path)}: no release named {name!r} "
                           f"(releases: {known}; add a [releases.{name}] table)")
        return self.doc.releases[name]

    def model_ref(self, name: str, case: CaseBase) -> ModelRef:
        if case.model is None:
            return self.doc.model
        if case.model not in self.doc.models:
            raise BadInput(f"{self.where('cases', name, 'model')}: cases.{name}.model: no [models] entry "
                           f"{case.model!r} (have: {', '.join(self.doc.models) or 'none'})")
        return self.doc.models[case.model]

    def golden_files(self, name: str) -> list[Path]:
        """Every file a [goldens] entry names, resolved: one, or for an exact entry one per runtime."""
        files = self.doc.goldens[name]
        return [self.resolve(f) for f in ([files] if isinstance(files, str) else files)]

    def host_golden(self, name: str) -> Path | None:
        """The file of a [goldens] entry that cases use on this host. A semantic entry has one; an exact
        one is chosen by runtime (bit-exact goldens hold only where they were made): the golden made on
        this host's fingerprint, else a legacy one made on its CPU model and OS; else None."""
        files = self.golden_files(name)
        if golden_kind(name) != "exact":
            return files[0]
        if name not in self._chosen:
            chosen = choose_for_host([load_golden(f) for f in files], hardware())
            self._chosen[name] = chosen.path if chosen is not None else None
        return self._chosen[name]

    def golden_path(self, name: str) -> Path:
        """The host's file of a [goldens] entry; refused when no golden of the entry holds here."""
        path = self.host_golden(name)
        if path is None:
            raise BadInput(self._no_golden_here(name))
        return path

    def _no_golden_here(self, name: str) -> str:
        goldens = [load_golden(f) for f in self.golden_files(name)]
        made_on = "; ".join(dict.fromkeys(str(g.provenance.get("hardware")) for g in goldens))
        first = goldens[0]
        model = next((m.path for m in (self.doc.model, *self.doc.models.values()) if m.digest == first.model_digest),
                     self.doc.model.path)
        command = remake_command(first, paths.display(self.resolve(model)),
                                 paths.display(self.resolve(self.doc.fixture.path)), paths.display(first.path.parent))
        info = registry.registry().get(str(first.provenance.get("backend")))
        env = (f" with the parity-kit of {info.name}'s own environment"
               if info is not None and info.kernel != paths.MAIN_KERNEL else "")
        return (f"{self.where('goldens', name)}: goldens.{name}: no exact golden holds on this host: made on "
                f"{made_on}; this host is {hardware()}; make one here with `{command}`{env} and add it to the list")

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
        return self.cases[case].resources

    def kernel(self, case: str) -> str:
        """The kernel a case runs in outside a named release."""
        own = self.cases[case]
        return own.kernel or self.doc.defaults.kernel or registry.get(own.backend).kernel

    def retries(self, case: str) -> int:
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
            if c.golden not in self.doc.goldens:
                raise BadInput(f"{self.where('cases', name, 'golden')}: cases.{name}.golden: "
                               f"no [goldens] entry {c.golden!r} (have: {', '.join(self.doc.goldens)})")
            if golden_kind(c.golden) == "semantic" and c.bound is None and c.calibration is None:
                raise BadInput(f"{self.where('cases', name)}: cases.{name}: a semantic golden needs a `bound` "
                               "or a `calibration` record")
            if c.exact_repeats and c.repeats == 1 and c.repeat_launches == 1:
                raise BadInput(f"{self.where('cases', name, 'exact_repeats')}: cases.{name}.exact_repeats: "
                               "nothing is repeated; set `repeats` or `repeat_launches` above 1")
            model = self.model_ref(name, c)
            info = registry.get(c.backend)
            if c.decode and not info.decodes:
                raise BadInput(f"{self.where('cases', name, 'decode')}: cases.{name}.decode: backend {c.backend} "
                               f"has no decode path the kit can drive (backends that decode: "
                               f"{', '.join(n for n, i in registry.registry().items() if i.decodes) or 'none'})")
            notebook = self.case_notebook(name, c) if c.notebook else paths.NOTEBOOKS / info.notebook
            kernel, identity = self.kernel(name), {}
            if rel is not None:
                built = rel.backends.get(c.backend)
                if built is None:
                    raise BadInput(f"{self.where('releases', release)}: release {release!r} names no "
                                   f"{c.backend} build, which case {name} needs "
                                   f"(add [releases.{release}.backends.{c.backend}])")
                c = case_schemas()[c.backend].model_validate({**self.doc.cases[name], **built.options})
                kernel, identity = built.kernel, {"name": release, **built.identity()}
            calibration = self.calibration(name, c) if c.calibration and resolve_calibration else None
            specs.append(CaseSpec(
                name=name, backend=c.backend, kernel=kernel, notebook=str(notebook),
                timeout_s=c.timeout_s or d.timeout_s, model_path=str(self.resolve(model.path)),
                model_digest=model.digest, fixture_path=str(self.resolve(self.doc.fixture.path)),
                golden_path=str(self.golden_path(c.golden)), golden_kind=golden_kind(c.golden),
                bound=c.bound, top_n=c.top_n or d.top_n, descriptor=str(self.path),
                bucket_bounds=calibration["bounds"] if calibration else dict(c.bucket_bounds),
                buckets=c.buckets, prompt_ids=c.prompts,
                options=c.backend_options(), release=identity, repeats=c.repeats,
                repeat_launches=c.repeat_launches, repeat_prompts=c.repeat_prompts, exact_repeats=c.exact_repeats,
                calibration=calibration, drift=c.drift, decode=c.decode or 0,
            ))
        return specs


    def calibration(self, name: str, c: CaseBase) -> dict:
        """The reference of the calibration record a case names (kit.core.calibration). Whether it fits
        the case's inputs is checked by the preflight, after the inputs themselves."""
        where = self.calibration_where(name)
        if c.bound is not None or c.bucket_bounds:
            raise BadInput(f"{where}: the case also sets {'bound' if c.bound is not None else 'bucket_bounds'}; "
                           "a bound is either hand-set or calibrated, not both")
        if golden_kind(c.golden) != "semantic":
            raise BadInput(f"{where}: an exact golden has no bound to calibrate")
        files = [c.calibration] if isinstance(c.calibration, str) else list(c.calibration)
        if not files:
            raise BadInput(f"{where}: an empty list; name a record, or one per class of hardware")
        try:
            records = [load_record(self.resolve(f)) for f in files]
        except BadInput as exc:
            raise BadInput(f"{where}: {exc}") from None
        # One record needs no choosing, and so no look at the hardware (nvidia-smi, for a GPU case).
        record = records[0] if len(records) == 1 else record_for_host(records, c.backend_options())
        return {**record.reference(), "accept": list(c.accept_noise_changes)}

    def calibration_where(self, name: str) -> str:
        return f"{self.where('cases', name, 'calibration')}: cases.{name}.calibration"


def packaged_notebook(path: str | Path) -> bool:
    """Whether ``path`` is one of the kit's own notebooks (not code a descriptor brought)."""
    return Path(path).resolve().is_relative_to(paths.NOTEBOOKS.resolve())


def load_descriptor(path: str | Path) -> LoadedDescriptor:
    path = Path(path)
    shown = paths.display(path)
    if not path.is_file():
        raise BadInput(f"descriptor {shown} does not exist")
    text = _read_text(path, shown)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise BadInput(f"{shown}:{m.group(1) if m else '?'}: TOML syntax error: {exc}") from None
    return _validate(path, shown, text, raw)


def _read_text(path: Path, shown: str) -> str:
    """The descriptor's text; TOML is UTF-8, so other bytes are refused at the line that holds them."""
    data = read_input_bytes(path, f"descriptor {shown}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BadInput(f"{shown}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x}); a TOML descriptor is UTF-8") from None


def derive(desc: LoadedDescriptor, releases: dict[str, dict] | None = None,
           case_updates: dict[str, dict] | None = None) -> LoadedDescriptor:
    """The descriptor with releases added (or replaced) and case entries amended, validated as the file
    is. It keeps the file's path, so relative paths resolve as before and manifests name the file the
    rest came from; what a refresh gates a release it just built with."""
    raw = desc.doc.model_dump()
    raw["releases"] = {**raw["releases"], **(releases or {})}
    raw["cases"] = {name: {**entry, **(case_updates or {}).get(name, {})} for name, entry in raw["cases"].items()}
    return _validate(desc.path, paths.display(desc.path), desc.text, raw)


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
        backend = entry.get("backend")
        if backend not in case_schemas():
            raise BadInput(f"{shown}:{_locate(text, (*loc, 'backend'))}: cases.{name}.backend: "
                           f"unknown backend {backend!r} (registered: {', '.join(case_schemas())})")
        try:
            cases[name] = case_schemas()[backend].model_validate(entry)
        except ValidationError as exc:
            raise BadInput(_format_error(shown, text, exc, loc, case_schemas()[backend])) from None
    _check_goldens(shown, text, doc)
    _check_releases(shown, text, doc)
    warn_code_settings(lambda *loc: f"{shown}:{_locate(text, loc)}", doc, cases)
    return LoadedDescriptor(path.resolve(), text, doc, cases)


def _check_goldens(shown: str, text: str, doc: Descriptor) -> None:
    """A list of files is for exact goldens only (one per runtime); a semantic golden holds on any."""
    for name, files in doc.goldens.items():
        if isinstance(files, str):
            continue
        where = f"{shown}:{_locate(text, ('goldens', name))}: goldens.{name}"
        if golden_kind(name) != "exact":
            raise BadInput(f"{where}: a {golden_kind(name)} golden is one file, not a list "
                           "(only an exact entry names one golden per runtime)")
        if not files:
            raise BadInput(f"{where}: the list names no golden file")


def _check_releases(shown: str, text: str, doc: Descriptor) -> None:
    """Every release names known backends, and its options are valid for every case they apply to."""
    for rname, rel in doc.releases.items():
        for backend, built in rel.backends.items():
            loc = ("releases", rname, "backends", backend)
            if backend not in case_schemas():
                raise BadInput(f"{shown}:{_locate(text, loc)}: {'.'.join(loc)}: "
                               f"unknown backend {backend!r} (registered: {', '.join(case_schemas())})")
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


def _format_error(shown: str, text: str, exc: ValidationError, prefix: tuple,
                  schema: type[BaseModel] = Descriptor) -> str:
    # A misspelt key also makes its correct spelling "missing": report the typo first.
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    err = errors[0]
    loc = (*prefix, *(str(p) for p in err["loc"]))
    key = ".".join(loc) or "(top level)"
    line = _locate(text, loc)
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
    return f"{shown}:{line}: {key}: {what}{more}"


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
    loc = tuple(str(p) for p in loc)
    for depth in range(len(loc), 0, -1):
        if loc[:depth] in lines:
            return lines[loc[:depth]]
    return 1
