"""`report --attach` zips a run's own files only: a link inside the run folder that leads out of it (to a key, to
another run's result) is refused in one line naming the link, before the Markdown or any zip is written.
A link that stays inside the run is its file, as before."""

from __future__ import annotations

import json
import zipfile

from kit.cli import main
from kit.core.records import rundir
from kit.core.records.records import CaseResult, Status


def finished_run(run_dir):
    (run_dir / rundir.CASES).mkdir(parents=True)
    (run_dir / rundir.MANIFEST).write_text(json.dumps({"name": "tiny", "cases": ["ok"], "release": {"name": "next"},
                                                       "command": ["parity-kit", "gate", "d.toml"]}))
    (run_dir / rundir.CASES / "ok.json").write_text(json.dumps(CaseResult("ok", "hf", Status.PASSED).to_dict()))
    (run_dir / rundir.EVIDENCE).write_text("**Parity gate `tiny`: passed.**\n")
    (run_dir / rundir.SUMMARY_HTML).write_text("<html></html>")
    return run_dir


def test_a_link_out_of_the_run_folder_is_refused_naming_it(tmp_path, capsys):
    run = finished_run(tmp_path / "run")
    secret = tmp_path / "elsewhere" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("PRIVATE KEY")
    link = run / rundir.CASES / "ok.ipynb"
    link.symlink_to(secret)
    assert main(["report", str(run), "--markdown", "--attach", str(tmp_path / "attach")]) == 3
    out, err = capsys.readouterr()
    assert out == ""  # refused before the Markdown went out
    assert err == (f"parity-kit: bad input: {link} leads through a link to {secret}, outside the run directory "
                   f"{run}; a zip carries only the run's own files (replace the link with the file, or remove it)\n")
    assert not (tmp_path / "attach").exists()


def test_a_link_that_stays_inside_the_run_is_zipped_as_its_file(tmp_path, capsys):
    run = finished_run(tmp_path / "run")
    (run / "summary-copy.html").symlink_to(run / rundir.SUMMARY_HTML)
    assert main(["report", str(run), "--attach", str(tmp_path / "attach")]) == 0
    zipped = zipfile.ZipFile(tmp_path / "attach" / "run.zip")
    assert zipped.read("run/summary-copy.html") == b"<html></html>"
    assert capsys.readouterr().out == f"{tmp_path / 'attach' / 'run.zip'}\n"


def test_a_zip_already_there_is_never_written_over(tmp_path, capsys):
    # Two runs named `run`, the failed one attached first: its zip stays as it was.
    failed, passed = finished_run(tmp_path / "a" / "run"), finished_run(tmp_path / "b" / "run")
    assert main(["report", str(failed), "--attach", str(tmp_path / "attach")]) == 0
    first = (tmp_path / "attach" / "run.zip").read_bytes()
    capsys.readouterr()
    assert main(["report", str(passed), "--markdown", "--attach", str(tmp_path / "attach")]) == 3
    out, err = capsys.readouterr()
    assert out == ""  # refused before the Markdown went out
    assert err == (f"parity-kit: bad input: --attach: {tmp_path / 'attach' / 'run.zip'} exists; a zip is never "
                   "written over (remove it, or attach into another folder)\n")
    assert (tmp_path / "attach" / "run.zip").read_bytes() == first
    assert [p.name for p in (tmp_path / "attach").iterdir()] == ["run.zip"]  # no temporary file left
    from kit.core.records.jsonio import FILE_MODE

    assert (tmp_path / "attach" / "run.zip").stat().st_mode & 0o777 == FILE_MODE  # readable as the umask says
