"""experiments (under construction)."""
