"""A case's measured noise, and what the gate can and cannot see through it.

A calibration record measures a case's clean variation and one rule turns it into bounds (``calibration``; per
decode step ``stepnoise``); the drift test sees a shift no single bound sees (``drift``) within the descriptor's
false-failure budget (``falsefailure``), on exact statistics (``special``). What a case can detect under those
bounds is measured on faulted samples (``power``), where in the model a failing candidate first leaves the noise
is ``localize``'s comparison, and which of the vocabulary the fixture exercises at all is ``vocabcoverage``'s.
The verdict a bound gives is kit.core.rules'; a case judged is kit.core.verdict's.
"""
