package parallel

import (
	"sync"
	"sync/atomic"
	"testing"

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
	var wg sync.WaitGroup
	for _, n := range []int{0, 1, 2, 3, 17, 200} {
		s := &squares{out: make([]int, n)}
		Run(n, s, &wg)
		assert.Equal(t, int32(n), s.calls.Load(), "n=%d", n)
		for i, v := range s.out {
			assert.Equal(t, i*i, v)
		}
	}
}

func TestRunConcurrentCallers(t *testing.T) {
	var outer sync.WaitGroup
	for c := range 8 {
		outer.Add(1)
		go func() {
			defer outer.Done()
			var wg sync.WaitGroup
			for range 50 {
				s := &squares{out: make([]int, 9+c)}
				Run(len(s.out), s, &wg)
				assert.Equal(t, int32(len(s.out)), s.calls.Load())
			}
		}()
	}
	outer.Wait()
}

func TestRunAllocatesNothing(t *testing.T) {
	var wg sync.WaitGroup
	s := &squares{out: make([]int, 4)}
	Run(4, s, &wg) // start the workers
	assert.Zero(t, testing.AllocsPerRun(100, func() { Run(4, s, &wg) }))
}

// nested runs a Run of its own in each part, as a beam step's rows run
// their log-softmax's chunks.
type nested struct {
	inner []*squares
	wgs   []sync.WaitGroup
}

func (n *nested) Do(i int) { Run(len(n.inner[i].out), n.inner[i], &n.wgs[i]) }

// Parts that run parts of their own finish, every inner part once: a caller
// that waits takes queued parts, its own or another's.
func TestRunNested(t *testing.T) {
	for range 100 {
		n := &nested{wgs: make([]sync.WaitGroup, 6)}
		for i := range 6 {
			n.inner = append(n.inner, &squares{out: make([]int, 5+i)})
		}
		var wg sync.WaitGroup
		Run(6, n, &wg)
		for i, s := range n.inner {
			assert.Equal(t, int32(5+i), s.calls.Load())
		}
	}
}
