//go:build asan

package asan

// Enabled reports whether the binary was built with -asan.
const Enabled = true
