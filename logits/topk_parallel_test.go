package logits

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// A top-k pass split into chunks leaves every row as the one-chunk pass
// does, bit for bit, with the same candidates: rows with ties at the k-th
// place, NaN, -inf, float32 neighbours that a temperature merges, k near
// the chunk length, for 1 to 7 chunks.
func TestTopKChunksEqualSequential(t *testing.T) {
	defer func(n int, w func() int) { topKChunkLen, topKWorkers = n, w }(topKChunkLen, topKWorkers)
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 2000 {
		v := 2 + rng.IntN(600)
		src := make([]float32, v)
		base := float32(rng.NormFloat64())
		for i := range src {
			switch rng.IntN(6) {
			case 0:
				src[i] = base
				for range rng.IntN(4) {
					src[i] = nextUp(src[i])
				}
			case 1:
				src[i] = ninf
			case 2:
				src[i] = float32(rng.IntN(5)) // many ties
			default:
				src[i] = float32(rng.NormFloat64() * 5)
			}
		}
		for range rng.IntN(3) * rng.IntN(2) {
			src[rng.IntN(v)] = nan
		}
		k := 1 + rng.IntN(min(v-1, 1+rng.IntN(80)))
		var temp *Temperature
		if trial%2 == 1 {
			temp = must(NewTemperature([]float64{0.7, 3, 1e-3, 1.0000001}[trial/2%4]))
		}
		run := func(chunkLen, workers int) ([]float32, []int32) {
			topKChunkLen, topKWorkers = chunkLen, func() int { return workers }
			row := &History{running: true}
			got := slices.Clone(src)
			row.topK(got, k, temp)
			return got, slices.Clone(row.cand.idx)
		}
		want, wantIdx := run(1<<30, 1)
		parts := 1 + rng.IntN(7)
		got, gotIdx := run(1, parts)
		require.Equal(t, wantIdx, gotIdx, "trial %d: candidates (v %d, k %d, %d chunks)", trial, v, k, parts)
		for i := range want {
			if want[i] != got[i] && !(want[i] != want[i] && got[i] != got[i]) {
				t.Fatalf("trial %d (v %d, k %d, %d chunks): index %d chunked %v, sequential %v", trial, v, k, parts, i, got[i], want[i])
			}
		}
	}
}
