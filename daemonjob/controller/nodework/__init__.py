"""nodework."""
