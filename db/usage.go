package db

// LatencyBoundsMs are the upper bounds, in milliseconds, of the latency histogram that usage_hourly
// keeps in its lat_* columns (lat_25 counts requests of at most 25 ms, lat_50 those over 25 and at most
// 50 ms, ..., lat_inf those over the last bound). The columns and these bounds change together.
var LatencyBoundsMs = [...]int64{25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000}

// LatencyBucket returns the histogram bucket (the lat_* column, in order) of a latency.
func LatencyBucket(ms int64) int {
	for i, b := range LatencyBoundsMs {
		if ms <= b {
			return i
		}
	}
	return len(LatencyBoundsMs)
}
