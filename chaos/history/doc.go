// Package history checks that what concurrent clients saw of errand's jobs is
// linearizable: that some order of their operations, each taking effect at
// one instant between its invocation and its completion, is a run of
// errand's job state machine.
//
// Clients record each operation with a [Recorder]: Begin at invocation,
// then one of the [Call]'s completions (Claimed, Done, Unknown) when it
// returns. An operation whose store call failed without saying whether it
// happened (a lost connection, a deadline) is recorded with Unknown: the
// checker treats it as possibly happened, at any time after its invocation.
// [Check] runs porcupine's checker on the history with [Model], errand's
// queue partitioned per job id, and on a violation returns a [*Violation]
// naming the job, the longest order of its operations that fits the model
// and the operations that cannot follow it, and writes porcupine's
// visualization (an HTML file) where [Options].VisualizationPath says.
//
// The model knows leases by time: an outcome is applied only while its
// lease is live at some instant of the call, and a lease that ended may be
// swept (the job retried, dead or cancelled) before any later operation.
package history
