"""Vertical generation models tuned to creators; first: film colour grading (`grading`)."""
