"""The case runner observes one bucket at a time: the prompts' order, the backend's details and the
progress lines are what one call over every bucket would give, plus a line per bucket."""

from __future__ import annotations

import json
from types import SimpleNamespace

from kit.case import runner
from kit.case.runner import merge_details, observe_by_bucket
from kit.core.records.fixture import Prompt
from kit.core.records.progress import ProgressWriter, progress_path
from kit.core.records.records import Observation


class Recorder:
    """A backend that answers each prompt with its own token id and records each call, like hf does."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self._batches: list[dict] = []

    def observe(self, cases, top_n):
        self.calls.append([c.id for c in cases])
        self._batches = [{"bucket": cases[0].bucket, "rows": len(cases)}]
        return [Observation(c.id, ((int(c.id[1:]), -0.1),), c.n_tokens) for c in cases]

    def details(self) -> dict:
        return {"attention": "sdpa", "per_bucket": {str(self._batches[0]["bucket"]): "sdpa"},
                "batches": self._batches}


def prompt(n: int, bucket: int) -> Prompt:
    return Prompt(id=f"p{n}", bucket=bucket, prompt="", prompt_token_ids=(1, 2))


def test_one_observe_per_bucket_in_the_prompts_order(tmp_path, monkeypatch):
    # A scripted clock (start, end per bucket), so that each bucket's line states its own seconds.
    clock = iter([10.0, 11.5, 20.0, 20.25, 30.0, 32.0004])
    monkeypatch.setattr(runner, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    prompts = [prompt(0, 256), prompt(1, 128), prompt(2, 256), prompt(3, 1024), prompt(4, 128)]
    backend = Recorder()
    observations, details = observe_by_bucket(backend, prompts, 5, ProgressWriter(str(tmp_path / "case")))
    assert backend.calls == [["p1", "p4"], ["p0", "p2"], ["p3"]]
    assert [o.prompt_id for o in observations] == ["p0", "p1", "p2", "p3", "p4"]
    assert details == {"attention": "sdpa", "per_bucket": {"128": "sdpa", "256": "sdpa", "1024": "sdpa"},
                       "batches": [{"bucket": 128, "rows": 2}, {"bucket": 256, "rows": 2}, {"bucket": 1024, "rows": 1}]}
    lines = [json.loads(x) for x in progress_path(tmp_path / "case").read_text().splitlines()]
    assert [(x["bucket"], x["prompts"], x["index"], x["total"]) for x in lines] == [
        (128, 2, 1, 3), (256, 2, 2, 3), (1024, 1, 3, 3)]
    assert [x["seconds"] for x in lines] == [1.5, 0.25, 2.0]


def test_merge_details_keeps_scalars_last_and_merges_tables():
    assert merge_details({"a": 1, "t": {"128": {"x": 1}}, "l": [1]},
                         {"a": 2, "t": {"128": {"y": 2}, "256": {}}, "l": [2], "new": None}) == {
        "a": 2, "t": {"128": {"x": 1, "y": 2}, "256": {}}, "l": [1, 2], "new": None}
