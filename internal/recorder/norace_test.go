//go:build !race

package recorder

// raceDetector: the tests run without the race detector (race_test.go).
const raceDetector = false
