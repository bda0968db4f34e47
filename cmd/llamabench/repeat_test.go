package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rows that llama.cpp's tools measure too are timed as llama-bench
// times its tests: each kept sample just after an untimed run of its own
// row (pp128 timed after pp512 read 0.92 of pp128 after pp128, q8_0 and
// f16), after one untimed repetition of all rows, and after the tool's run
// and --settle's warm-up on each repetition.
func TestRepeatRowsTimesEachRowAfterItself(t *testing.T) {
	var calls []int // the rows measured, in order; -1 for the tool's run
	b := &bench{o: &options{reps: 2}, pace: func(string) error { calls = append(calls, -1); return nil }}
	sample := 0
	measure := func(row int) (float64, error) {
		calls = append(calls, row)
		sample++
		return float64(sample), nil
	}
	samples, err := b.repeatRows(context.Background(), comparePrompt, 2, measure)
	require.NoError(t, err)
	// warm-up 0 1; then per repetition: tool, settle 0 1 (once, --settle 0),
	// then 0 0 and 1 1 with the second of each kept.
	assert.Equal(t, []int{0, 1, -1, 0, 1, 0, 0, 1, 1, -1, 0, 1, 0, 0, 1, 1}, calls)
	assert.Equal(t, [][]float64{{6, 12}, {8, 14}}, samples)

	// One row, or rows no tool measures, as before: no extra run.
	calls, sample = nil, 0
	samples, err = b.repeatRows(context.Background(), comparePrompt, 1, measure)
	require.NoError(t, err)
	assert.Equal(t, []int{0, -1, 0, 0, -1, 0, 0}, calls)
	assert.Equal(t, [][]float64{{3, 5}}, samples)
}
