//go:build unix

package exechandler

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// killGroup kills every process in the command's group: process group
// pgid, or the group of its own that command p leads when pgid is 0. A
// group that is already gone is not an error.
func killGroup(p *os.Process, pgid int) error {
	if p == nil {
		return nil
	}
	if pgid == 0 {
		pgid = p.Pid
	}
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// guardShell runs the guard. Every Unix system has it; tests take it away.
var guardShell = "/bin/sh"

// guardScript ignores the signals a command may send its own group, waits
// for the end of its stdin, then kills its group, itself included.
const guardScript = `trap '' HUP INT QUIT TERM; read x; kill -9 0`

// A guard kills a command's process group when the worker dies. It is a
// shell reading a pipe whose write end only the worker holds. However the
// worker ends, SIGKILL included, the kernel closes that end, the guard
// reads the end of the pipe and kills the group: the command's children
// too, which no parent-death signal reaches.
//
// The guard starts first, in a new process group whose id is its pid, and
// the command joins that group when it starts: a sibling of the guard
// rather than its child, so the command stays a direct child of the
// worker. Started the other way round, a command could run, and start
// children, before its guard existed, and a worker that died meanwhile
// would leave them running.
//
// As the group's leader the guard also keeps the group's id from being
// reused while the worker may still kill it by that id, after the command
// itself has been reaped.
type guard struct {
	cmd *exec.Cmd
	w   *os.File // never written; closed by the kernel if the worker dies
}

// startGuard starts a guard in a new process group, which the command
// joins (newProcessGroup(g.pgid())).
func startGuard() (*guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(guardShell, "-c", guardScript)
	cmd.Stdin = r
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	return &guard{cmd: cmd, w: w}, nil
}

// pgid returns the id of the guard's process group, or 0 for a nil guard
// (one that could not start): the command then leads a group of its own.
func (g *guard) pgid() int {
	if g == nil {
		return 0
	}
	return g.cmd.Process.Pid
}

// stop ends the guard, once the worker has killed the group itself. A nil
// guard does nothing.
func (g *guard) stop() {
	if g == nil {
		return
	}
	_ = g.cmd.Process.Kill()
	g.w.Close()
	_ = g.cmd.Wait()
}
