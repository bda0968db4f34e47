package lab

import (
	"math"
	"testing"

	"github.com/llamaloop/llamaloop/mirostat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTransforms(t *testing.T) {
	ninf := float32(math.Inf(-1))
	row := []float32{2, -1, 0.5, ninf}
	orig := append([]float32(nil), row...)

	got, err := Mask(row, []bool{true, false, true, true})
	require.NoError(t, err)
	assert.Equal(t, []float32{2, ninf, 0.5, ninf}, got)
	got, err = Allow(row, []int{1, 2})
	require.NoError(t, err)
	assert.Equal(t, []float32{ninf, -1, 0.5, ninf}, got)
	got, err = Block(row, []int{0, 0, 2})
	require.NoError(t, err)
	assert.Equal(t, []float32{ninf, -1, ninf, ninf}, got)
	got, err = Bias(row, map[int]float32{1: 3, 3: 5})
	require.NoError(t, err)
	assert.Equal(t, []float32{2, 2, 0.5, ninf}, got, "a masked token stays masked")
	// Repetition 2: token 0 (positive) halves, token 1 (negative) doubles, once each.
	got, err = PenalizeRepetition(row, []int{0, 1, 0, 0}, 2)
	require.NoError(t, err)
	assert.Equal(t, []float32{1, -2, 0.5, ninf}, got)
	// Presence 0.5 once per token, frequency 0.25 per occurrence.
	got, err = PenalizeCounts(row, []int{0, 0, 0, 2}, 0.5, 0.25)
	require.NoError(t, err)
	assert.Equal(t, []float32{2 - 0.5 - 0.75, -1, 0.5 - 0.5 - 0.25, ninf}, got)
	got, err = WithTemperature(row, 0.5)
	require.NoError(t, err)
	assert.Equal(t, []float32{4, -2, 1, ninf}, got)
	assert.Equal(t, orig, row, "inputs are not modified")

	_, err = Mask(row, []bool{false, false, false, true})
	assert.ErrorIs(t, err, mirostat.ErrAllMasked)
	_, err = Mask(row, []bool{true})
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
	_, err = Allow(row, []int{3})
	assert.ErrorIs(t, err, mirostat.ErrAllMasked)
	_, err = Block(row, []int{4})
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
	_, err = Bias(row, map[int]float32{0: float32(math.NaN())})
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
	_, err = Bias(row, map[int]float32{0: math.MaxFloat32, 1: 0})
	assert.NoError(t, err)
	_, err = Bias([]float32{math.MaxFloat32}, map[int]float32{0: math.MaxFloat32})
	assert.ErrorIs(t, err, mirostat.ErrNumerical)
	_, err = PenalizeRepetition(row, nil, 0)
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
	_, err = PenalizeCounts(row, []int{-1}, 1, 1)
	assert.ErrorIs(t, err, mirostat.ErrInvalidParameter)
	_, err = WithTemperature([]float32{float32(math.NaN())}, 1)
	assert.ErrorIs(t, err, mirostat.ErrNonFiniteLogit)
	_, err = WithTemperature(nil, 1)
	assert.ErrorIs(t, err, mirostat.ErrEmptyRow)
}
