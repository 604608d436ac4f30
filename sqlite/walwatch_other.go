//go:build !linux

package sqlite

import "errors"

// watchWAL is available on Linux only; elsewhere the listener checks every
// WakeInterval.
func watchWAL(string, chan<- struct{}) (stop func(), err error) {
	return nil, errors.New("watching the WAL file needs Linux")
}
