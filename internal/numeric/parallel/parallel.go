// Package parallel runs the parts of one step of the decoding loop on the
// machine's cores: the rows of a beam step, the chunks of one wide row. A
// device computes while the CPU waits, so the Go side of a step is on the
// critical path, and on a GPU machine the cores are otherwise idle.
//
// Callers split their work into parts whose results they combine in a
// fixed order, so that a result never depends on how many cores ran it.
package parallel

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Job is work split into parts: Do(i) does part i. Parts of one Run may run
// at the same time and must not share what they write.
type Job interface {
	Do(part int)
}

// MaxParts is the most parts one Run takes.
const MaxParts = 1<<16 - 1

// A Runner runs the parts of one job at a time on the caller's goroutine
// and the shared workers. A caller keeps one in its long-lived state, so
// that Run allocates nothing; the zero Runner is ready to use.
//
// Parts are claimed, not handed out: the caller claims parts until none is
// left, so it never waits for a part that no worker has started. A
// sleeping worker takes tens of microseconds to wake (65 on this project's
// 2-core VM), often longer than a whole job; the Go scheduler also queues a
// woken goroutine behind the one that woke it. A worker that wakes after
// the job is done finds nothing to claim. A worker that is free claims
// parts of every open Run, so while a part waits, a free worker starts the
// next one, however many Runs woke the workers before.
type Runner struct {
	// state is epoch<<32 | next<<16 | n: the Run it belongs to, the next
	// part to claim and the number of parts.
	state atomic.Uint64
	job   Job
	wg    sync.WaitGroup
}

var (
	start   sync.Once
	workers int
	// wake holds at most one token per worker. A token carries no Run: a
	// worker that takes one helps every open Run, so a token never goes
	// stale, and a send that finds the buffer full loses nothing: each
	// token there is taken after the sender's Run was opened.
	wake chan struct{}

	mu   sync.Mutex
	runs []*Runner // the Runners whose Run is open, in no particular order
)

// Workers is how many goroutines may run parts at once: GOMAXPROCS at the
// first Run, the caller's included.
func Workers() int { return runtime.GOMAXPROCS(0) }

// startWorkers starts the shared goroutines once; they live as long as the
// process, blocked on a channel while idle.
func startWorkers() {
	workers = runtime.GOMAXPROCS(0) - 1
	wake = make(chan struct{}, workers)
	for range workers {
		go func() {
			for range wake {
				for {
					r, epoch := unclaimed()
					if r == nil {
						break
					}
					r.help(epoch)
				}
			}
		}()
	}
}

// unclaimed returns an open Run with a part left to claim and its epoch,
// or nil. A Runner is open from after it stored its Run's state until all
// its parts are claimed, so a part left to claim is one of that Run.
func unclaimed() (*Runner, uint64) {
	mu.Lock()
	defer mu.Unlock()
	for _, r := range runs {
		if s := r.state.Load(); s>>16&MaxParts < s&MaxParts {
			return r, s >> 32
		}
	}
	return nil, 0
}

// opened adds r to the open Runs.
func opened(r *Runner) {
	mu.Lock()
	runs = append(runs, r)
	mu.Unlock()
}

// closed removes r from the open Runs.
func closed(r *Runner) {
	mu.Lock()
	for i, o := range runs {
		if o == r {
			runs[i] = runs[len(runs)-1]
			runs = runs[:len(runs)-1]
			break
		}
	}
	mu.Unlock()
}

// help claims and does parts of the Run of the given epoch until none is
// left.
func (r *Runner) help(epoch uint64) {
	for {
		s := r.state.Load()
		next, n := s>>16&MaxParts, s&MaxParts
		if s>>32 != epoch || next >= n {
			return
		}
		if !r.state.CompareAndSwap(s, s+1<<16) {
			continue
		}
		r.job.Do(int(next))
		r.wg.Done()
	}
}

// Run does parts 0..n-1 of job and returns when all are done. Run must not
// be called on the same Runner by two goroutines at once. With one core,
// or one part, Run is a plain loop.
func (r *Runner) Run(n int, job Job) {
	if n > MaxParts {
		panic(fmt.Sprintf("parallel: %d parts exceed %d", n, MaxParts))
	}
	if n <= 1 || runtime.GOMAXPROCS(0) < 2 {
		for i := range n {
			job.Do(i)
		}
		return
	}
	start.Do(startWorkers)
	r.job = job
	r.wg.Add(n)
	epoch := r.state.Load()>>32 + 1
	r.state.Store(epoch<<32 | uint64(n))
	opened(r)
	for range min(n-1, workers) {
		select {
		case wake <- struct{}{}:
		default: // every worker has a token to take already
		}
	}
	r.help(epoch)
	closed(r) // every part is claimed
	r.wg.Wait()
}
