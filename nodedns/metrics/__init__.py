"""Counting: answers' label slots, the parts' plain counters, the scrape-time collector, the workers' counters summed.

`slots` (the labels an answer is counted under, as one byte), `counters` (Histogram, ListenerStats,
Sampler, one Scrape of them), `registry` (the Collector and the provider contract) with `sections`
(each provider section's metric families), `aggregate` (the workers' scrapes summed).

Low: nearly every part counts into it. May import: config, names, errors.
"""
