"""doubles."""
