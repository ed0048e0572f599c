"""`parity-kit verify`: a finished gate run judged again from its files (``runcheck``: the run as a whole; each
case re-derived in ``rederive``, the hardware it is judged for in ``claims``, what people read in ``readable``, the
run read safely in ``safeio``, a zip opened in ``runzip``, its signature in ``signature``)."""
