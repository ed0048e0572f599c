"""What the summary, control and refresh notebooks show; imported by notebooks only."""
