"""The descriptor: a TOML file naming the model, fixture, goldens and gate cases.

Validated with pydantic; every error is one line ``file:line: key: what was expected``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kit import paths
from kit.errors import BadInput
from kit.spec import CaseSpec

CASE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# A [goldens] entry is named after its kind ("semantic", "exact") or ends in it ("levanter-exact"),
# so that a reader of a case knows how it is judged without opening the golden.
GOLDEN_NAME = r"^(semantic|exact|[a-z0-9][a-z0-9._-]*-(semantic|exact))$"


def golden_kind(name: str) -> str:
    return name.rsplit("-", 1)[-1]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ModelRef(_Strict):
    path: str
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")


class FixtureRef(_Strict):
    path: str


class Defaults(_Strict):
    kernel: str = paths.MAIN_KERNEL
    timeout_s: float = Field(default=600.0, gt=0)
    top_n: int = Field(default=64, ge=1)
    # How often the Ray executor reruns a case whose worker or node died under it.
    retries: int = Field(default=1, ge=0)


class Resources(_Strict):
    """What one case asks of the Ray executor, per node; the local executor needs none of it."""

    nodes: int = Field(default=1, ge=1)  # > 1: one placement group, one bundle per node (a gang)
    num_cpus: float = Field(default=1.0, ge=0)
    num_gpus: float = Field(default=0.0, ge=0)
    accelerator_type: str | None = Field(default=None, min_length=1)  # Ray's name, e.g. "H100", "A10G"
    memory_gb: float | None = Field(default=None, gt=0)
    custom: dict[str, float] = Field(default_factory=dict)  # the cluster's own resource names
    # The longest the case may wait for its resources before it starts (a busy or shrunken
    # cluster); then it is an error instead of a wait without end. None: wait as long as it takes.
    max_wait_s: float | None = Field(default=None, gt=0)


class CaseBase(_Strict):
    golden: str  # a [goldens] entry
    model: str | None = None  # a [models] entry; the descriptor's [model] when absent
    bound: float | None = Field(default=None, gt=0, le=1)
    bucket_bounds: dict[str, float] = Field(default_factory=dict)
    buckets: list[int] | None = None
    prompts: list[str] | None = None
    kernel: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    top_n: int | None = Field(default=None, ge=1)
    notebook: str | None = None
    resources: Resources = Resources()
    retries: int | None = Field(default=None, ge=0)
    # Repeatability (DESIGN section 6): score the selected prompts `repeats` times in each of
    # `repeat_launches` engine launches; the spread is the noise floor, any spread fails with
    # `exact_repeats`.
    repeats: int = Field(default=1, ge=1)
    repeat_launches: int = Field(default=1, ge=1)
    repeat_prompts: list[str] | None = None
    exact_repeats: bool = False

    def backend_options(self) -> dict[str, Any]:
        common = set(CaseBase.model_fields) | {"backend"}
        return {k: v for k, v in self.model_dump().items() if k not in common}


class HfCase(CaseBase):
    """transformers + torch; the reference that makes the goldens."""

    backend: Literal["hf"]
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    # sdpa_repeat_kv: SDPA without torch's GQA flag, so float32 long prompts keep a memory-efficient kernel.
    attn_implementation: Literal["eager", "sdpa", "sdpa_repeat_kv"] = "sdpa"
    device: str = Field(default="cpu", pattern=r"^(cpu|cuda(:[0-9]+)?)$")
    threads: int = Field(default=1, ge=1)
    # Prompts of one bucket scored together, padded to the longest; 1 scores each prompt alone.
    batch_size: int = Field(default=1, ge=1)
    padding_side: Literal["left", "right"] = "right"
    # Which torch SDPA kernel to prefer ("auto": torch's own choice); only for attn_implementation sdpa.
    sdpa_backend: Literal["auto", "flash", "cudnn", "efficient", "math"] = "auto"
    # torch.compile each decoder layer, so the elementwise work around the matmuls (norms, rotary,
    # SiLU x up) fuses; one graph serves every layer and every prompt length.
    compile: bool = False


class JaxCase(CaseBase):
    """A plain Llama forward in JAX over the same safetensors: an independent second implementation."""

    backend: Literal["jax"]
    dtype: Literal["float32", "bfloat16"] = "float32"
    # "auto": cuDNN flash attention on a GPU in bfloat16, exact query-chunked attention in float32
    # on long prompts (cuDNN has no float32 kernel), XLA's reference attention otherwise.
    attention: Literal["auto", "xla", "cudnn", "chunked"] = "auto"
    platform: Literal["cpu", "gpu"] = "cpu"


class LevanterCase(CaseBase):
    """Levanter 1.1 (JAX), in its own kernel; an HF export or a native tensorstore checkpoint."""

    backend: Literal["levanter"]
    checkpoint: Literal["hf", "native"] = "hf"
    # bucket (tokens, as a string key) -> attention; buckets not named follow `flash_above`.
    attention: dict[str, Literal["reference", "flash"]] = Field(default_factory=dict)
    flash_above: int = Field(default=4096, ge=0)
    flash_block_size: int = Field(default=128, ge=1)
    pad_to_bucket: bool = True
    threads: int = Field(default=1, ge=1)
    device: str = "cpu"


class VllmCase(CaseBase):
    """vLLM, as the offline engine (`vllm.LLM`) or as its OpenAI-compatible server (`vllm serve`)."""

    backend: Literal["vllm"]
    mode: Literal["offline", "server"] = "offline"
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    max_model_len: int | None = Field(default=None, ge=1)
    max_logprobs: int | None = Field(default=None, ge=1)  # default: the case's top_n
    attention_backend: str | None = None
    batch_invariant: bool = False
    pipeline_parallel_size: int = Field(default=1, ge=1)
    tensor_parallel_size: int = Field(default=1, ge=1)
    distributed_executor_backend: Literal["mp", "ray", "uni"] | None = None
    enforce_eager: bool | None = None  # default: eager at pp1, compiled beyond (see kit.backends.vllm)
    cpu_kvcache_space_gib: int | None = Field(default=None, ge=1)
    cpu_threads_bind: str | None = None
    server_start_timeout_s: float = Field(default=600.0, gt=0)
    # Any other engine argument, by its Python name, for both modes (server: --name-with-dashes).
    engine_args: dict[str, str | int | float | bool] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)


# One schema per backend; a case picks its schema by its `backend` key.
CASE_SCHEMAS: dict[str, type[CaseBase]] = {"hf": HfCase, "levanter": LevanterCase, "jax": JaxCase, "vllm": VllmCase}


class BackendRelease(_Strict):
    """One backend's build within a release: the kernel (environment) that holds it and its identity."""

    kernel: str
    version: str = ""
    source_commit: str = ""
    wheels: dict[str, str] = Field(default_factory=dict)  # wheel file name -> sha256
    # Engine options this build runs with; they override the cases' own (and are validated with them).
    options: dict[str, Any] = Field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "version": self.version, "source_commit": self.source_commit,
                "wheels": dict(self.wheels), "options": dict(self.options)}


