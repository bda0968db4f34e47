// Package asan tells a test whether the binary was built with -asan
// (`make test-asan`): AddressSanitizer's instrumentation changes what the Go
// runtime counts as allocations, so allocation-count tests skip themselves.
package asan
