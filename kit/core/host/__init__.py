"""What a result's bits depend on, read from the host: its fingerprint (CPU model and instruction-set level, the
accelerator, the numeric packages and the environment that moves numbers) and the runtime keys of exact results
(``runtime``), and the portable float64 result, rounded to float32, that no host moves (``portable``).

Below the noise and the baselines, which both ask it: a calibration record is chosen by the class of hardware it was
measured on, and an exact golden holds on one runtime key. Stdlib and numpy only: it runs in every case kernel.
"""
