"""The model digest: the pinned format, parallel hashing, the run's stat-keyed cache, and links."""

from __future__ import annotations

import hashlib
import json
import os
import tomllib

import pytest

from kit.core.model import modeldigest
from kit.core.records.contract import MODEL_DIGEST_CACHE_ENV
from kit.core.errors import BadInput
from kit.core.model.modeldigest import DigestCache, check_model_digest, model_digest
from support import ROOT


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def folder_digest(lines: list[tuple[str, bytes]]) -> str:
    """docs/architecture.md's model digest, written out: the lines in the order given."""
    return sha(b"".join(f"{rel}\0{sha(data)}\n".encode() for rel, data in lines))


def write(folder, files: dict[str, bytes]):
    for rel, data in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder


@pytest.fixture
def reads(monkeypatch):
    """Every file the digest reads, in order."""
    seen: list[str] = []
    real = modeldigest.hash_file

    def counting(path):
        seen.append(os.path.basename(path))
        return real(path)

    monkeypatch.setattr(modeldigest, "hash_file", counting)
    return seen


@pytest.fixture
def settled(monkeypatch):
    """Files written by the test count as settled at once (the racy window is a model's, not a test's)."""
    monkeypatch.setattr(modeldigest, "RACY_NS", 0)


def test_pinned_digests_of_the_committed_models_are_unchanged():
    desc = tomllib.loads((ROOT / "descriptors" / "tiny-cpu.toml").read_text())
    for ref in (desc["model"], desc["models"]["tiny-llama-levanter"]):
        folder = (ROOT / "descriptors" / ref["path"]).resolve()
        assert model_digest(folder, workers=1) == ref["digest"], folder
        assert model_digest(folder, workers=4) == ref["digest"], folder


def test_lines_are_ordered_by_path_components(tmp_path):
    # "a/b" before "a.txt": components compare "a" < "a.txt", though "/" sorts after "." as a character.
    write(tmp_path, {"a.txt": b"x", "a/b": b"y", ".hidden": b"z"})
    assert model_digest(tmp_path) == folder_digest([(".hidden", b"z"), ("a/b", b"y"), ("a.txt", b"x")])


def test_parallel_equals_serial_and_large_files_are_read_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(modeldigest, "CHUNK", 1000)  # many reads per file, cheaply
    files = {f"shard-{i}.bin": os.urandom(10_000 + 37 * i) for i in range(6)} | {"sub/config.json": b"{}"}
    write(tmp_path, files)
    assert modeldigest.hash_file(tmp_path / "shard-3.bin") == sha(files["shard-3.bin"])
    expected = folder_digest(sorted(files.items(), key=lambda kv: kv[0].split("/")))
    assert model_digest(tmp_path, workers=1) == expected
    assert model_digest(tmp_path, workers=4) == expected


def test_the_cache_spares_every_read_until_a_file_changes(tmp_path, monkeypatch, reads, settled):
    model = write(tmp_path / "model", {"a.bin": b"a" * 100, "b.bin": b"b" * 100, "c/d.json": b"{}"})
    cache = DigestCache()  # the executor's preflight
    digest = model_digest(model, cache=cache)
    assert sorted(reads) == ["a.bin", "b.bin", "d.json"]
    cache.save(tmp_path / "model-digests.json")
    monkeypatch.setenv(MODEL_DIGEST_CACHE_ENV, str(tmp_path / "model-digests.json"))

    reads.clear()
    assert check_model_digest(model, digest, "case x") == digest  # a kernel: the executor's cache, from the env
    assert reads == []

    os.utime(model / "b.bin", ns=(0, 1_000_000_000))  # touched: same bytes, another mtime
    assert check_model_digest(model, digest, "case x") == digest
    assert reads == ["b.bin"]

    reads.clear()
    (model / "a.bin").write_bytes(b"A" * 100)  # same size, other bytes
    with pytest.raises(BadInput) as refused:
        check_model_digest(model, digest, "case x")
    assert sorted(reads) == ["a.bin", "b.bin"]  # b's entry still holds its old mtime: kernels never write the cache
    now = model_digest(model)
    assert str(refused.value) == (f"case x: model folder {model} has digest {now[:16]}..., but {digest[:16]}... "
                                  f"is pinned (full: {now} != {digest})")


