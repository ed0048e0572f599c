"""Where the case kernels keep compiled programs, and that a user's own choice stands."""

from __future__ import annotations

from pathlib import Path

from kit.run.compilecache import CACHE_ENV, JAX_CACHE_ENV, JAX_MIN_COMPILE_ENV, cache_root, cache_env


def test_the_kit_cache_is_under_the_users_cache_folder(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    assert cache_root(env) == tmp_path / "parity-kit" / "compile"
    assert cache_env(env) == {JAX_CACHE_ENV: str(tmp_path / "parity-kit" / "compile" / "jax"),
                               JAX_MIN_COMPILE_ENV: "1"}


def test_a_chosen_folder_and_minimum_compile_time_are_used(tmp_path):
    env = {CACHE_ENV: str(tmp_path / "cc"), JAX_MIN_COMPILE_ENV: "0"}
    assert cache_env(env) == {JAX_CACHE_ENV: str(tmp_path / "cc" / "jax"), JAX_MIN_COMPILE_ENV: "0"}


def test_off_keeps_nothing_and_the_users_own_jax_cache_is_left_alone():
    assert cache_root({CACHE_ENV: "off"}) is None
    assert cache_env({CACHE_ENV: "off"}) == {}
    assert cache_env({JAX_CACHE_ENV: "/elsewhere"}) == {}


def test_the_default_follows_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: tmp_path))
    assert cache_root({}) == tmp_path / ".cache" / "parity-kit" / "compile"
