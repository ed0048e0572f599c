"""What a case is judged against, and where each baseline came from.

A golden holds reference observations (``golden``); an exact one holds on one runtime key, unless computed where
no machine can move it (both kit.core.host's). Each kind of baseline is one class (``baselinekind``), and
every baseline has a lineage: what it supersedes, why, and the backtest it passed (``lineage``), with what a
calibration record's entry claims re-derived from the records (``lineageclaims``).
"""
