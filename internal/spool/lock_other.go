//go:build !unix

package spool

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockDir marks dir as in use with a lock file created exclusively: where advisory locks are not
// available, a file left by a crash must be removed by hand (the error says which).
func lockDir(dir, inUse string) (*os.File, error) {
	name := filepath.Join(dir, "lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the spool folder %s is in use (or its last owner crashed: then remove %s): %s", dir, name, inUse)
	}
	return f, nil
}

func unlockDir(f *os.File) {
	f.Close()
	os.Remove(f.Name())
}
