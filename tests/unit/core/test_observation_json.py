"""An engine's observation in JSON: one way to write it (kit.core.records.records.Observation), which a case's evidence
file uses too, and in which a NaN or infinite logprob (evidence the judge fails) survives as what it was."""

from __future__ import annotations

import json
import math

import pytest

from kit.core.records.records import Observation

pytestmark = pytest.mark.unit


def test_an_observation_round_trips_through_strict_json_nan_and_infinity_included():
    seen = Observation("p1", ((5, -0.1), (9, float("nan")), (2, float("-inf"))), 17)
    text = json.dumps(seen.to_dict(), allow_nan=False)  # standard JSON: no NaN literal
    back = Observation.from_dict(json.loads(text))
    assert back.prompt_id == "p1" and back.n_tokens == 17 and back.top_logprobs[0] == (5, -0.1)
    assert math.isnan(back.top_logprobs[1][1]) and back.top_logprobs[2] == (2, float("-inf"))
    assert json.loads(text)["top_logprobs"][1] == [9, "nan"]
