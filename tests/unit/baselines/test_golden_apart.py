"""`baseline make` calls `golden make` as a function in a process of its own (kit.goldens.make.make_golden_apart),
not as the kit's CLI whose last printed line is parsed: a typed answer, the path or the one line saying why not."""

from __future__ import annotations

import pytest

from kit.core.errors import BadInput
from kit.goldens.make import MadeGolden, flag_keywords, make_golden_apart


def test_a_remake_lines_flags_become_make_goldens_keywords():
    assert flag_keywords(["--dtype", "bfloat16", "--cpu-kernels", "avx2", "--batch-size", "4"]) == {
        "dtype": "bfloat16", "cpu_kernels": "avx2", "batch_size": 4}
    assert flag_keywords([]) == {}
    with pytest.raises(BadInput, match="not pairs"):
        flag_keywords(["--dtype"])
    with pytest.raises(BadInput, match="not pairs"):
        flag_keywords(["--colour", "red"])


def test_a_golden_that_cannot_be_made_is_one_line_not_an_exception(tmp_path, embedded):
    log = tmp_path / "golden-make.log"
    made = make_golden_apart(tmp_path / "goldens", embedded.model, tmp_path / "no-such-fixture.json", "exact", 5,
                             ["parity-kit", "golden", "make"], log)
    assert isinstance(made, MadeGolden) and made.path is None
    assert made.error is not None and made.error.startswith("parity-kit: bad input: ")
    assert "no-such-fixture.json" in made.error
    assert log.is_file()  # the maker's own output goes there, never to this command's terminal
