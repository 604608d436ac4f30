package errand

// The JSON columns of the job record and of the worker registry: how every
// store writes and reads them, so that a third-party store keeps records a
// reader cannot tell from errand's own. Times inside the history are RFC
// 3339 in UTC, at the microsecond precision of the other columns.
