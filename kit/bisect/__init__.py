"""`parity-kit bisect`: the first overlay commit whose build fails a case the tip fails."""
