package errand

import "github.com/errandhq/errand/errandtype"

// Observer is told, synchronously, about the jobs one client enqueues and
// the attempts its workers start and finish: what process-local metrics
// (errandhttp's /metrics) count. Set it in [Config.Observer]; nil observes
// nothing and costs nothing.
//
// Methods are called from the goroutines doing the work, concurrently, on
// the claim and outcome paths: they must be safe for concurrent use, return
// at once and never block (count, do not write to a database). They must
// not modify the jobs they are given.
type Observer interface {
	// JobsEnqueued reports jobs this client inserted: after the insert's
	// own transaction committed (Enqueue, EnqueueMany), after the commit
	// of an [Client.InTx] transaction (EnqueueTx inside InTx), or at the
	// insert for EnqueueTx in a transaction the caller commits itself,
	// whose jobs are counted even if it then rolls back. Duplicates are
	// not reported.
	JobsEnqueued(jobs []*errandtype.Job)
	// JobStarted reports an attempt that is starting: the job was claimed
	// (its Attempt counted) and its handler is about to run.
	JobStarted(job *errandtype.Job)
	// JobFinished reports what became of an attempt, recorded or not (a
	// lost lease): the same result [Client.Subscribe] delivers. job is the
	// job as it was claimed.
	JobFinished(job *errandtype.Job, res *WorkResult)
}
