"""A record keeps the command that remakes it, without the scratch folder its samples were kept in."""

from __future__ import annotations

from kit.calibrate.run import reproducing_command


def test_the_samples_folder_is_left_out_in_both_spellings():
    assert reproducing_command(["parity-kit", "calibrate", "d.toml", "--case", "a", "--out", "/scratch/x",
                                "--to", "calibrations"]) == ["parity-kit", "calibrate", "d.toml", "--case", "a",
                                                             "--to", "calibrations"]
    assert reproducing_command(["parity-kit", "calibrate", "--resume=/scratch/y", "--case", "b"]) == [
        "parity-kit", "calibrate", "--case", "b"]
