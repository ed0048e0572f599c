"""The summary's coverage note for a gate run's fixture: numbers, blind classes called out, escaped."""

from __future__ import annotations

from kit.views.coverage import BLIND, class_frame, coverage_html, run_coverage


def test_run_coverage_of_the_embedded_gate(embedded):
    cov = run_coverage({"fixture": str(embedded.fixture), "model": str(embedded.model)})
    assert (cov.distinct, cov.vocab_size, cov.max_tokens, cov.context) == (310, 768, 993, 1024)
    html = coverage_html(cov)
    assert html.startswith("<h4>Coverage of the fixture</h4><p>the prompts use 310 of 768 vocabulary tokens (40.4%); "
                           "458 (59.6%) never appear")
    assert ("<br><b>byte</b> (156 tokens, no text on its own: control characters, pieces of a multi-byte "
            f"character): no prompt holds one; {BLIND}.</p>") in html
    frame = class_frame(cov)
    # Classes the vocabulary has no token of are left out of the summary's short table.
    assert list(frame.index) == ["special", "byte", "whitespace", "digits", "punctuation", "ascii-word"]
    assert frame.loc["byte", ["in vocab", "seen", "share"]].tolist() == [156, 0, 0.0]
    assert frame.loc["special", "never seen, e.g."] == "'<|eos|>' '<|pad|>'"


def test_run_coverage_says_why_not(tmp_path, embedded):
    assert run_coverage({}) == "coverage: the run's manifest names no fixture"
    missing = tmp_path / "gone.json"
    assert run_coverage({"fixture": str(missing)}) == f"coverage: not shown: fixture {missing} does not exist"
    # A model that is not a local folder (moved, or named otherwise) still gets the fixture's own counts.
    cov = run_coverage({"fixture": str(embedded.fixture), "model": str(tmp_path / "elsewhere")})
    assert (cov.distinct, cov.vocab_size, cov.classes) == (310, None, ())
    assert "vocabulary size unknown" in coverage_html(cov)
