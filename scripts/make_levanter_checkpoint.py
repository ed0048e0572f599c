"""Write the tiny model's HF export as a Levanter-native (tensorstore) checkpoint.

Run in the Levanter environment, once; the folder is committed and its digest pinned:

    .venv-levanter/bin/python scripts/make_levanter_checkpoint.py \
        --hf fixtures/tiny-llama --out fixtures/tiny-llama-levanter

The checkpoint is what the `levanter-native` case loads with `levanter.checkpoint.load_checkpoint`.
The HF export's tokenizer.json is copied beside it, so that the fixture's tokenizer can be checked
against the native folder too.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from kit.backends.levanter.runtime import load_hf, save_native
from kit.core.model.modeldigest import model_digest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hf", required=True, help="the HF export folder to convert")
    p.add_argument("--out", required=True, help="the checkpoint folder to create (must not exist)")
    args = p.parse_args(argv)
    out = save_native(load_hf(args.hf), args.out)
    shutil.copyfile(Path(args.hf) / "tokenizer.json", out / "tokenizer.json")
    print(f"{out}: digest {model_digest(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
