//go:build race

package inference

// raceOn says the race detector is on: it slows every call ten times over, which drowns the timing
// differences some fleet tests measure.
const raceOn = true
