package beam_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/logits"
)

// A step large enough (rows × vocabulary >= 2^15) runs the processors, a
// user's too, on several goroutines at once, as logits.Processor and
// Options.User document: each call with its own row and its own scores,
// and never while the search accepts tokens into the rows.
func TestUserProcessorsRunConcurrently(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const vocab = 4096
	var (
		mu         sync.Mutex
		inFlight   = map[*logits.History]bool{}
		scoresAt   = map[*float32]bool{}
		most       int
		shared     atomic.Int32          // calls that found their row or scores already in use
		overlap    = make(chan struct{}) // closed when two calls were first in flight at once
		overlapped sync.Once
	)
	nearDeadline := make(chan struct{})
	if d, ok := t.Deadline(); ok {
		defer time.AfterFunc(time.Until(d)-5*time.Second, func() { close(nearDeadline) }).Stop()
	}
	probe := logits.ProcessorFunc("probe", func(row *logits.History, scores []float32) {
		mu.Lock()
		if inFlight[row] || scoresAt[&scores[0]] {
			shared.Add(1)
		}
		inFlight[row], scoresAt[&scores[0]] = true, true
		most = max(most, len(inFlight))
		if most >= 2 {
			overlapped.Do(func() { close(overlap) })
		}
		// Past the first step (one row), a call holds its row until another
		// call is in flight: the overlap is waited for, not slept for. A
		// search that ran its rows one at a time would wait here until near
		// the test's deadline, and then fail on most.
		wait := most < 2 && row.Len() > row.PromptLen()
		mu.Unlock()
		if wait {
			select {
			case <-overlap:
			case <-nearDeadline:
			}
		}
		mu.Lock()
		delete(inFlight, row)
		delete(scoresAt, &scores[0])
		mu.Unlock()
	})
	cfg := cfgOf(func(c *genconfig.Config) {
		c.NumBeams = 8
		c.MaxNewTokens = intp(4)
	})
	b := backend.NewMemoryBackend(vocab, 8, hashModel(vocab, 5))
	_, err := beam.Search(context.Background(), b, [][]int32{{1, 2}}, beam.Options{Config: cfg, User: []logits.Processor{probe}})
	require.NoError(t, err)
	assert.Greater(t, most, 1, "rows processed at the same time")
	assert.Zero(t, shared.Load(), "a row or a scores buffer in two calls at once")
}
