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
		mu       sync.Mutex
		inFlight = map[*logits.History]bool{}
		scoresAt = map[*float32]bool{}
		most     int
		shared   atomic.Int32 // calls that found their row or scores already in use
	)
	probe := logits.ProcessorFunc("probe", func(row *logits.History, scores []float32) {
		mu.Lock()
		if inFlight[row] || scoresAt[&scores[0]] {
			shared.Add(1)
		}
		inFlight[row], scoresAt[&scores[0]] = true, true
		most = max(most, len(inFlight))
		mu.Unlock()
		time.Sleep(200 * time.Microsecond) // let the other workers overlap
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
