"""Experiments: the grids behind notebooks 04, 05 and 11 and the fine-tuning table of notebook 08, each one command
that writes a results file."""
