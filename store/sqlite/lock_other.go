//go:build !unix

package sqlite

import "os"

// lockFile is a no-op where flock does not exist; the server's data
// directory lock is then the only guard against a second Store.
func lockFile(*os.File) (unlock func(), err error) {
	return func() {}, nil
}
