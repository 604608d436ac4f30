//go:build race

package sim_test

// raceDiv divides the default seed ranges: the race detector slows the
// simulation some thirtyfold, so a race build runs a few seeds, to check
// the code, and a plain go test the whole range.
const raceDiv = 30
