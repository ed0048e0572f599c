"""A descriptor nested past any use is refused as it is loaded, in one line at the line where it goes past: a value
3,000 tables deep ended `check`, `spec` and `kernels` in a RecursionError traceback (exit 70)."""

from __future__ import annotations

import pytest

from kit.descriptor import nesting
from support import parity_kit

DEEP = "{a=" * 3000 + "1" + "}" * 3000


def one_line(proc) -> str:
    assert proc.returncode == 3 and proc.stdout == "", (proc.returncode, proc.stdout, proc.stderr[-500:])
    [line] = proc.stderr.splitlines()
    return line.removeprefix("parity-kit: bad input: ")


@pytest.mark.parametrize("value", [DEEP, "[" * 3000 + "]" * 3000, "[{x=" * 1500 + "1" + "}]" * 1500])
@pytest.mark.parametrize("command", [["check"], ["spec", "{desc}", "x"], ["kernels"]])
def test_a_deeply_nested_value_is_one_line_and_exit_3(tmp_path, value, command):
    desc = tmp_path / "deep.toml"
    desc.write_text(f'name = "deep"\n# a comment\nx = {value}\n')
    args = [a.format(desc=desc) for a in command] + ([] if "{desc}" in command else [str(desc)])
    assert one_line(parity_kit(*args)) == (f"{desc}:3: values nested more than {nesting.MAX_DEPTH} deep (a "
                                           "descriptor needs six levels at most)")


def test_tables_nested_by_a_dotted_header_are_counted_too(tmp_path):
    desc = tmp_path / "deep.toml"
    desc.write_text('name = "deep"\n\n[' + ".".join(["t"] * 50) + "]\nb = 1\n")
    assert one_line(parity_kit("check", desc)) == (f"{desc}:3: t.t.t.t.t.t... (33 keys): values nested more "
                                                   f"than {nesting.MAX_DEPTH} deep (a descriptor needs six levels at "
                                                   "most)")


@pytest.mark.parametrize("text", [
    'x = "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["',
    "x = '{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{'",
    'x = 1  # [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[',
    'x = """\n[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n"""',
    "x = '''{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{'''''",  # two quotes of its own before the delimiter
    'x = "\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\""',
    "x = " + "[" * nesting.MAX_DEPTH + "]" * nesting.MAX_DEPTH,
])
def test_brackets_in_strings_and_comments_and_nesting_up_to_the_limit_are_not_counted(text):
    import tomllib

    tomllib.loads(text)  # each is TOML
    assert nesting.deep_line(text) is None
    assert nesting.deep_line(text + "\ny = " + "[" * (nesting.MAX_DEPTH + 1)) == text.count("\n") + 2


def test_a_number_longer_than_python_converts_and_a_link_loop_are_one_line(tmp_path):
    huge = tmp_path / "huge.toml"
    huge.write_text('name = "x"\ntimeout_s = ' + "9" * 5000 + "\n")
    assert one_line(parity_kit("check", huge)).startswith(f"{huge}: a value TOML cannot hold: Exceeds the limit "
                                                          "(4300 digits) for integer string conversion")
    loop = tmp_path / "loop.toml"
    loop.symlink_to(loop)  # Path.resolve raised RuntimeError: internal error, exit 70
    assert one_line(parity_kit("check", loop)) == f"descriptor {loop} does not exist"


def test_spec_options_nested_past_json_is_one_line(embedded):
    proc = parity_kit("spec", embedded.descriptor, "vllm-pp1", "--options", "[" * 50_000 + "]" * 50_000)
    assert one_line(proc) == "--options: not JSON: it nests deeper than a JSON reader can follow"
