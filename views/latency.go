package views

import "strconv"

// Latency percentiles as every surface words them (the studio's cards, svc usage and svc deployments
// canary compare): the number alone where it is within 1% (read from the usage sketches), "about" and
// its error where it is still an estimate from a histogram of hours recorded before the sketches.

// LatencyPair is "255 / 365 ms", "about 375 / 488 ms (±34%)", or "-" without calls.
func LatencyPair(p50, p95 *int64, errPct *int) string {
	if p50 == nil || p95 == nil {
		return "-"
	}
	if estimated(errPct) {
		return "about " + Count(*p50) + " / " + Count(*p95) + " ms (±" + strconv.Itoa(*errPct) + "%)"
	}
	return Count(*p50) + " / " + Count(*p95) + " ms"
}

// LatencyMs is one percentile: "255 ms", "about 375 ms (±34%)", or "-" without calls.
func LatencyMs(v *int64, errPct *int) string {
	if v == nil {
		return "-"
	}
	if estimated(errPct) {
		return "about " + Count(*v) + " ms (±" + strconv.Itoa(*errPct) + "%)"
	}
	return Count(*v) + " ms"
}

// estimated reports whether percentiles of this error are estimates worth the word "about".
func estimated(errPct *int) bool { return errPct != nil && *errPct > 1 }

// latencyExact titles percentiles read from the sketches.
const latencyExact = "Of the calls answered (refused and failed calls are counted apart), within 1% of the exact value; each run's own latency is in Runs."
