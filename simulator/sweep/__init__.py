"""sweep (under construction)."""
