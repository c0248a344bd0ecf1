// Package bench measures the edge's overhead for cmd/svcbench (`make bench`): the load (Loader, and
// Measure, where rows take turns in slices in a rotating order), the bare reverse proxy every edge row
// is compared with, the statistics over rounds (medians, per-round ratios to the bare proxy) and the
// report with its budget checks.
package bench
