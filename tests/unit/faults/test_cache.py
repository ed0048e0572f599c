"""Faulted copies are written once per (fault, magnitude, source model, catalogue code) and reused."""

from __future__ import annotations

import shutil

from kit.faults.cache import CACHE_ENV, default_cache_dir, faulted_copy
from kit.faults.catalogue import fault
from kit.faults.checkpoint import WEIGHTS, load_checkpoint


def test_a_copy_is_written_once_and_reused(embedded, tmp_path):
    f = fault("o_proj_scale")
    first = faulted_copy(f, 0.05, embedded.model, tmp_path)
    stat = (first / WEIGHTS).stat()
    again = faulted_copy(f, 0.05, embedded.model, tmp_path)
    assert again == first and (again / WEIGHTS).stat().st_mtime_ns == stat.st_mtime_ns
    assert first.name == "o_proj_scale-0.05" and first.parent.parent == tmp_path
    other = faulted_copy(f, 0.1, embedded.model, tmp_path)
    assert other.parent == first.parent and other != first
    # Nothing but finished copies is left: the staging folders are gone.
    assert sorted(p.name for p in first.parent.iterdir()) == ["o_proj_scale-0.05", "o_proj_scale-0.1"]


def test_another_source_model_gets_its_own_copies(embedded, tmp_path):
    f = fault("logit_scale")
    changed = shutil.copytree(embedded.model, tmp_path / "src" / "tiny-llama")
    c = load_checkpoint(changed)
    (changed / "config.json").write_text((changed / "config.json").read_text().replace('"rms_norm_eps": 1e-06',
                                                                                        '"rms_norm_eps": 1e-05'))
    assert c.config["rms_norm_eps"] == 1e-6
    a = faulted_copy(f, 0.05, embedded.model, tmp_path / "cache")
    b = faulted_copy(f, 0.05, changed, tmp_path / "cache")
    assert a.parent != b.parent and a.name == b.name
    assert load_checkpoint(b).config["rms_norm_eps"] == 1e-5


def test_the_default_cache_is_outside_the_repository_unless_named(monkeypatch, tmp_path):
    from kit.core.records import paths

    monkeypatch.delenv(CACHE_ENV, raising=False)
    assert paths.DATA_ROOT not in default_cache_dir().parents
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert default_cache_dir() == tmp_path


def test_the_copies_digest_follows_the_copies_bytes_not_the_code_text(embedded, tmp_path, monkeypatch):
    """The effects table's key: a refactor that writes the same copies keeps it, a changed byte does not."""
    from kit.faults import cache, catalogue

    monkeypatch.setattr(catalogue, "CATALOGUE", [fault("o_proj_scale"), fault("logit_scale")])
    before = cache.copies_digest(embedded.model, tmp_path / "a")
    assert cache.copies_digest(embedded.model, tmp_path / "b") == before  # fresh copies, same bytes
    # Another catalogue code (the cache key) writing the same bytes: same digest.
    monkeypatch.setattr(cache, "code_digest", lambda: "refactored")
    assert cache.copies_digest(embedded.model, tmp_path / "a") == before
    # One magnitude more is another set of copies.
    monkeypatch.setattr(catalogue, "CATALOGUE", [fault("o_proj_scale"), fault("logit_scale"), fault("rope_base")])
    assert cache.copies_digest(embedded.model, tmp_path / "a") != before
    # A fault writing other bytes at the same magnitude changes it too.
    real_write = cache.write_fault
    monkeypatch.setattr(catalogue, "CATALOGUE", [fault("o_proj_scale"), fault("logit_scale")])

    def off_by_a_little(f, m, source, out):
        return real_write(f, m * 1.001, source, out)

    monkeypatch.setattr(cache, "write_fault", off_by_a_little)
    monkeypatch.setattr(cache, "code_digest", lambda: "changed")
    assert cache.copies_digest(embedded.model, tmp_path / "a") != before
