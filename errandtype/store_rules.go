package errandtype

// StatesWhere lists the states for which keep is true, in the order of
// JobStates, so that a rendered list reads the same everywhere (SQLite uses
// a partial index only when a query repeats its condition word for word).
func StatesWhere(keep func(JobState) bool) []JobState {
	var out []JobState
	for _, s := range JobStates {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}
