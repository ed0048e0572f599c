"""Baselines with a lifecycle: making the ones a runtime lacks, the archive a new one is backtested over, its
lineage, and the runs marked bad."""
