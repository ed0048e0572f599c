"""Make a golden: score every fixture case with a backend that makes goldens (the reference, hf, by default)
and record how."""

from __future__ import annotations

import logging
import multiprocessing
import os
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from kit.backends import registry
from kit.backends.base import can_decode
from kit.core.records import paths
from kit.core.verdict.decode import check_continuations_fit
from kit.core.errors import BadInput, Unrunnable
from kit.core.model.tokenizer import verify_fixture
from kit.core.records.fixture import Fixture
from kit.core.baselines.golden import golden_document, golden_filename, provenance, write_golden
from kit.core.model.modelconfig import check_prompts_fit, check_top_k_fits, model_limits
from kit.core.model.modeldigest import model_digest
from kit.core.host.runtime import runtime_slug
from kit.core.records.spec import CaseSpec
from kit.core.records.text import printable
from kit.run import output
from kit.run.stopping import stop_words
from kit.core.host.portable import SAFE_MARGIN
from kit.core.records.records import GoldenMode

logger = logging.getLogger(__name__)

# `golden make`'s flags a backend's remake line may hold (BackendInfo.remake_flags), by make_golden's keywords.
FLAG_KEYWORDS = {"--backend": "backend", "--dtype": "dtype", "--attn-implementation": "attn_implementation",
                 "--device": "device", "--cpu-kernels": "cpu_kernels", "--checkpoint": "checkpoint",
                 "--batch-size": "batch_size", "--decode": "decode"}
WHOLE_NUMBERS = ("batch_size", "decode")


@dataclass(frozen=True)
class GoldenRequest:
    """A golden asked for: the model and the fixture it scores, its kind and top-k, the command its provenance
    keeps, and how to score (the options of `parity-kit golden make`: dtype, attention, backend, checkpoint format,
    device, batch size, decode steps, CPU kernels)."""

    model: str | Path
    fixture_path: str | Path
    kind: str
    top_k: int
    command: Sequence[str]
    dtype: str = "float32"
    attn_implementation: str = "sdpa"
    backend: str = registry.REFERENCE
    checkpoint: str = "hf"
    device: str = "cpu"
    batch_size: int = 1
    decode: int = 0
    cpu_kernels: str = "native"


def make_golden(out: str | Path, asked: GoldenRequest) -> Path:
    """`parity-kit golden make`: the golden written into the folder ``out`` under the name that says what it is
    (never over an existing one). A folder that cannot take it, or a negative ``decode``, is refused before the
    fixture is scored, not after."""
    paths.check_dir_target(out, "--out")
    if asked.decode < 0:
        raise BadInput(f"--decode {asked.decode}: a continuation is 0 (none) or more steps")
    doc, fixture = make_golden_document(asked)
    kind, model, decode = asked.kind, asked.model, asked.decode
    # An exact golden holds on one runtime: its name says which, beside those made on others.
    runtime = runtime_slug(doc["provenance"].get("runtime", "")) if kind == GoldenMode.EXACT else None
    name = golden_filename(fixture, Path(model).resolve().name, doc["model_digest"], kind, runtime, decode)
    return write_golden(Path(out) / name, doc)


def make_golden_document(asked: GoldenRequest) -> tuple[dict, Fixture]:
    """The golden document and the fixture it was made for (the fixture is verified first).
    The reference makes the semantic goldens; a native backend (levanter) makes its own exact golden, each
    through its own runtime with the options it takes from these (its ``golden_options``). With ``decode``
    the backend also continues every prompt that many greedy steps through its own decode path: a format-2
    golden whose continuations decode checks compare with."""
    model, fixture_path, kind, top_k = asked.model, asked.fixture_path, asked.kind, asked.top_k
    command, dtype, attn_implementation = asked.command, asked.dtype, asked.attn_implementation
    backend, checkpoint, device, batch_size = asked.backend, asked.checkpoint, asked.device, asked.batch_size
    decode, cpu_kernels = asked.decode, asked.cpu_kernels
    info = registry.get(backend)
    options = info.golden_case_options(request(dtype, attn_implementation, checkpoint, device, batch_size,
                                               cpu_kernels))
    fixture = verify_fixture(fixture_path, model)
    limits = model_limits(model)  # before any engine starts: a prompt it cannot take, a top_k beyond its vocabulary
    check_prompts_fit(((c.id, c.n_tokens) for c in fixture.prompts), limits, model, f"fixture {fixture_path}: ")
    check_top_k_fits(top_k, limits, model)
    if decode:
        check_continuations_fit(((c.id, c.n_tokens) for c in fixture.prompts), decode, limits, str(model),
                                f"fixture {fixture_path}: ")
    digest = model_digest(model)
    engine = info.open(golden_spec(info, str(model), digest, fixture_path, kind, top_k, options))
    try:
        observations = engine.observe(fixture.prompts, top_k)
        continuations = None
        if decode:
            if not can_decode(engine):
                raise BadInput(f"--decode: backend {backend} has no decode path to continue the prompts with")
            continuations = engine.decode(fixture.prompts, decode, top_k)
        release = engine.release()
        # How it scored, as the engine reports it (a backend choosing attention per bucket says so only now).
        dtype = str(release.get("dtype", dtype))
        attention = engine.details().get("attention", attn_implementation)
    finally:
        engine.close()
    # What decided the bits, computed where they were made: an exact golden holds only where this key is equal.
    runtime = info.runtime_key(options) if kind == GoldenMode.EXACT else None
    warn_thin_margin(release.get("portable_margin"))
    prov = provenance(backend, release, dtype, attention, list(command), runtime)
    return golden_document(kind, fixture, digest, top_k, observations, prov, continuations, decode), fixture


