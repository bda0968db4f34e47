// Package testhook holds the points at which tests observe and steer the
// library's progress without timing it. Outside tests every hook is unset
// and costs one atomic load.
package testhook

import (
	"context"
	"sync/atomic"
)

var decoding atomic.Pointer[func(context.Context)]

// SetDecoding makes llamacpp's Decode call f with its Go context once the
// context's cancellation is armed and right before llama.cpp evaluates
// the batch: a cancellation f makes is seen by llama.cpp's abort check.
// The returned function unsets it.
func SetDecoding(f func(gctx context.Context)) (unset func()) {
	decoding.Store(&f)
	return func() { decoding.Store(nil) }
}

// Decoding calls the function SetDecoding set, if any.
func Decoding(gctx context.Context) {
	if f := decoding.Load(); f != nil {
		(*f)(gctx)
	}
}

var generated atomic.Pointer[func()]

// SetGenerated makes the generation engine's loop call f after each token
// it generates, before the token's request sees it: a test can hold the
// loop there until the state it needs. The returned function unsets it.
func SetGenerated(f func()) (unset func()) {
	generated.Store(&f)
	return func() { generated.Store(nil) }
}

// Generated calls the function SetGenerated set, if any.
func Generated() {
	if f := generated.Load(); f != nil {
		(*f)()
	}
}

var partitioned atomic.Pointer[func(int)]

// SetPartitioned makes spectok's Partition call f with the work it did:
// the steps of its scanning and claiming loops and the occurrences it
// ordered, which a test compares across lengths instead of timing them.
// The returned function unsets it.
func SetPartitioned(f func(steps int)) (unset func()) {
	partitioned.Store(&f)
	return func() { partitioned.Store(nil) }
}

// Partitioned calls the function SetPartitioned set, if any.
func Partitioned(steps int) {
	if f := partitioned.Load(); f != nil {
		(*f)(steps)
	}
}
