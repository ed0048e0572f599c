"""The control run: the gate against today's pin and against the candidate, then the diagnosis."""
