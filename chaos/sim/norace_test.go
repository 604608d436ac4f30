//go:build !race

package sim_test

// raceDiv divides the default seed ranges; see race_test.go.
const raceDiv = 1
