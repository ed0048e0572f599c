"""`parity-kit report` on a localize directory whose localize.json is damaged or from an older kit: one line naming
the file and the key (exit 3), never a traceback; a whole one reports, an infinite ratio (a bit-exact clean run)
included. localize.json is built from the localizer's own records (no kernel)."""

from __future__ import annotations

import json

import pytest

from kit.cli import main
from kit.core.records import rundir
from kit.core.noise.localize import localize, points

METRIC_VALUES = {"rel_l2_all": 0.0, "rel_l2_last": 0.0, "max_abs_all": 0.0, "max_abs_last": 0.0}


def localize_dir(folder):
    """A localize directory as `parity-kit localize` leaves it, for one prompt whose layer 1 attention diverged
    from a clean run that is bit-exact there (ratio infinite, written as null)."""
    clean = [{k: 1e-3 for k in METRIC_VALUES}] * 3 + [METRIC_VALUES] * 2
    candidate = clean[:3] + [{k: 0.5 for k in METRIC_VALUES}] * 2
    loc = localize("p-7", points(2), candidate, clean)
    doc = {"case": "hf-bf16", "backend": "hf", "verdict": loc.verdict, "model": "/models/candidate",
           "reference": "hf float32", "clean": "the case's own settings", "k": loc.k,
           "first_divergent": loc.to_dict()["first_divergent"], "localizations": [loc.to_dict()]}
    folder.mkdir()
    (folder / rundir.LOCALIZE).write_text(json.dumps(doc))
    return folder


def test_a_whole_localize_directory_reports_an_infinite_ratio_as_inf(tmp_path, capsys):
    folder = localize_dir(tmp_path / "loc")
    assert main(["report", str(folder), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Localize `hf-bf16` (hf): **first divergent: layer 1 attention**\n")
    assert "| layer 1 attention | 0.5 | 0 | inf | **yes** |" in out


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("verdict"), "verdict: missing"),
    (lambda d: d.update(k="4"), "k: expected a number in [1, inf], got '4'"),
    (lambda d: d["localizations"][0].pop("points"), "localizations[0].points: missing"),
    (lambda d: d["localizations"][0]["points"][2]["candidate"].pop("rel_l2_all"),
     "localizations[0].points[2].candidate.rel_l2_all: expected a number in [0, inf], got None"),
    (lambda d: d["localizations"][0]["points"][1].update(diverged="no"),
     "localizations[0].points[1].diverged: expected true or false, got 'no'"),
])
def test_a_damaged_localize_json_is_one_line_naming_the_file_and_key(tmp_path, capsys, monkeypatch, change,
                                                                      message):
    monkeypatch.chdir(tmp_path)
    folder = localize_dir(tmp_path / "loc")
    doc = json.loads((folder / rundir.LOCALIZE).read_text())
    change(doc)
    (folder / rundir.LOCALIZE).write_text(json.dumps(doc))
    assert main(["report", "loc", "--markdown"]) == 3
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"parity-kit: bad input: loc/localize.json: {message}\n")


def test_a_truncated_localize_json_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = localize_dir(tmp_path / "loc")
    (folder / rundir.LOCALIZE).write_text('{"case": "hf-bf16", "loc')
    assert main(["report", "loc", "--markdown"]) == 3
    assert capsys.readouterr().err == ("parity-kit: bad input: loc/localize.json is not valid JSON: Unterminated "
                                       "string starting at: line 1 column 21 (char 20)\n")
