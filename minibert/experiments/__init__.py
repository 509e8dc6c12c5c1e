"""Experiments: the grids behind notebooks 05 and 09, each one command that writes a results file."""
