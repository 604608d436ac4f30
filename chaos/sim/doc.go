// Package sim is a deterministic simulation of errand's job state machine.
// [Run] drives a real store ([errandstore.Store]) on an injected clock with
// operations drawn from a seeded random source (math/rand/v2 PCG): enqueues
// (some unique, some scheduled, some with a deadline), claims and heartbeats
// by several simulated workers that hold their jobs' lease tokens,
// outcomes (including stale tokens of workers whose lease was lost), clock
// advances, sweeps, replays and cancels. It keeps a reference model of every
// job and, after every step, reads the store's jobs and checks them against
// the model and against errand's invariants: no job lost or duplicated,
// transitions only along the state machine, fencing, attempts counted at
// claim and bounded, leases live or not yet swept, one history entry per
// attempt, replays and cancels audited.
//
// The same seed runs the same operations and, while the store agrees with
// the model, reaches the same outcome. A failure ([Failure]) prints the seed,
// the step and the operations up to it; reproduce it with
//
//	go test ./chaos/sim -run TestSim -seed N
//
// and run more seeds than the default range with -sim.start and -sim.seeds.
package sim
