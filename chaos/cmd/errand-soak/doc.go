// Command errand-soak runs errand for a long while at a steady load and
// checks that nothing grows: the memory, goroutines and file descriptors
// of every process, the database connections, and the store's size under
// the retention policy.
//
//	go run ./chaos/cmd/errand-soak -store sqlite|postgres [-pg-url URL] [-duration 1h]
//	    [-rate 200] [-workers 2] [-sample 30s] [-dir DIR] [-errand PATH] [--json]
//
// It builds ./cmd/errand (or runs the binary -errand names), starts -workers `errand work` processes that
// deliver jobs to a webhook of its own (retention 2m for succeeded and
// dead jobs) and one `errand serve`, enqueues -rate jobs a second (four
// fifths through the library in batches of ten, one fifth through the
// JSON API; 5% fail once, 2% are poison and die), and samples every
// series every -sample. After a warm-up quarter it compares the last
// quarter of each series with the second: see chaos/SOAK.md for the
// series and their tolerances. It exits 0 when every series is flat, 1
// when one grew (named on stderr) or the run failed, 2 on a usage error.
package main
