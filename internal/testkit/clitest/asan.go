//go:build asan

package clitest

// The go command sets the asan build tag for -asan builds: the commands the
// tests run are then built the same way, so that AddressSanitizer watches
// them too and Go's build cache serves the llama.cpp objects already compiled.
var buildFlags = []string{"-asan"}
