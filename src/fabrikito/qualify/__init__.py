"""Qualifying an agent release by evidence: the catalogue of states, capturing, judging, recording."""
