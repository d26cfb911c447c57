"""Mutations of nodedns/metrics/counters.py (histograms, listener counters, the sampler, one scrape)."""

from mutate import Mutation

TESTS = ("tests/unit/metrics/test_metrics.py",)

MUTATIONS = (
    Mutation("histogram-le-bucket-one-up", "nodedns/metrics/counters.py",
             "        self.counts[bisect_left(self.bounds, seconds)] += 1",
             "        self.counts[bisect_left(self.bounds, seconds) + (seconds in self.bounds)] += 1",
             ("tests/unit/metrics/test_metrics.py::test_histogram_puts_observations_in_the_le_bucket",),
             "an answer of exactly 1 ms lands in the bucket above le=\"0.001\""),
    Mutation("histogram-buckets-not-cumulative", "nodedns/metrics/counters.py",
             '            out.append(("+Inf" if bound == math.inf else repr(bound), float(running)))',
             '            out.append(("+Inf" if bound == math.inf else repr(bound), float(c)))',
             ("tests/unit/metrics/test_metrics.py::test_histogram_puts_observations_in_the_le_bucket",),
             "each le bucket counts only its own observations, not those below it: Prometheus's quantiles are wrong"),
    Mutation("sampler-gap-may-be-zero", "nodedns/metrics/counters.py",
             "        return int(math.log(u) / self._log1m) + 1",
             "        return int(math.log(u) / self._log1m)",
             ("tests/unit/metrics/test_metrics.py::test_sampler_samples_the_configured_share",),
             "a gap of 0 samples the same query again: the query log shows more than the --query-log share "
             "of the queries"),
)
