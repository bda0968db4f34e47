//go:build !linux

package clitest

import (
	"errors"
	"os"
)

// OpenPTY is implemented on Linux only; elsewhere tests that need a
// terminal skip.
func OpenPTY() (master, slave *os.File, err error) {
	return nil, nil, errors.New("pseudo-terminals are opened on Linux only")
}
