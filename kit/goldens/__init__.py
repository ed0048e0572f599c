"""Golden upkeep: make a golden with a reference backend, and regenerate a stale one under review."""
