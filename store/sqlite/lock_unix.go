//go:build unix

package sqlite

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive, non-blocking lock on f; it dies with the
// process, so a kill -9 leaves none behind.
func lockFile(f *os.File) (unlock func(), err error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, nil
}
