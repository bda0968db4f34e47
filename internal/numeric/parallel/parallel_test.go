package parallel

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

type squares struct {
	out   []int
	calls atomic.Int32
}

func (s *squares) Do(i int) {
	s.out[i] = i * i
	s.calls.Add(1)
}

func TestRunDoesEveryPartOnce(t *testing.T) {
	var r Runner
	for _, n := range []int{0, 1, 2, 3, 17, 200, MaxParts} {
		s := &squares{out: make([]int, n)}
		r.Run(n, s)
		assert.Equal(t, int32(n), s.calls.Load(), "n=%d", n)
		for i, v := range s.out {
			assert.Equal(t, i*i, v)
		}
	}
	assert.Panics(t, func() { r.Run(MaxParts+1, &squares{}) })
}

func TestRunConcurrentCallers(t *testing.T) {
	var outer sync.WaitGroup
	for c := range 8 {
		outer.Add(1)
		go func() {
			defer outer.Done()
			var r Runner
			for range 50 {
				s := &squares{out: make([]int, 9+c)}
				r.Run(len(s.out), s)
				assert.Equal(t, int32(len(s.out)), s.calls.Load())
			}
		}()
	}
	outer.Wait()
}

func TestRunAllocatesNothing(t *testing.T) {
	var r Runner
	s := &squares{out: make([]int, 4)}
	r.Run(4, s) // start the workers
	assert.Zero(t, testing.AllocsPerRun(100, func() { r.Run(4, s) }))
}

// nested runs a Run of its own in each part, as a beam step's rows run
// their log-softmax's chunks.
type nested struct {
	inner   []*squares
	runners []Runner
}

func (n *nested) Do(i int) { n.runners[i].Run(len(n.inner[i].out), n.inner[i]) }

// Parts that run parts of their own finish, every inner part once.
func TestRunNested(t *testing.T) {
	var r Runner
	for range 100 {
		n := &nested{runners: make([]Runner, 6)}
		for i := range 6 {
			n.inner = append(n.inner, &squares{out: make([]int, 5+i)})
		}
		r.Run(6, n)
		for i, s := range n.inner {
			assert.Equal(t, int32(5+i), s.calls.Load())
		}
	}
}

// slowParts records which goroutine-independent facts a late worker could
// break: every part done once, none after Run returned.
type slowParts struct {
	done     []atomic.Int32
	returned atomic.Bool
	late     atomic.Int32
}

func (s *slowParts) Do(i int) {
	if s.returned.Load() {
		s.late.Add(1)
	}
	time.Sleep(time.Duration(i%3) * 50 * time.Microsecond)
	s.done[i].Add(1)
}

// Runs one after the other on one Runner, with workers that wake late:
// a call for an earlier Run never does a part of a later one, nor one after
// its Run returned.
func TestRunLateWorkers(t *testing.T) {
	var r Runner
	for iter := range 300 {
		s := &slowParts{done: make([]atomic.Int32, 1+iter%7)}
		r.Run(len(s.done), s)
		s.returned.Store(true)
		for i := range s.done {
			assert.Equal(t, int32(1), s.done[i].Load(), "iter %d part %d", iter, i)
		}
		if iter%10 == 0 {
			time.Sleep(200 * time.Microsecond) // let the workers sleep
		}
		assert.Zero(t, s.late.Load())
	}
}

// gate is a job whose parts signal that they started and then wait for
// release.
type gate struct {
	started chan int
	release chan struct{}
}

func (g *gate) Do(i int) {
	g.started <- i
	<-g.release
}

// rendezvous is a job of two parts in which part 0 waits for part 1 to
// start, so it finishes only if a worker claims part 1 while the caller
// waits in part 0.
type rendezvous struct {
	zeroWaits chan struct{}
	oneRan    chan struct{}
}

func (r *rendezvous) Do(i int) {
	if i == 0 {
		close(r.zeroWaits)
		<-r.oneRan
		return
	}
	close(r.oneRan)
}

// Wake-ups sent while every worker was busy (many Runs done by their
// callers alone) do not cost a later Run its workers: when the workers are
// free again, one claims the part the caller waits for.
func TestRunAfterWakeupsWhileBusy(t *testing.T) {
	var r Runner
	r.Run(2, &squares{out: make([]int, 2)}) // start the workers
	if workers < 1 {
		t.Skip("one core: no workers")
	}

	// Hold every worker, and the caller, in a part of one Run.
	busy := &gate{started: make(chan int, workers+1), release: make(chan struct{})}
	busyDone := make(chan struct{})
	go func() {
		var held Runner
		held.Run(workers+1, busy)
		close(busyDone)
	}()
	for range workers + 1 {
		<-busy.started
	}

	// Runs that their callers do alone send more wake-ups than a worker
	// can hold.
	var quick Runner
	for range 8 * (workers + 1) {
		quick.Run(2, &squares{out: make([]int, 2)})
	}

	// A Run whose part 0 waits for part 1, opened while the workers are
	// busy, then the workers freed.
	meet := &rendezvous{zeroWaits: make(chan struct{}), oneRan: make(chan struct{})}
	meetDone := make(chan struct{})
	go func() {
		var waiting Runner
		waiting.Run(2, meet)
		close(meetDone)
	}()
	<-meet.zeroWaits
	close(busy.release)
	<-busyDone

	deadline := make(<-chan time.Time)
	if d, ok := t.Deadline(); ok {
		deadline = time.After(time.Until(d) - 5*time.Second)
	}
	select {
	case <-meetDone:
	case <-deadline:
		t.Fatal("no worker claimed part 1 while the caller waited in part 0")
	}
}
