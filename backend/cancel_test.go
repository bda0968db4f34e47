package backend_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
)

// rampModel's logits favour the token after the last one, so every entry
// point keeps generating until it is stopped.
func rampModel(vocab int) backend.ModelFunc {
	buf := make([]float32, vocab)
	return func(history []int32) ([]float32, error) {
		for i := range buf {
			buf[i] = -float32((i - int(history[len(history)-1]) - 1 + vocab) % vocab)
		}
		return buf, nil
	}
}

// The package documentation's cancellation contract, checked the same way on
// each of the three entry points: the context ends after the third step;
// the call stops there (no fourth model call), returns the three steps it
// completed, reports context.Canceled itself and leaves every slot empty.
func TestCancellationContract(t *testing.T) {
	const vocab, after = 8, 3
	cfg := genconfig.Default()
	maxNew := 20
	cfg.MaxNewTokens = &maxNew

	t.Run("generation", func(t *testing.T) {
		mem := backend.NewMemoryBackend(vocab, 1, rampModel(vocab))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var tokens []int32
		var last generation.Event
		for ev, err := range generation.NewGenerator(mem, nil).Stream(ctx, []generation.Request{{Prompt: []int32{0}, Config: cfg}}) {
			require.NoError(t, err, "a cancellation is not a stream error")
			if ev.Token >= 0 {
				tokens = append(tokens, ev.Token)
			}
			if len(tokens) == after {
				cancel()
			}
			last = ev
		}
		assert.Equal(t, []int32{1, 2, 3}, tokens)
		assert.Equal(t, generation.FinishCancelled, last.Finish)
		assert.Equal(t, context.Canceled, last.Err)
		assert.Equal(t, after, mem.Stats().ModelCalls)
		assert.Empty(t, mem.History(0))
	})

	t.Run("beam", func(t *testing.T) {
		mem := backend.NewMemoryBackend(vocab, 2, rampModel(vocab))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		bcfg := cfg.Clone()
		bcfg.NumBeams = 2
		done, err := beam.Search(context.Background(), backend.NewMemoryBackend(vocab, 2, rampModel(vocab)),
			[][]int32{{0}}, beam.Options{Config: bcfg})
		require.NoError(t, err)
		res, err := beam.Search(ctx, mem, [][]int32{{0}, {0}}, beam.Options{Config: bcfg, Progress: func(p beam.Progress) {
			if p.Prompt == 1 && p.Step == after {
				cancel()
			}
		}})
		assert.Equal(t, context.Canceled, err)
		require.NotNil(t, res)
		assert.Equal(t, done.Hypotheses[0], res.Hypotheses[0], "the completed prompt is returned")
		assert.Equal(t, []bool{false, true}, res.Interrupted)
		require.Len(t, res.Hypotheses[1], 1, "the interrupted prompt's best hypothesis so far")
		assert.True(t, res.Hypotheses[1][0].Partial)
		assert.Len(t, res.Hypotheses[1][0].Tokens, after)
		assert.Equal(t, done.Stats.Evals+after, res.Stats.Evals)
		for s := range mem.Slots() {
			assert.Empty(t, mem.History(s))
		}
	})

	t.Run("mirostat", func(t *testing.T) {
		s, err := mirostat.New(mirostat.Config{Version: mirostat.V2, Tau: 1, Eta: 0.1})
		require.NoError(t, err)
		model, calls := rampModel(vocab), 0
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		hist := make([]int32, 0, 32)
		gen, err := s.Generate(ctx, func(tokens []int32) ([]float32, error) {
			calls++
			hist = hist[:0]
			for _, t := range tokens {
				hist = append(hist, int32(t))
			}
			return model(hist)
		}, logits.NewSource(1), mirostat.GenerateOptions{Prompt: []int32{0}, MaxTokens: 20, Observer: func(mirostat.Step) bool {
			if calls == after {
				cancel()
			}
			return true
		}})
		assert.Equal(t, context.Canceled, err)
		assert.Len(t, gen.Tokens, after)
		assert.Equal(t, after, calls)
	})
}
