//go:build race

package recorder

// raceDetector: the tests run under the race detector, which slows the recorder's writes several times
// over; load tests offer it less traffic (TestFullRateThroughAnOutageDropsNothing).
const raceDetector = true
