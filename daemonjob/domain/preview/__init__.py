"""preview."""
