"""A minimal reader and writer of the safetensors format, with numpy only.

Written here rather than taken from the `safetensors` package for two reasons:
the generated GPU model must be byte-identical wherever it is built (its digest
is pinned in a descriptor, and the package's header layout is an implementation
detail that may change between versions), and the jax backend must read bfloat16
tensors into numpy, which the package's numpy loader does not promise.

Format: an 8-byte little-endian header length, a JSON header mapping each tensor
name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets relative to
the end of the header), then the tensors' bytes, row-major, little-endian.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import BinaryIO, Callable, Iterable

import numpy as np

_ALIGN = 8  # the header is padded with spaces so that tensor data starts 8-byte aligned
_SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4}


def _dtypes() -> dict[str, np.dtype]:
    import ml_dtypes  # ships with jax; numpy itself has no bfloat16

    return {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype(ml_dtypes.bfloat16),
            "I64": np.dtype("<i8"), "I32": np.dtype("<i4")}


def header_bytes(entries: Iterable[tuple[str, str, tuple[int, ...]]], metadata: dict | None = None) -> bytes:
    """The header for tensors ``(name, dtype, shape)`` laid out in the given order."""
    header: dict = {}
    offset = 0
    for name, dtype, shape in entries:
        n = nbytes(shape, dtype)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    if metadata:
        header["__metadata__"] = metadata
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-(len(raw) + 8) % _ALIGN)
    return struct.pack("<Q", len(raw)) + raw


def write_tensors(out: BinaryIO, tensors: Iterable[tuple[str, str, tuple[int, ...], Callable[[], bytes]]],
                  metadata: dict | None = None) -> None:
    """Stream tensors to ``out``: each is ``(name, dtype, shape, make)`` and ``make()`` returns
    its bytes when it is its turn, so that only one tensor is in memory at a time."""
    tensors = list(tensors)
    out.write(header_bytes([(n, d, s) for n, d, s, _ in tensors], metadata))
    for name, dtype, shape, make in tensors:
        data = make()
        expected = nbytes(shape, dtype)
        if len(data) != expected:
            raise ValueError(f"tensor {name}: {len(data)} bytes, expected {expected}")
        out.write(data)


def nbytes(shape: tuple[int, ...], dtype: str) -> int:
    """The byte size of a tensor of ``shape`` in ``dtype``, counted in 64 bits so that a large tensor cannot
    overflow the count."""
    return _SIZES[dtype] * int(np.prod(shape, dtype=np.int64))


def read_tensors(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as a numpy array (memory-mapped, read-only)."""
    path = Path(path)
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    dtypes = _dtypes()
    out = {}
    for name, entry in header.items():
        if entry["dtype"] not in dtypes:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {entry['dtype']}")
        begin, end = entry["data_offsets"]
        out[name] = data[begin:end].view(dtypes[entry["dtype"]]).reshape(entry["shape"])
    return out
