"""Started with every Python a unit test launches (tests/support/engines.py puts this folder first on PYTHONPATH):
it appends to the file PARITY_KIT_TEST_ENGINE_LOG names each engine the process imports, so that a unit test
whose subprocess (a CLI command, a kernel) imports one fails as surely as one that imports it itself.

Stdlib only, and it changes nothing else: the finder finds nothing, and a sitecustomize further along the path
(a distribution's) still runs."""

import os
import sys


class EngineWatch:
    """A finder that finds nothing itself: for a watched top-level package it hands back the spec the other
    finders give, whose loader notes the package's name when it runs it. Only a real import is noted, not
    a lookup (importlib.util.find_spec, which asks whether an engine is installed)."""

    def __init__(self, log: str, engines: frozenset[str]) -> None:
        self.log, self.engines = log, engines

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.engines:  # a submodule follows its package, which was noted first
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is not None and hasattr(loader, "exec_module"):
            run = loader.exec_module

            def exec_module(module, run=run, name=fullname):
                with open(self.log, "a") as f:
                    f.write(f"{name}\t{os.getpid()}\t{' '.join(sys.argv)[:300]}\n")
                run(module)

            loader.exec_module = exec_module
        return spec


def _run_the_next_sitecustomize() -> None:
    from importlib.machinery import PathFinder
    from importlib.util import module_from_spec

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(module_from_spec(spec))


if os.environ.get("PARITY_KIT_TEST_ENGINE_LOG"):
    sys.meta_path.insert(0, EngineWatch(os.environ["PARITY_KIT_TEST_ENGINE_LOG"],
                                        frozenset(os.environ.get("PARITY_KIT_TEST_ENGINES", "").split(","))))
_run_the_next_sitecustomize()
