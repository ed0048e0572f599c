"""Engine-like faults written into a checkpoint, and what they do to the model and to the gate's verdict.

``catalogue`` holds the faults, ``checkpoint`` reads and writes the folders they edit, ``cache`` keeps the
faulted copies outside the repository, ``effect`` measures a fault against the embedded descriptor's cases.
"""
