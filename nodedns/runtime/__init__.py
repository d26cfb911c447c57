"""What every process needs to run: logging (consolidated errors, the query log, formatters), owned background tasks,
giving freed C heap back, dnstap frames sent to a collector.

May import: config, names, errors.
"""
