//go:build !asan

package clitest

var buildFlags []string