def warn_thin_margin(margin: dict | None) -> None:
    """Say so where a float64 result lies so close to a float32 rounding boundary that another host's float64
    differences could move a bit (kit.core.host.portable): the golden is still written, since the chance is small
    and the maker cannot move the model's values, but its promise to hold everywhere is weaker than usual."""
    if margin and margin["holds_within"] < SAFE_MARGIN:
        logger.warning("a value lies %.3g from a float32 rounding boundary (or half a ranking gap), under %g: "
                       "another host's float64 differences could move one of its bits (docs/exact-baselines.md)",
                       margin["holds_within"], SAFE_MARGIN)


def request(dtype: str, attn_implementation: str, checkpoint: str, device: str, batch_size: int,
            cpu_kernels: str) -> dict:
    """The command line's options of how to score, by the names of the case options they stand for; each
    backend's ``golden_options`` takes those that apply to it."""
    return {"dtype": dtype, "attn_implementation": attn_implementation, "checkpoint": checkpoint, "device": device,
            "batch_size": batch_size, "cpu_kernels": cpu_kernels}


def golden_spec(info, model: str, digest: str, fixture_path: str | Path, kind: str, top_k: int,
                options: dict) -> CaseSpec:
    """The case a golden is made as: the backend's runtime opens it like any case of its own."""
    return CaseSpec(name=f"golden-{info.name}", backend=info.name, kernel=info.kernel, notebook=info.notebook,
                    timeout_s=0.0, model_path=model, model_digest=digest, fixture_path=str(fixture_path),
                    golden_path="", golden_kind=kind, bound=None, top_n=top_k, descriptor="", options=options)


@dataclass(frozen=True)
class MadeGolden:
    """What ``make_golden_apart`` made: the golden's path, or (``path`` None) the one line saying why not, as
    `parity-kit golden make` would have ended with it."""
    path: Path | None
    error: str | None = None


def flag_keywords(flags: Sequence[str]) -> dict[str, Any]:
    """``make_golden``'s keywords for `golden make` flags (a backend's remake line: ``--dtype bfloat16 ...``)."""
    pairs = list(zip(flags[::2], flags[1::2]))
    unknown = [f for f, _ in pairs if f not in FLAG_KEYWORDS]
    if len(flags) % 2 or unknown:
        raise BadInput(f"golden make flags {' '.join(flags)!r}: not pairs of {', '.join(FLAG_KEYWORDS)}")
    keywords: dict[str, Any] = {FLAG_KEYWORDS[f]: v for f, v in pairs}
    for key in WHOLE_NUMBERS:
        if key in keywords:
            keywords[key] = int(keywords[key])
    return keywords


def make_golden_apart(out: str | Path, model: str | Path, fixture_path: str | Path, kind: str, top_k: int,
                      command: Sequence[str], log_path: str | Path, **keywords: Any) -> MadeGolden:
    """``make_golden`` called in a fresh Python process of its own, its output (and any traceback) appended to
    ``log_path``; never raises for a golden that could not be made (``MadeGolden.error`` says why), only for an
    interruption of this process (the maker is ended first).

    Why a process and not a plain call: a golden holds on the runtime that made it, and that runtime is the
    process's. The CPU-kernel pin (``--cpu-kernels avx2``, kit.backends.hf.kernels) must be in the environment
    before torch is imported, which it cannot be in a process that has imported torch already (a calibration
    or a second golden of the same make); the engine's threads, memory and global state (torch's thread count,
    deterministic flags, an allocator's cache) must not leak into the next golden or into the command's own
    process; and a maker that crashes (out of memory, a native abort) must end one golden, not the command."""
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no torch, no threads inherited
    receive, send = context.Pipe(duplex=False)
    maker = context.Process(target=_make_in_child, name="golden-make", daemon=True,
                            args=(send, str(log_path), (str(out), str(model), str(fixture_path), kind, top_k,
                                                        list(command)), keywords))
    maker.start()
    send.close()  # the child holds the only sending end: its exit without an answer reads as EOF here
    try:
        try:
            path, error = receive.recv()
        except EOFError:
            path, error = None, _last_line(log_path)  # it died: its last words, as the command's would be
    finally:
        if maker.is_alive():
            maker.terminate()  # interrupted here: the maker must not outlive the command
        maker.join()
        receive.close()
    return MadeGolden(Path(path), None) if path else MadeGolden(None, error)


def _make_in_child(send, log_path: str, args: tuple, keywords: dict[str, Any]) -> None:
    """The maker's process: ``make_golden`` with its output in ``log_path``; its answer (path, error) on ``send``."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    output.setup(output.QUIET)
    try:
        answer: tuple[str | None, str | None] = (str(make_golden(args[0], GoldenRequest(*args[1:], **keywords))),
                                                  None)
    except BadInput as exc:
        answer = None, f"parity-kit: bad input: {printable(str(exc))}"
    except Unrunnable as exc:
        answer = None, f"parity-kit: cannot run: {printable(str(exc))}"
    except KeyboardInterrupt as exc:
        answer = None, f"parity-kit: {stop_words(exc)}"
    except Exception as exc:
        traceback.print_exc()
        answer = None, printable(f"parity-kit: internal error: {type(exc).__name__}: {exc}".splitlines()[0])
    send.send(answer)
    send.close()


def _last_line(path: str | Path) -> str:
    try:
        lines = [line for line in Path(path).read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    return lines[-1] if lines else "no output"
