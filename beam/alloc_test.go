package beam_test

import (
	"context"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/testkit/asan"
	"runtime"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/stretchr/testify/assert"
)

// TestNoPerStepAllocation compares the allocations of a search of 16 new
// tokens with one of 256: steps cost no allocation, only the amortised
// growth of token histories (logarithmic in the length) remains. Beam
// sampling and the one-beam paths (the chooser) are covered too.
func TestNoPerStepAllocation(t *testing.T) {
	if asan.Enabled {
		t.Skip("allocation counts are not meaningful under -asan")
	}
	for _, c := range []struct {
		rule   beam.Rule
		beams  int
		sample bool
	}{
		{beam.Transformers, 4, false}, {beam.Narrowing, 4, false}, {beam.Transformers, 4, true},
		{beam.Transformers, 1, false}, {beam.Transformers, 1, true},
	} {
		allocs := func(maxNew int) float64 {
			b := backend.NewMemoryBackend(64, 8, benchModel(64))
			cfg := genconfig.Default()
			cfg.NumBeams = c.beams
			cfg.DoSample = c.sample
			cfg.MaxNewTokens = intp(maxNew)
			prompts := [][]int32{{1, 2, 3}, {4, 5}}
			return testing.AllocsPerRun(5, func() {
				if _, err := beam.Search(context.Background(), b, prompts, beam.Options{Rule: c.rule, Config: cfg}); err != nil {
					t.Fatal(err)
				}
			})
		}
		short, long := allocs(16), allocs(256)
		t.Logf("%+v: %v allocations for 16 tokens, %v for 256", c, short, long)
		assert.Less(t, long-short, 80.0, "%+v: 240 more steps", c)
	}
}

// TestParallelRowsMatch checks that processing a step's rows on several
// goroutines (large vocabularies) gives the result of one goroutine.
func TestParallelRowsMatch(t *testing.T) {
	const vocab = 4096
	cfg := genconfig.Default()
	cfg.NumBeams = 4
	cfg.NumReturnSequences = 4
	cfg.MaxNewTokens = intp(6)
	cfg.EOSTokenID = []int32{3}
	cfg.RepetitionPenalty = 1.2
	run := func() *beam.Result {
		b := backend.NewMemoryBackend(vocab, 8, hashModel(vocab, 3))
		res, err := beam.Search(context.Background(), b, [][]int32{{1, 2}, {5}}, beam.Options{Config: cfg, OutputScores: true})
		if err != nil {
			t.Fatal(err)
		}
		res.Stats = beam.Stats{}
		return res
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	one := run()
	runtime.GOMAXPROCS(4)
	assert.Equal(t, one, run())
}
