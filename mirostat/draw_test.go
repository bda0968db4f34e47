package mirostat

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/benchrows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// drawRow draws a row of one of the shapes the draw must handle: Gaussian
// logits with peaks (the side-by-side benchmark's), a shuffled Zipf row,
// logits rounded to halves (large groups of ties), a row 1e-4 wide (one
// band holds everything), a row 300 per unit wide (underflowing
// probabilities, the last band), and a constant row; some with masked
// tokens.
func drawRow(r *rand.Rand, n, shape int) []float32 {
	row := make([]float32, n)
	for i := range row {
		switch shape {
		case 0, 2:
			row[i] = float32(2 * r.NormFloat64())
		case 1:
			row[i] = float32(-1.1 * math.Log(float64(1+r.IntN(n))))
		case 3:
			row[i] = float32(1e-4 * r.NormFloat64())
		case 4:
			row[i] = float32(300 * r.NormFloat64())
		case 5:
			row[i] = 1.5
		}
		if shape == 2 {
			row[i] = float32(math.Round(float64(row[i])*2) / 2)
		}
	}
	if shape == 0 {
		for range 20 {
			row[r.IntN(n)] += float32(8 + 6*r.Float64())
		}
	}
	if masked := []float64{0, 0, 0.3, 0.9}[r.IntN(4)]; masked > 0 {
		for i := range row {
			if r.Float64() < masked {
				row[i] = float32(math.Inf(-1))
			}
		}
		row[r.IntN(n)] = 0
	}
	return row
}

// SampleLogits draws without ranking the candidates; the reference ranks
// them and walks the running sum (sampleRanked, the algorithm of Candidates
// and Preview). They must agree to the last bit, on every shape of row, with
// few candidates and with the whole vocabulary, and agree with the
// brute-force reference of reference_test.go away from rounding edges.
func TestDrawMatchesRanking(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	sizes := []int{1, 2, 3, 40, 1000, 5000, 20000}
	cases := 1500
	if testing.Short() {
		cases = 300
	}
	histogram := map[Version]int{}
	for iter := range cases {
		n := sizes[r.IntN(len(sizes))]
		if iter%100 == 0 {
			n = 70000
		}
		shape := r.IntN(6)
		row := drawRow(r, n, shape)
		v := Version(1 + r.IntN(2))
		cfg := Config{Version: v, Tau: 1 + 6*r.Float64(), Eta: r.Float64(), M: []int{2, 5, 100, 1000}[r.IntN(4)]}
		fast, ranked := mustNew(t, cfg), mustNew(t, cfg)
		mu := []float64{2, 6, 10, 16, 24, 32, 45, 80, 5000}[r.IntN(9)]
		if j := r.IntN(n); r.IntN(4) == 0 && !math.IsInf(float64(row[j]), -1) {
			st, err := logitStats(row, nil)
			require.NoError(t, err)
			mu = st.surpriseBits(float64(row[j])) // token j on V2's edge
		}
		require.NoError(t, fast.SetState(State{Mu: mu}))
		require.NoError(t, ranked.SetState(State{Mu: mu}))
		u := r.Float64()
		switch r.IntN(8) {
		case 0:
			u = 0
		case 1:
			u = math.Nextafter(1, 0)
		case 2:
			u = 1 - 1e-12
		case 3, 4: // u·total on (or next to) a running sum of the reference
			c, err := ranked.Candidates(Logits(row))
			require.NoError(t, err)
			var sum, at float64
			i := r.IntN(len(c.Original))
			for j, p := range c.Original {
				if sum += p; j == i {
					at = sum
				}
			}
			u = min(math.Nextafter(at/sum, []float64{0, 1, 2}[r.IntN(3)]), math.Nextafter(1, 0))
		}
		want, err := ranked.sampleRanked(row, u)
		require.NoError(t, err)
		got, err := fast.SampleLogits(row, u)
		require.NoError(t, err)
		require.Equal(t, want, got, "iter %d: %v n=%d mu=%v u=%v", iter, v, n, mu, u)
		require.Equal(t, ranked.State(), fast.State())

		if v == V2 && got.Kept >= collectLimit(n) || v == V1 && got.K > cfg.M && n > cfg.M {
			histogram[v]++
		}
		if n <= 5000 && shape != 4 { // the brute force loses underflowing tokens
			ref := reference(row, v, mu, cfg.M, u)
			if ref.ok {
				require.Equal(t, int32(ref.token), got.Token, "iter %d", iter)
				require.Equal(t, ref.kept, got.Kept, "iter %d", iter)
			}
		}
	}
	// The histogram's path was taken often enough to mean something.
	assert.Greater(t, histogram[V1], cases/10, "V1 steps through the histogram")
	assert.Greater(t, histogram[V2], cases/10, "V2 steps through the histogram")
}

