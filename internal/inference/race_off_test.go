//go:build !race

package inference

// raceOn says the race detector is on (race_on_test.go).
const raceOn = false
