"""overlap (under construction)."""
