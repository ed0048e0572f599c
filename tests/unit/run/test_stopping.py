"""The signal scope of a run: each stopping signal becomes Stopped with its exit code, whatever the
disposition it replaced, which it restores."""

from __future__ import annotations

import os
import signal

import pytest

from kit.run import notebook, stopping


@pytest.mark.parametrize("signum, code, said", [
    (signal.SIGINT, 130, "interrupted"),
    (signal.SIGTERM, 143, "stopped by SIGTERM"),
    (signal.SIGHUP, 129, "stopped by SIGHUP"),
])
def test_a_signal_in_scope_is_stopped_with_its_exit_code(signum, code, said):
    with pytest.raises(stopping.Stopped) as caught, stopping.on_signals():
        os.kill(os.getpid(), signum)
    assert (stopping.exit_code(caught.value), stopping.stop_words(caught.value)) == (code, said)
    assert isinstance(caught.value, KeyboardInterrupt)  # every Ctrl-C cleanup path runs for it too


def test_an_ignored_sigint_is_handled_in_scope_and_ignored_again_after():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(stopping.Stopped), stopping.on_signals():
            with stopping.on_signals():  # nested scopes install once
                os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_second_signal_does_not_cut_the_cleanup_short():
    with pytest.raises(stopping.Stopped) as caught, stopping.on_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except stopping.Stopped:
            os.kill(os.getpid(), signal.SIGINT)  # ignored: the first one's cleanup runs to its end
            raise
    assert caught.value.signum == signal.SIGTERM


def test_a_stopped_run_starts_no_kernel_and_the_scope_lifts_that(tmp_path):
    with pytest.raises(stopping.Stopped), stopping.on_signals():
        notebook.stop_all()
        outcome = notebook.run_notebook(tmp_path / "none.ipynb", tmp_path / "out.ipynb", {}, "no-such-kernel",
                                        None, tmp_path / "log")
        assert (outcome.started, outcome.killed_by) == (False, "interrupt")
        os.kill(os.getpid(), signal.SIGTERM)
    assert not notebook.stopping()
