package flow

// NoteLimited notes that kind's adaptive limit held back a claim that
// used all the room it left: there are more jobs than the limit lets
// start. A concurrency limit, whose room its claim learns from the store,
// notes it here; a rate limit's Settle does on its own.
func (f *Limits) NoteLimited(kind string) {
	if f != nil {
		f.ConcAdaptive[kind].noteLimited()
	}
}
