"""Evaluation: sampling completions from a policy and scoring them; the common judge."""
