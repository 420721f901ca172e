"""specdec (under construction)."""
