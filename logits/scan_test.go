package logits

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// scanTestRow is a row of v scores with ties, -inf, +inf and NaN, for the
// tests of the processors that scan a whole row with numeric's vector
// scans.
func scanTestRow(rng *rand.Rand, v int) []float32 {
	row := make([]float32, v)
	for i := range row {
		switch rng.IntN(8) {
		case 0:
			row[i] = ninf
		case 1:
			row[i] = float32(rng.IntN(5)) // ties
		default:
			row[i] = float32(rng.NormFloat64() * 4)
		}
	}
	for range rng.IntN(3) * rng.IntN(2) {
		row[rng.IntN(v)] = nan
	}
	if rng.IntN(8) == 0 {
		row[rng.IntN(v)] = inf
	}
	return row
}

// Argmax against its definition, on rows long enough for the vector scans:
// the first NaN, else the first of the largest, 0 for a row of -inf.
func TestArgmaxLongRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 3000 {
		row := scanTestRow(rng, 1+rng.IntN(300))
		if trial%10 == 0 {
			for i := range row {
				if rng.IntN(4) > 0 {
					row[i] = ninf
				}
			}
		}
		want := 0
		for i, x := range row {
			if x != x {
				want = i
				break
			}
			if x > row[want] {
				want = i
			}
		}
		require.Equal(t, want, Argmax(row), "trial %d: %v", trial, row)
	}
}

// SampleIndex against its definition on long rows: -1 when no entry is
// above -inf; with +inf entries the one whose rank among them is u times
// their count; else the inverse CDF (sampleFrom) under the first largest.
func TestSampleIndexLongRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 3000 {
		row := scanTestRow(rng, 1+rng.IntN(300))
		if trial%5 == 0 {
			for range 1 + rng.IntN(4) {
				row[rng.IntN(len(row))] = inf
			}
		}
		if trial%11 == 0 {
			for i := range row {
				row[i] = []float32{ninf, nan}[rng.IntN(2)]
			}
		}
		u := rng.Float64()
		m := ninf
		var infs []int
		for i, x := range row {
			if x > m {
				m = x
			}
			if x == inf {
				infs = append(infs, i)
			}
		}
		want, wantOK := -1, false
		switch {
		case m == ninf:
		case len(infs) > 0:
			want, wantOK = infs[int(u*float64(len(infs)))], true
		default:
			want, wantOK = sampleFrom(row, nil, m, u)
		}
		got, ok := SampleIndex(row, u)
		require.Equal(t, []any{want, wantOK}, []any{got, ok}, "trial %d: %v, u %v", trial, row, u)
	}
}

// Top-k (with and without a temperature) against sorting: the k-th largest
// with NaN first; with k NaN or more only the NaN stay, else every score at
// least the k-th largest (and every NaN); the others become -inf, and the
// candidates are the kept indices in order.
func TestTopKAgainstSorting(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	floors := 0
	defer func() { require.Greater(t, floors, 100, "rows that top-k's chunk floor shortened") }()
	for trial := range 2000 {
		v := 2 + rng.IntN(700)
		src := scanTestRow(rng, v)
		k := 1 + rng.IntN(min(v-1, 1+rng.IntN(80)))
		if chunkFloor(src, k) != ninf {
			floors++
		}
		want := slices.Clone(src)
		var temp *Temperature
		if trial%2 == 1 {
			temp = must(NewTemperature([]float64{0.7, 3, 1e-3, 1.0000001}[trial/2%4]))
			temp.Process(nil, want)
		}
		sorted := slices.SortedFunc(slices.Values(want), func(a, b float32) int {
			switch {
			case a != a && b != b:
				return 0
			case a != a:
				return -1
			case b != b:
				return 1
			}
			return cmp.Compare(b, a)
		})
		thr := sorted[k-1]
		var wantIdx []int32
		for i, x := range want {
			if x != x || (thr == thr && x >= thr) {
				wantIdx = append(wantIdx, int32(i))
			} else {
				want[i] = ninf
			}
		}
		row := &History{running: true}
		got := slices.Clone(src)
		if temp != nil {
			(&temperatureTopK{t: temp, k: must(NewTopK(k, 0))}).Process(row, got)
		} else {
			row.topK(got, k, nil)
		}
		require.Equal(t, wantIdx, row.cand.idx, "trial %d: candidates (v %d, k %d)", trial, v, k)
		for i := range want {
			if want[i] != got[i] && !(want[i] != want[i] && got[i] != got[i]) {
				t.Fatalf("trial %d (v %d, k %d): index %d is %v, sorting gives %v", trial, v, k, i, got[i], want[i])
			}
		}
	}
}
