package beam_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/parity"
	"github.com/llamaloop/llamaloop/internal/parity/beamcheck"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParityVectors(t *testing.T) {
	data, err := os.ReadFile("../internal/parity/testdata/beam.json")
	require.NoError(t, err)
	var file struct {
		Kind  string            `json:"kind"`
		Cases []json.RawMessage `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(data, &file))
	require.Equal(t, "beam", file.Kind)
	require.Len(t, file.Cases, 60)
	for _, raw := range file.Cases {
		assert.NoError(t, beamcheck.Run(raw), parity.CaseID(raw))
	}
}

// lastTokenModel is the model of a small worked example of transformers'
// beam search: the next-token distribution depends only on the last token.
func lastTokenModel() backend.ModelFunc {
	p := [][]float64{
		{.12, .50, .30, .08},
		{.05, .05, .30, .60},
		{.10, .60, .20, .10},
		{.25, .25, .25, .25},
	}
	buf := make([]float32, 4)
	return func(h []int32) ([]float32, error) {
		for i, v := range p[h[len(h)-1]] {
			buf[i] = float32(math.Log(v))
		}
		return buf, nil
	}
}

func workedConfig(set func(c *genconfig.Config)) *genconfig.Config {
	return cfgOf(func(c *genconfig.Config) {
		c.NumBeams = 2
		c.EOSTokenID = []int32{3}
		c.MaxLength = 4
		c.LengthPenalty = 1
		c.NumReturnSequences = 2
		c.PadTokenID = int32p(2)
		set(c)
	})
}

func transformers(t *testing.T, model backend.ModelFunc, vocab int, prompts [][]int32, cfg *genconfig.Config) *beam.Result {
	t.Helper()
	b := backend.NewMemoryBackend(vocab, len(prompts)*cfg.NumBeams, model)
	res, err := beam.Search(context.Background(), b, prompts, beam.Options{Config: cfg})
	require.NoError(t, err)
	requireEmpty(t, b)
	return res
}

// TestWorkedExample checks the numbers of the worked example on
// lastTokenModel, which were produced by running transformers 4.57.6's code.
func TestWorkedExample(t *testing.T) {
	res := transformers(t, lastTokenModel(), 4, [][]int32{{0}}, workedConfig(func(*genconfig.Config) {}))
	assert.Equal(t, [][]int32{{0, 1, 3, 2}, {0, 2, 1, 3}}, res.Sequences)
	assert.InDeltaSlice(t, []float32{-0.6019864, -0.7418747}, res.SequencesScores, 1e-6)
	assert.Equal(t, [][]int32{{0, 0, -1}, {0, 1, 0}}, res.BeamIndices)
	require.Len(t, res.TransitionScores, 2)
	assert.InDeltaSlice(t, []float32{-0.69315, -0.51083, 0}, res.TransitionScores[0], 1e-5)
	assert.InDeltaSlice(t, []float32{-1.20397, -0.51083, -0.51083}, res.TransitionScores[1], 1e-5)
	require.Len(t, res.Hypotheses[0], 2)
	assert.Equal(t, tokens(1, 3), res.Hypotheses[0][0].Tokens)
	assert.True(t, res.Hypotheses[0][0].Finished)
	assert.InDelta(t, -1.20397, res.Hypotheses[0][0].LogProb, 1e-5)
	assert.Equal(t, tokens(2, 1, 3), res.Hypotheses[0][1].Tokens)

	// A pad of 0 is falsy in transformers: the fill becomes eos.
	res = transformers(t, lastTokenModel(), 4, [][]int32{{0}}, workedConfig(func(c *genconfig.Config) { c.PadTokenID = int32p(0) }))
	assert.Equal(t, [][]int32{{0, 1, 3, 3}, {0, 2, 1, 3}}, res.Sequences)
}

func TestWorkedExampleEarlyStopping(t *testing.T) {
	for _, es := range []genconfig.EarlyStopping{genconfig.EarlyStoppingFalse, genconfig.EarlyStoppingTrue} {
		res := transformers(t, lastTokenModel(), 4, [][]int32{{0}}, workedConfig(func(c *genconfig.Config) {
			c.MaxLength = 8
			c.EarlyStopping = es
		}))
		assert.Equal(t, [][]int32{{0, 1, 3, 2}, {0, 2, 1, 3}}, res.Sequences, "%v", es)
		assert.InDeltaSlice(t, []float32{-0.6019864, -0.7418747}, res.SequencesScores, 1e-6)
	}

	res := transformers(t, lastTokenModel(), 4, [][]int32{{0}}, workedConfig(func(c *genconfig.Config) {
		c.MaxLength = 8
		c.EarlyStopping = genconfig.EarlyStoppingNever
	}))
	assert.Equal(t, [][]int32{{0, 1, 3, 2, 2}, {0, 1, 2, 1, 3}}, res.Sequences)
	assert.InDeltaSlice(t, []float32{-0.60199, -0.72969}, res.SequencesScores, 1e-5)

	res = transformers(t, lastTokenModel(), 4, [][]int32{{0}}, workedConfig(func(c *genconfig.Config) {
		c.MaxLength = 8
		c.LengthPenalty = 2
	}))
	assert.Equal(t, [][]int32{{0, 2, 1, 2, 1, 2, 1, 3}, {0, 1, 2, 1, 2, 1, 2, 1}}, res.Sequences)
	assert.InDeltaSlice(t, []float32{-0.11541, -0.11913}, res.SequencesScores, 1e-5)
}

// TestPromptsAreIndependent checks that a batch gives every prompt the
// result it gets alone, also when the backend's slots hold fewer prompts
// than the batch (prompts then wait for a free group of slots), and that
// each prompt is evaluated once.
func TestPromptsAreIndependent(t *testing.T) {
	model := hashModel(9, 4)
	prompts := [][]int32{{1, 2, 3}, {4, 4}, {5, 6}, {7, 7, 7, 7}}
	cfg := cfgOf(func(c *genconfig.Config) {
		c.NumBeams = 3
		c.NumReturnSequences = 2
		c.MaxNewTokens = intp(6)
		c.EOSTokenID = []int32{0, 8}
		c.RepetitionPenalty = 1.3
		c.NoRepeatNGramSize = 2
	})
	for _, rule := range []beam.Rule{beam.Transformers, beam.Narrowing} {
		var alone []beam.Hypothesis
		for _, p := range prompts {
			res, err := beam.Search(context.Background(), backend.NewMemoryBackend(9, 3, model), [][]int32{p}, beam.Options{Rule: rule, Config: cfg})
			require.NoError(t, err)
			alone = append(alone, res.Hypotheses[0]...)
		}
		for _, slots := range []int{3, 5, 12} {
			b := backend.NewMemoryBackend(9, slots, model)
			rec := &recorder{Backend: b}
			res, err := beam.Search(context.Background(), rec, prompts, beam.Options{Rule: rule, Config: cfg})
			require.NoError(t, err)
			var got []beam.Hypothesis
			for _, h := range res.Hypotheses {
				got = append(got, h...)
			}
			assert.Equal(t, alone, got, "%v, slots %d", rule, slots)
			if rule == beam.Transformers {
				assert.Len(t, res.Sequences, len(prompts)*2)
			}
			var promptFeeds [][]int32
			for _, fs := range rec.feeds {
				for _, f := range fs {
					if len(f.Tokens) > 1 {
						promptFeeds = append(promptFeeds, f.Tokens)
					}
				}
			}
			assert.ElementsMatch(t, prompts, promptFeeds, "each prompt is evaluated once")
			assert.LessOrEqual(t, rec.maxRows, slots/3*3)
			requireEmpty(t, b)
		}
	}
}
