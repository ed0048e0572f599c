"""How calibrate runs: the command a record keeps (without the scratch folder of its samples), and one
kernel per engine launch."""

from __future__ import annotations

from kit.calibrate.run import by_launch, reproducing_command


def test_the_samples_folder_is_left_out_in_both_spellings():
    assert reproducing_command(["parity-kit", "calibrate", "d.toml", "--case", "a", "--out", "/scratch/x",
                                "--to", "calibrations"]) == ["parity-kit", "calibrate", "d.toml", "--case", "a",
                                                             "--to", "calibrations"]
    assert reproducing_command(["parity-kit", "calibrate", "--resume=/scratch/y", "--case", "b"]) == [
        "parity-kit", "calibrate", "--case", "b"]


def test_each_launch_gets_a_kernel_of_its_own_in_launch_order():
    variants = [{"name": "as-set", "launch": 2}, {"name": "as-set"}, {"name": "batched-2", "launch": None}]
    assert by_launch(variants) == {1: [{"name": "as-set"}, {"name": "batched-2", "launch": None}],
                                   2: [{"name": "as-set", "launch": 2}]}
