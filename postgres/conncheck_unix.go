//go:build unix

package postgres

import (
	"net"
	"syscall"
)

// serverSpoke reports whether the server sent anything, or closed the
// connection, on c, which waits for no answer: a peek at the socket that
// neither blocks nor consumes.
func serverSpoke(c net.Conn) bool {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn() // TLS: any record waiting says the same
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	spoke := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
		// The socket does not block: EAGAIN means nothing waits. Data,
		// the end of the stream (no error) or a reset mean the server
		// is gone.
		spoke = err != syscall.EAGAIN && err != syscall.EWOULDBLOCK && err != syscall.EINTR
		return true
	})
	return spoke || err != nil
}
