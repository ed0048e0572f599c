"""Baselines with a lifecycle: the archive of observations a new baseline is replayed over, and its backtest."""
