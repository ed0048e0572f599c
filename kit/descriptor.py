"""The descriptor: a TOML file naming the model, fixture, goldens and gate cases.

Validated with pydantic; every error is one line ``file:line: key: what was expected``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kit import paths
from kit.errors import BadInput
from kit.spec import CaseSpec

CASE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


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


class CaseBase(_Strict):
    golden: Literal["semantic", "exact"]
    bound: float | None = Field(default=None, gt=0, le=1)
    bucket_bounds: dict[str, float] = Field(default_factory=dict)
    buckets: list[int] | None = None
    prompts: list[str] | None = None
    kernel: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    top_n: int | None = Field(default=None, ge=1)
    notebook: str | None = None
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
    attn_implementation: Literal["eager", "sdpa"] = "sdpa"
    device: str = "cpu"
    threads: int = Field(default=1, ge=1)


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
CASE_SCHEMAS: dict[str, type[CaseBase]] = {"hf": HfCase, "vllm": VllmCase}


class Descriptor(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    description: str = ""
    model: ModelRef
    fixture: FixtureRef
    goldens: dict[Literal["semantic", "exact"], str]
    defaults: Defaults = Defaults()
    cases: dict[str, dict[str, Any]] = Field(min_length=1)


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

    def case_specs(self, only: list[str] | None = None) -> list[CaseSpec]:
        d = self.doc.defaults
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
            if c.golden == "semantic" and c.bound is None:
                raise BadInput(f"{self.where('cases', name)}: cases.{name}: a semantic golden needs a `bound`")
            if c.exact_repeats and c.repeats == 1 and c.repeat_launches == 1:
                raise BadInput(f"{self.where('cases', name, 'exact_repeats')}: cases.{name}.exact_repeats: "
                               "nothing is repeated; set `repeats` or `repeat_launches` above 1")
            notebook = self.resolve(c.notebook) if c.notebook else paths.backend_notebook(c.backend)
            specs.append(CaseSpec(
                name=name, backend=c.backend, kernel=c.kernel or d.kernel, notebook=str(notebook),
                timeout_s=c.timeout_s or d.timeout_s, model_path=str(self.resolve(self.doc.model.path)),
                model_digest=self.doc.model.digest, fixture_path=str(self.resolve(self.doc.fixture.path)),
                golden_path=str(self.resolve(self.doc.goldens[c.golden])), golden_kind=c.golden,
                bound=c.bound, top_n=c.top_n or d.top_n, descriptor=str(self.path),
                bucket_bounds=dict(c.bucket_bounds), buckets=c.buckets, prompt_ids=c.prompts,
                options=c.backend_options(), repeats=c.repeats, repeat_launches=c.repeat_launches,
                repeat_prompts=c.repeat_prompts, exact_repeats=c.exact_repeats,
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
    return LoadedDescriptor(path.resolve(), text, doc, cases)


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