def test_the_cache_holds_nothing_for_another_host_or_when_unreadable(tmp_path, reads, settled):
    model = write(tmp_path / "model", {"w.bin": b"w"})
    cache, path = DigestCache(), tmp_path / "model-digests.json"
    model_digest(model, cache=cache)
    cache.save(path)
    doc = json.loads(path.read_text())
    doc["hosts"] = {"elsewhere": doc["hosts"][cache.host]}
    path.write_text(json.dumps(doc))
    reads.clear()
    model_digest(model, cache=DigestCache.load(path))
    assert reads == ["w.bin"]
    path.write_text("{not json")
    assert DigestCache.load(path).entries == {}
    assert DigestCache.load(tmp_path / "missing.json").entries == {}


def test_a_file_changed_just_now_is_not_cached(tmp_path):
    model = write(tmp_path / "model", {"w.bin": b"w"})  # its ctime is within RACY_NS of the look
    cache = DigestCache()
    model_digest(model, cache=cache)
    assert cache.entries == {}


def levanter_folder(tmp_path):
    """A Levanter checkpoint whose model/ links to weights kept elsewhere."""
    store = write(tmp_path / "store" / "weights", {"layer/0.0": b"\x01" * 64, "layer/.zarray": b"{}"})
    model = write(tmp_path / "ckpt", {"metadata.json": b"{}"})
    (model / "model").symlink_to(store, target_is_directory=True)
    return model, store


def test_a_linked_folder_counts_with_its_targets_bytes(tmp_path):
    model, store = levanter_folder(tmp_path)
    expected = folder_digest([("metadata.json", b"{}"), ("model/layer/.zarray", b"{}"),
                              ("model/layer/0.0", b"\x01" * 64)])
    assert model_digest(model) == expected
    (store / "layer" / "0.0").write_bytes(b"\x02" * 64)  # corrupt weights behind the link
    assert model_digest(model) != expected


def test_a_linked_file_counts_under_its_name_in_the_folder(tmp_path):
    write(tmp_path / "blobs", {"9f2c": b"weights"})
    model = write(tmp_path / "model", {"config.json": b"{}"})
    (model / "model.safetensors").symlink_to(tmp_path / "blobs" / "9f2c")
    assert model_digest(model) == folder_digest([("config.json", b"{}"), ("model.safetensors", b"weights")])


def test_a_dangling_link_is_refused(tmp_path):
    model, store = levanter_folder(tmp_path)
    store.rename(tmp_path / "moved")
    with pytest.raises(BadInput) as refused:
        model_digest(model)
    assert str(refused.value) == (f"model folder {model}: link model -> {store} is dangling: "
                                  "its target does not exist")


def test_a_folder_link_loop_is_refused(tmp_path):
    model, store = levanter_folder(tmp_path)
    (store / "layer" / "up").symlink_to("..", target_is_directory=True)  # back to model/, which holds it
    with pytest.raises(BadInput) as refused:
        model_digest(model)
    assert str(refused.value) == (f"model folder {model}: link model/layer/up -> .. is a loop: "
                                  "it leads back to a folder that contains it")


def test_a_link_cycle_is_refused(tmp_path):
    model = write(tmp_path / "model", {"config.json": b"{}"})
    (model / "a").symlink_to("b")
    (model / "b").symlink_to("a")
    with pytest.raises(BadInput) as refused:
        model_digest(model)
    assert str(refused.value) == f"model folder {model}: link a -> b is a loop: it links back to itself"


def test_an_unreadable_file_or_folder_is_refused(tmp_path, monkeypatch):
    model = write(tmp_path / "model", {"w.bin": b"w", "sub/x": b"x"})

    def unreadable(path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(modeldigest, "hash_file", unreadable)
    with pytest.raises(BadInput) as refused:
        model_digest(model, workers=1)
    assert str(refused.value) == f"model folder {model}: cannot read {model / 'sub' / 'x'}: Permission denied"
    monkeypatch.setattr(modeldigest.os, "scandir", unreadable)
    with pytest.raises(BadInput) as refused:
        model_digest(model)
    assert str(refused.value) == f"model folder {model}: cannot list .: Permission denied"
