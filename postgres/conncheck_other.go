//go:build !unix

package postgres

import "net"

// serverSpoke cannot peek at a socket here: every connection passes, and a
// statement on a dead one is reported as errandtype.ErrStoreUnavailable.
func serverSpoke(net.Conn) bool { return false }
