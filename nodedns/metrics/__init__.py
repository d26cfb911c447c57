"""Counting: the metric names and the scrape-time collector (registry), and the workers' counters summed (aggregate).

Low: nearly every part counts into it. May import: config, names, errors.
"""
