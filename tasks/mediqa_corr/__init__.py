"""MEDIQA-CORR 2024 / MEDEC: the CSV format, the submission line format and the official metrics."""
