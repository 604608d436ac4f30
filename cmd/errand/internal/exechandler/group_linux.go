package exechandler

import (
	"runtime"
	"syscall"
)

// newProcessGroup puts the command in process group pgid, that of its
// guard, or in a group of its own, whose id is the command's pid, when pgid
// is 0 (no guard), so that the group can be killed as one; and asks the
// kernel to kill the command when its worker dies, however it dies.
//
// The kernel sends the parent-death signal when the thread that started
// the child exits, not the process: see pinThread.
func newProcessGroup(pgid int) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pgid: pgid, Pdeathsig: syscall.SIGKILL}
}

// pinThread keeps the calling goroutine, and nothing else, on its thread
// until unpin is called. Call it before starting a command and unpin once
// the command has been waited for.
//
// The Go runtime ends a thread only when a goroutine locked to it exits
// (https://go.dev/issue/27505), and any goroutine of the process may lock
// the thread that started a command if the goroutine that started it moves
// to another thread meanwhile. Pinned, that thread runs only this
// goroutine, which unlocks before it returns, so the thread outlives the
// command and only the death of the process can send the signal.
func pinThread() (unpin func()) {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
