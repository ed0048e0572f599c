"""The descriptor: a TOML file naming the model, fixture, goldens and gate cases (schema, then load)."""
