"""Artifacts are written atomically and with the mode the umask gives (not mkstemp's 0600)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_written_files_follow_the_umask(tmp_path):
    script = ("import os, sys; os.umask(int(sys.argv[2], 8)); from kit.core.jsonio import write_json; "
              "write_json(sys.argv[1], {'a': 1})")
    for umask, mode in (("022", 0o644), ("002", 0o664), ("077", 0o600)):
        target = tmp_path / f"result-{umask}.json"
        subprocess.run([sys.executable, "-c", script, str(target), umask], check=True)
        assert oct(os.stat(target).st_mode & 0o777) == oct(mode)
        assert target.read_text() == '{\n  "a": 1\n}\n'
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary file is left behind"
