"""Refreshing a fork: replay its overlay onto a newer upstream, build and qualify the release, then the control."""
