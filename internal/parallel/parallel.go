// Package parallel runs the parts of one step of the decoding loop on the
// machine's cores: the rows of a beam step, the chunks of one wide row. A
// device computes while the CPU waits, so the Go side of a step is on the
// critical path, and on a GPU machine the cores are otherwise idle.
//
// Callers split their work into parts whose results they combine in a
// fixed order, so that a result never depends on how many cores ran it.
package parallel

import (
	"runtime"
	"sync"
)

// Job is work split into parts: Do(i) does part i. Parts of one Run may run
// at the same time and must not share what they write.
type Job interface {
	Do(part int)
}

type task struct {
	job  Job
	part int
	wg   *sync.WaitGroup
}

var (
	start sync.Once
	tasks chan task
)

// Workers is how many goroutines may run parts at once: GOMAXPROCS at the
// first Run, the caller's included.
func Workers() int { return runtime.GOMAXPROCS(0) }

// workers starts the shared goroutines once; they live as long as the
// process, blocked on a channel while idle.
func workers() {
	n := runtime.GOMAXPROCS(0) - 1
	tasks = make(chan task, 64) // a part per 8192 logits of bench-1b's rows
	for range n {
		go work()
	}
}

// work runs tasks, sleeping on the channel between them.
func work() {
	for t := range tasks {
		t.job.Do(t.part)
		t.wg.Done()
	}
}

// Run does parts 0..n-1 of job and returns when all are done. The caller
// does part 0 and every part no worker has taken by then; wg must be unused
// by others during the call (a field of the caller's long-lived state, so
// that Run allocates nothing). With one core, Run is a plain loop.
func Run(n int, job Job, wg *sync.WaitGroup) {
	if n <= 1 || runtime.GOMAXPROCS(0) < 2 {
		for i := range n {
			job.Do(i)
		}
		return
	}
	start.Do(workers)
	wg.Add(n - 1)
	for i := 1; i < n; i++ {
		select {
		case tasks <- task{job: job, part: i, wg: wg}:
		default: // every worker is busy: do it here
			job.Do(i)
			wg.Done()
		}
	}
	job.Do(0)
	// The parts no worker has taken yet (a sleeping worker takes tens of
	// microseconds to wake: 65 on this project's 2-core VM), and any other
	// caller's: each is someone's to finish.
	for {
		select {
		case t := <-tasks:
			t.job.Do(t.part)
			t.wg.Done()
			continue
		default:
		}
		break
	}
	wg.Wait()
}
