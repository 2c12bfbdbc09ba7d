"""Data: response tables, the loaders of the recorded real data, prices."""
