"""`parity-kit localize`: where a failing case's candidate first leaves the noise, layer by layer."""
