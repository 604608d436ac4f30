//go:build !unix

package exechandler

import (
	"os"
	"syscall"
)

// newProcessGroup returns nil: process groups are a Unix feature, so here
// only the command itself is killed when its attempt ends.
func newProcessGroup(int) *syscall.SysProcAttr { return nil }

// killGroup kills the command p: there is no group to kill with it.
func killGroup(p *os.Process, _ int) error {
	if p == nil {
		return nil
	}
	return p.Kill()
}

// pinThread does nothing: there is no parent-death signal to tie to a
// thread.
func pinThread() (unpin func()) { return func() {} }

// guard does nothing here: nothing kills a command when its worker dies.
type guard struct{}

func startGuard() (*guard, error) { return nil, nil }

func (*guard) pgid() int { return 0 }

func (*guard) stop() {}
