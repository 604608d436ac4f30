//go:build unix && !linux

package exechandler

import "syscall"

// newProcessGroup puts the command in process group pgid, that of its
// guard, or in a group of its own, whose id is the command's pid, when pgid
// is 0 (no guard), so that the group can be killed as one. These systems
// have no parent-death signal that Go can set: only the guard (startGuard)
// kills the group when the worker dies.
func newProcessGroup(pgid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
}

// pinThread does nothing: without a parent-death signal, which thread
// starts a command does not matter.
func pinThread() (unpin func()) { return func() {} }
