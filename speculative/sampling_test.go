package speculative_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Transition tables of a 4-token Markov chain: the target's and a draft's
// that disagrees with it (rows are next-token probabilities).
var (
	targetT = [][]float64{
		{0.10, 0.50, 0.25, 0.15},
		{0.40, 0.10, 0.20, 0.30},
		{0.25, 0.25, 0.10, 0.40},
		{0.15, 0.35, 0.40, 0.10},
	}
	draftT = [][]float64{
		{0.40, 0.20, 0.30, 0.10},
		{0.10, 0.50, 0.20, 0.20},
		{0.25, 0.40, 0.25, 0.10},
		{0.30, 0.30, 0.20, 0.20},
	}
)

func markovFunc(tab [][]float64) backend.ModelFunc {
	row := make([]float32, len(tab))
	return func(h []int32) ([]float32, error) {
		for i, p := range tab[h[len(h)-1]] {
			row[i] = float32(math.Log(p))
		}
		return row, nil
	}
}

// exact returns the probability of every 3-token continuation of last
// under tab warped by temperature and top-k (0: off), computed in float64
// independently of package logits.
func exact(tab [][]float64, last int, temp float64, topK int) []float64 {
	next := func(prev int) []float64 {
		w := make([]float64, len(tab))
		for i, p := range tab[prev] {
			w[i] = math.Exp(math.Log(p) / temp)
		}
		if topK > 0 {
			for i := range w {
				rank := 0
				for j := range w {
					if w[j] > w[i] {
						rank++
					}
				}
				if rank >= topK {
					w[i] = 0
				}
			}
		}
		var s float64
		for _, x := range w {
			s += x
		}
		for i := range w {
			w[i] /= s
		}
		return w
	}
	n := len(tab)
	out := make([]float64, n*n*n)
	for a, pa := range next(last) {
		for b, pb := range next(a) {
			for c, pc := range next(b) {
				out[(a*n+b)*n+c] = pa * pb * pc
			}
		}
	}
	return out
}

// chiSquare is Pearson's statistic of counts against probabilities (cells of
// probability 0 must be empty), and its degrees of freedom.
func chiSquare(t *testing.T, counts []int, probs []float64) (float64, int) {
	total := 0
	for _, c := range counts {
		total += c
	}
	var x2 float64
	df := -1
	for i, p := range probs {
		if p == 0 {
			require.Zero(t, counts[i], "cell %d is impossible", i)
			continue
		}
		e := p * float64(total)
		x2 += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
		df++
	}
	return x2, df
}

// chiSquareQuantile is the (1-alpha) quantile of the chi-square distribution
// with df degrees of freedom, by Wilson and Hilferty's approximation
// (z the standard normal quantile of 1-alpha), accurate to a fraction of a
// percent for df > 30.
func chiSquareQuantile(df int, z float64) float64 {
	k := float64(df)
	h := 2 / (9 * k)
	return k * math.Pow(1-h+z*math.Sqrt(h), 3)
}

// Speculative sampling gives the target's distribution exactly: the
// empirical distribution of the three tokens after a prompt, over 40000
// seeds, passes Pearson's chi-square test against the exact distribution of
// the target (computed from its transition table) at a false-alarm rate of
// 0.1% per case (z = 3.0902), for a draft model that disagrees with the
// target (Leviathan's rule) and for prompt lookup (candidates compared with
// the target's draws), with and without warpers. The seeds are fixed, so
// the outcome is reproducible. The test has power: the same counts fail
// against the draft model's distribution by far.
func TestSpeculativeSamplingDistribution(t *testing.T) {
	const n, z = 40000, 3.0902
	cases := []struct {
		name   string
		lookup bool
		temp   float64
		topK   int
		k      int
	}{
		{"draft/k2", false, 1, 0, 2},
		{"draft/k1", false, 1, 0, 1},
		{"draft/warped", false, 0.7, 3, 3},
		{"lookup", true, 1, 0, 3},
		{"lookup/warped", true, 0.7, 3, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := genconfig.Default()
			three := 3
			cfg.MaxNewTokens = &three
			cfg.DoSample = true
			cfg.TopK = tc.topK
			cfg.Temperature = tc.temp
			cfg.NumAssistantTokens = tc.k
			cfg.AssistantConfidenceThreshold = 0
			prompt := []int32{0}
			if tc.lookup {
				cfg.PromptLookupNumTokens = &tc.k
				// The lookup proposes the continuation of the earlier 0: 1, 2.
				prompt = []int32{0, 1, 2, 3, 0}
			}
			reqs := make([]generation.Request, n)
			for i := range reqs {
				reqs[i] = generation.Request{Prompt: prompt, Config: cfg, Seed: uint64(i)}
			}
			target := backend.NewMemoryBackend(4, 8, markovFunc(targetT))
			var draft backend.Backend
			if !tc.lookup {
				draft = backend.NewMemoryBackend(4, 8, markovFunc(draftT))
			}
			res, err := newGen(t, target, draft).Generate(context.Background(), reqs)
			require.NoError(t, err)
			counts := make([]int, 64)
			for _, r := range res {
				require.Len(t, r.Tokens, 3)
				counts[(r.Tokens[0]*4+r.Tokens[1])*4+r.Tokens[2]]++
			}
			st := stats(res)
			if tc.lookup {
				// The target's own draws decide: the plain loop's tokens, seed for seed.
				assert.Equal(t, tokens(plainMarkov(t, reqs)), tokens(res))
			}
			x2, df := chiSquare(t, counts, exact(targetT, 0, tc.temp, tc.topK))
			limit := chiSquareQuantile(df, z)
			t.Logf("chi-square %.1f, df %d, 0.1%% limit %.1f; acceptance %.2f, %.2f accepted per step",
				x2, df, limit, st.AcceptanceRate(), st.MeanAccepted())
			assert.Less(t, x2, limit, "speculative sampling departs from the target's distribution")
			assert.Positive(t, st.Accepted)
			assert.Less(t, st.Accepted, st.Drafted)

			other := draftT
			if tc.lookup {
				other = [][]float64{{0.25, 0.25, 0.25, 0.25}, {0.25, 0.25, 0.25, 0.25}, {0.25, 0.25, 0.25, 0.25}, {0.25, 0.25, 0.25, 0.25}}
			}
			x2o, _ := chiSquare(t, counts, positive(exact(other, 0, tc.temp, tc.topK)))
			assert.Greater(t, x2o, 10*limit, "the test cannot tell another distribution apart")
		})
	}
}

// plainMarkov decodes reqs on the target chain without speculation.
func plainMarkov(t *testing.T, reqs []generation.Request) []generation.Result {
	t.Helper()
	cfg := reqs[0].Config.Clone()
	cfg.PromptLookupNumTokens = nil
	plain := slices.Clone(reqs)
	for i := range plain {
		plain[i].Config = cfg
	}
	res, err := generation.NewGenerator(backend.NewMemoryBackend(4, 8, markovFunc(targetT)), nil).Generate(context.Background(), plain)
	require.NoError(t, err)
	return res
}

// positive replaces zeros by a tiny probability, so that the power check
// measures distance rather than failing on an impossible cell.
func positive(p []float64) []float64 {
	for i := range p {
		p[i] = max(p[i], 1e-6)
	}
	return p
}
