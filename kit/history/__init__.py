"""The gate over time: every run directory, wherever it is kept, read into one history that can be queried."""
