// Package history checks that what concurrent clients saw of errand's jobs is
// linearizable: that some order of their operations, each taking effect at
// one instant between its invocation and its completion, is a run of
// errand's job state machine.
//
// Clients record each operation with a [Recorder]: Begin at invocation,
// then one completion of the [Call] when it returns:
//
//	rec := history.NewRecorder() // shared by every client
//	call := rec.Begin(client, history.Input{Op: history.OpClaim, Lease: lease})
//	jobs, err := claim(...)
//	if err != nil {
//		call.Unknown() // it may have claimed jobs all the same
//	} else {
//		call.Claimed(claims) // history.ClaimOf(job), or a Claim from an envelope
//	}
//	call = rec.Begin(client, history.Input{Op: history.OpAck, JobID: id, Token: token})
//	call.Done(history.Output{Result: history.Ok}) // or LeaseLost, or call.Unknown()
//	...
//	err = history.Check(rec.History(), history.Options{VisualizationPath: path})
//
// The operations are enqueue, claim, heartbeat, ack, fail (retry or final),
// replay and cancel. An operation whose call failed without saying whether
// it happened (a lost connection, a deadline) is recorded with Unknown: the
// checker treats it as possibly happened, at any time after its invocation,
// even after the client gave up on it. [ResultOf] maps a store's errors.
//
// [Check] runs porcupine's checker on the history with [Model], errand's
// queue partitioned per job id, and on a violation returns a [*Violation]
// naming the job, the longest order of its operations that fits the model
// and the operations that cannot follow it, and writes porcupine's
// visualization (an HTML file to open in a browser) where
// [Options].VisualizationPath says.
//
// The model knows leases by time, on the clock of the machine the clients
// run on, which must be the store's (the process clock of an embedded
// store, or a database server's on the same host): an outcome is applied
// only while its lease is live at some instant of the call, a lease that
// ended may be swept (the job retried, dead or cancelled) before any later
// operation, and a claim counts an attempt, never past the job's maximum.
package history
