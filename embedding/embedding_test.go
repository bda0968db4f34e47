package embedding

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The figures are worked by hand from llama.cpp's common_embd_normalize.
func TestNormalize(t *testing.T) {
	for _, c := range []struct {
		norm Norm
		want []float64
	}{
		{NormNone, []float64{3, -4, 0}},
		{NormMaxAbs, []float64{3 * 32760.0 / 4, -32760, 0}},
		{NormL1, []float64{3.0 / 7, -4.0 / 7, 0}},
		{NormL2, []float64{0.6, -0.8, 0}},
		{3, []float64{3 / math.Cbrt(91), -4 / math.Cbrt(91), 0}},
	} {
		v := []float64{3, -4, 0}
		Normalize(v, c.norm)
		require.InDeltaSlice(t, c.want, v, 1e-12, "norm %d", c.norm)
	}
	z := []float32{0, 0}
	Normalize(z, NormL2)
	require.Equal(t, []float32{0, 0}, z)
}

func TestPool(t *testing.T) {
	rows := [][]float64{{1, 2}, {3, 6}, {5, 1}}
	for p, want := range map[Pooling][]float64{PoolingMean: {3, 3}, PoolingCLS: {1, 2}, PoolingLast: {5, 1}} {
		got, err := Pool(rows, p)
		require.NoError(t, err)
		require.Equal(t, want, got, "%s", p)
	}
	_, err := Pool(rows, PoolingNone)
	require.ErrorContains(t, err, "pooling none gives no single vector")
	_, err = Pool[float64](nil, PoolingMean)
	require.ErrorContains(t, err, "empty sequence")
}

func TestParsePooling(t *testing.T) {
	for s, want := range map[string]Pooling{"mean": PoolingMean, "CLS": PoolingCLS, "first": PoolingCLS, "last": PoolingLast,
		"none": PoolingNone, "model": PoolingModel} {
		got, err := ParsePooling(s)
		require.NoError(t, err)
		require.Equal(t, want, got)
		if s != "first" && s != "CLS" {
			require.Equal(t, s, got.String())
		}
	}
	_, err := ParsePooling("average")
	require.EqualError(t, err, `embedding: pooling "average" (want model, none, mean, cls, last or rank)`)
}

func TestLlamaValues(t *testing.T) {
	// llama.h: UNSPECIFIED -1, NONE 0, MEAN 1, CLS 2, LAST 3, RANK 4
	for p, v := range map[Pooling]int32{PoolingModel: -1, PoolingNone: 0, PoolingMean: 1, PoolingCLS: 2, PoolingLast: 3, PoolingRank: 4} {
		require.Equal(t, v, p.Llama())
		require.Equal(t, p, FromLlama(v))
	}
}
