"""Baselines with a lifecycle: which each case stands on, making the missing ones, their backtest and lineage."""