// Over a run in which mu climbs from a few candidates to the whole
// vocabulary, the draw and the reference take the same steps.
func TestDrawMatchesRankingOverARun(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		rows := benchrows.Rows(4, 32000)
		cfg := Config{Version: v, Tau: 5, Eta: 0.1, M: 100}
		fast, ranked := mustNew(t, cfg), mustNew(t, cfg)
		pm := &ParkMiller{}
		least, most := math.MaxInt, 0
		for i := range 120 {
			u := pm.Float64()
			want, err := ranked.sampleRanked(rows[i%len(rows)], u)
			require.NoError(t, err)
			got, err := fast.SampleLogits(rows[i%len(rows)], u)
			require.NoError(t, err)
			require.Equal(t, want, got, "%v step %d", v, i)
			least, most = min(least, got.Kept), max(most, got.Kept)
		}
		assert.Less(t, least, 100, "%v", v)
		assert.Equal(t, 32000, most, "%v", v)
	}
}

func TestLowestWhere(t *testing.T) {
	x, ok := lowestWhere(10, func(x float32) bool { return x >= 2.5 })
	assert.True(t, ok)
	assert.Equal(t, float32(2.5), x)
	x, _ = lowestWhere(10, func(x float32) bool { return x > 2.5 })
	assert.Equal(t, math.Nextafter32(2.5, 3), x)
	x, _ = lowestWhere(10, func(x float32) bool { return x >= 0 })
	assert.Zero(t, x)
	x, _ = lowestWhere(10, func(x float32) bool { return x > -3e-45 })
	assert.Equal(t, float32(-math.SmallestNonzeroFloat32), x)
	x, _ = lowestWhere(10, func(float32) bool { return true })
	assert.Equal(t, float32(-math.MaxFloat32), x)
	_, ok = lowestWhere(10, func(x float32) bool { return x > 10 })
	assert.False(t, ok)
}

// Steps through the histogram, with the cut inside a band (mu 25) and with
// every token a candidate (mu 80), allocate nothing once the scratch has
// grown.
func TestHistogramStepsDoNotAllocate(t *testing.T) {
	row := benchrows.Rows(4, 50000)[0]
	for _, v := range []Version{V1, V2} {
		for _, mu := range []float64{25, 80} {
			s := mustNew(t, Config{Version: v, Tau: 5, Eta: 0})
			require.NoError(t, s.SetState(State{Mu: mu}))
			pm := &ParkMiller{}
			st, err := s.SampleLogits(row, pm.Float64())
			require.NoError(t, err)
			if v == V1 {
				require.Greater(t, st.K, DefaultM, "mu %v", mu)
			} else {
				require.GreaterOrEqual(t, st.Kept, collectLimit(len(row)), "mu %v", mu)
			}
			allocs := testing.AllocsPerRun(20, func() {
				if _, err := s.SampleLogits(row, pm.Float64()); err != nil {
					t.Fatal(err)
				}
			})
			assert.Zero(t, allocs, "%v mu %v", v, mu)
		}
	}
}