class Release(_Strict):
    """A concrete build of every backend: today's pin (`current`) or the staged one (`candidate`)."""

    description: str = ""
    backends: dict[str, BackendRelease] = Field(min_length=1)


class Descriptor(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    description: str = ""
    model: ModelRef
    fixture: FixtureRef
    models: dict[str, ModelRef] = Field(default_factory=dict)  # more model folders, named by cases
    goldens: dict[str, str]
    defaults: Defaults = Defaults()
    releases: dict[str, Release] = Field(default_factory=dict)
    cases: dict[str, dict[str, Any]] = Field(min_length=1)

    @field_validator("goldens")
    @classmethod
    def _golden_names_say_their_kind(cls, goldens: dict[str, str]) -> dict[str, str]:
        for name in goldens:
            if not re.match(GOLDEN_NAME, name):
                raise ValueError(f"entry {name!r} must be named semantic or exact, or end in -semantic or -exact")
        return goldens


class LoadedDescriptor:
    """A validated descriptor with its file, its digest and its cases' schemas applied."""

    def __init__(self, path: Path, text: str, doc: Descriptor, cases: dict[str, CaseBase]):
        self.path, self.text, self.doc, self.cases = path, text, doc, cases

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

    def model_where(self, case: CaseBase) -> str:
        """``file:line`` of the digest a case's model folder is held to."""
        if case.model is None:
            return self.where("model", "digest")
        return self.where("models", case.model, "digest")

    def resources(self, case: str) -> Resources:
        return self.cases[case].resources

    def retries(self, case: str) -> int:
        own = self.cases[case].retries
        return self.doc.defaults.retries if own is None else own

    def case_specs(self, only: list[str] | None = None, release: str | None = None) -> list[CaseSpec]:
        """The resolved cases; under a named release each backend runs in that release's kernel,
        with its engine options, and the release's identity becomes part of the case's inputs."""
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
            if golden_kind(c.golden) == "semantic" and c.bound is None:
                raise BadInput(f"{self.where('cases', name)}: cases.{name}: a semantic golden needs a `bound`")
            if c.exact_repeats and c.repeats == 1 and c.repeat_launches == 1:
                raise BadInput(f"{self.where('cases', name, 'exact_repeats')}: cases.{name}.exact_repeats: "
                               "nothing is repeated; set `repeats` or `repeat_launches` above 1")
            model = self.model_ref(name, c)
            notebook = self.resolve(c.notebook) if c.notebook else paths.backend_notebook(c.backend)
            kernel, identity = c.kernel or d.kernel, {}
            if rel is not None:
                built = rel.backends.get(c.backend)
                if built is None:
                    raise BadInput(f"{self.where('releases', release)}: release {release!r} names no "
                                   f"{c.backend} build, which case {name} needs "
                                   f"(add [releases.{release}.backends.{c.backend}])")
                c = CASE_SCHEMAS[c.backend].model_validate({**self.doc.cases[name], **built.options})
                kernel, identity = built.kernel, {"name": release, **built.identity()}
            specs.append(CaseSpec(
                name=name, backend=c.backend, kernel=kernel, notebook=str(notebook),
                timeout_s=c.timeout_s or d.timeout_s, model_path=str(self.resolve(model.path)),
                model_digest=model.digest, fixture_path=str(self.resolve(self.doc.fixture.path)),
                golden_path=str(self.resolve(self.doc.goldens[c.golden])), golden_kind=golden_kind(c.golden),
                bound=c.bound, top_n=c.top_n or d.top_n, descriptor=str(self.path),
                bucket_bounds=dict(c.bucket_bounds), buckets=c.buckets, prompt_ids=c.prompts,
                options=c.backend_options(), release=identity, repeats=c.repeats,
                repeat_launches=c.repeat_launches, repeat_prompts=c.repeat_prompts, exact_repeats=c.exact_repeats,
            ))
        return specs


def load_descriptor(path: str | Path) -> LoadedDescriptor:
    path = Path(path)
    shown = paths.display(path)
    if not path.is_file():
        raise BadInput(f"descriptor {shown} does not exist")
    text = path.read_text(encoding="utf-8")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise BadInput(f"{shown}:{m.group(1) if m else '?'}: TOML syntax error: {exc}") from None
    return _validate(path, shown, text, raw)


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
        if backend not in CASE_SCHEMAS:
            raise BadInput(f"{shown}:{_locate(text, (*loc, 'backend'))}: cases.{name}.backend: "
                           f"expected one of {', '.join(map(repr, CASE_SCHEMAS))}, got {backend!r}")
        try:
            cases[name] = CASE_SCHEMAS[backend].model_validate(entry)
        except ValidationError as exc:
            raise BadInput(_format_error(shown, text, exc, loc, CASE_SCHEMAS[backend])) from None
    _check_releases(shown, text, doc)
    return LoadedDescriptor(path.resolve(), text, doc, cases)


def _check_releases(shown: str, text: str, doc: Descriptor) -> None:
    """Every release names known backends, and its options are valid for every case they apply to."""
    for rname, rel in doc.releases.items():
        for backend, built in rel.backends.items():
            loc = ("releases", rname, "backends", backend)
            if backend not in CASE_SCHEMAS:
                raise BadInput(f"{shown}:{_locate(text, loc)}: {'.'.join(loc)}: "
                               f"expected one of {', '.join(map(repr, CASE_SCHEMAS))}, got {backend!r}")
            for cname, entry in doc.cases.items():
                if entry.get("backend") != backend or not built.options:
                    continue
                try:
                    CASE_SCHEMAS[backend].model_validate({**entry, **built.options})
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
