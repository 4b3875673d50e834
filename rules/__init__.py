"""The rule catalogue: one file per rule."""
