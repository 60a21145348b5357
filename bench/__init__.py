"""Benchmarks of the three seed operations against PostgreSQL's own upsert speed (`python bench/run.py`)."""
