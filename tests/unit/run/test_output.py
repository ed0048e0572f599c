"""What the commands say goes through logging to one console on stderr: each message whole on one line, markup
only where asked for, and -q and -v choosing which levels show."""

from __future__ import annotations

import logging

from kit.run import output

log = logging.getLogger("kit.some.module")


def test_a_long_line_stays_one_line_and_text_is_not_markup(capsys):
    output.setup(output.NORMAL)
    long = "gate failed: " + "x" * 300 + " -> /tmp/[run]/result.json"
    log.info(long)
    log.log(output.NOTICE, "[red]gate failed[/]: 1 failed", extra=output.MARKUP)
    assert capsys.readouterr() == ("", f"{long}\ngate failed: 1 failed\n")


def test_quiet_shows_verdicts_and_errors_only_and_verbose_adds_debug(capsys):
    try:
        output.setup(output.QUIET)
        log.info("  passed hf-bf16 (hf)")
        log.log(output.NOTICE, "gate passed")
        log.error("parity-kit: case x: its result could not be written")
        assert capsys.readouterr().err == "gate passed\nparity-kit: case x: its result could not be written\n"
        assert not output.shows(logging.INFO)
        output.setup(output.VERBOSE)
        log.debug("started hf-bf16")
        assert capsys.readouterr().err == "started hf-bf16\n" and output.shows(logging.DEBUG)
    finally:
        output.setup(output.NORMAL)


def test_one_handler_however_often_it_is_set_up():
    output.setup(output.VERBOSE)
    output.setup(output.NORMAL)
    output.ensure()
    kit = logging.getLogger(output.ROOT)
    ours = [h for h in kit.handlers if isinstance(h, output.LineHandler)]  # pytest adds capturing ones of its own
    assert len(ours) == 1 and not kit.propagate and output.console() is ours[0].console
