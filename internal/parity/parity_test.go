package parity

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFloat32Strings(t *testing.T) {
	var v Vector
	require.NoError(t, json.Unmarshal([]byte(`["0.1", "-3.4028235e+38", "1e-05", "inf", "-inf", "nan", 2.5]`), &v))
	require.Len(t, v, 7)
	assert.Equal(t, float32(0.1), v[0])
	assert.Equal(t, float32(-math.MaxFloat32), v[1])
	assert.Equal(t, float32(1e-5), v[2])
	assert.True(t, math.IsInf(float64(v[3]), 1))
	assert.True(t, math.IsInf(float64(v[4]), -1))
	assert.True(t, v[5] != v[5])
	assert.Equal(t, float32(2.5), v[6])
	assert.Error(t, json.Unmarshal([]byte(`["x"]`), &v))

	for _, x := range []float32{0.1, -3.4028235e38, 1e-5, float32(math.Inf(1)), float32(math.Inf(-1))} {
		data, err := json.Marshal(Float32(x))
		require.NoError(t, err)
		var back Float32
		require.NoError(t, json.Unmarshal(data, &back))
		assert.Equal(t, x, float32(back), "round trip of %s", data)
	}
	assert.Equal(t, "nan", Format(float32(math.NaN())))
	assert.Equal(t, "0.1", Format(0.1))
}

func TestCompare(t *testing.T) {
	ninf := float32(math.Inf(-1))
	nan := float32(math.NaN())
	assert.True(t, Close(100, 100.0009), "1e-5 relative")
	assert.False(t, Close(100, 100.002))
	assert.True(t, Close(0, 9e-6), "absolute below 1")
	assert.False(t, Close(0, 2e-5))
	assert.True(t, Close(ninf, ninf))
	assert.False(t, Close(-math.MaxFloat32, ninf))
	assert.True(t, Close(nan, nan))
	assert.False(t, Close(nan, 1))
	assert.True(t, Exact(0, float32(math.Copysign(0, -1))))
	assert.False(t, Exact(1, 1.0000001))

	assert.NoError(t, Diff([]float32{1, ninf}, []float32{1, ninf}, true))
	assert.EqualError(t, Diff([]float32{1, 2}, []float32{1, ninf}, false), "index 1: got 2, want -inf (-inf positions differ)")
	assert.EqualError(t, Diff([]float32{1, 2}, []float32{1, 2.5}, false), "index 1: got 2, want 2.5")
	assert.EqualError(t, Diff([]float32{1}, []float32{1, 2}, false), "length 1, want 2")
	assert.EqualError(t, DiffMatrix([][]float32{{1}, {3}}, [][]float32{{1}, {2}}, true), "row 1: index 0: got 3, want 2")
	assert.NoError(t, DiffInts([]int32{1, 2}, []int32{1, 2}))
	assert.ErrorContains(t, DiffInts([]int32{1, 3}, []int32{1, 2}), "index 1: got 3, want 2")
	assert.ErrorContains(t, DiffInts([]int{1}, []int{1, 2}), "length 1, want 2")
	assert.ErrorContains(t, DiffStrings([]string{"a"}, []string{"b"}), `got "a", want "b"`)
}

func TestCasesAndFiles(t *testing.T) {
	_, err := Parse([]byte(`{"cases": []}`))
	assert.ErrorContains(t, err, "kind")
	f, err := Parse([]byte(`{"kind": "beam", "meta": {"dtype": "float32"}, "cases": [{"id": "b1",
		"generation_config": {"num_beams": 2}, "vocab_size": 4, "prompts": [[1, 2]],
		"logits_by_sequence": {"1,2": ["0", "1", "-inf", "nan"]},
		"expected": {"sequences": [[1, 2, 3]], "new_tokens": [[3]], "sequences_scores": ["-0.5"],
			"beam_indices": [[0]], "scores": [[["0", "1", "2", "3"], ["0", "1", "2", "3"]]],
			"transition_scores": [["-0.5"]]}, "info": {}}]}`))
	require.NoError(t, err)
	assert.Equal(t, "beam", f.Kind)
	assert.Equal(t, "b1", CaseID(f.Cases[0]))
	c, err := DecodeCase[BeamCase](f.Cases[0])
	require.NoError(t, err)
	assert.Equal(t, [][]int32{{1, 2, 3}}, c.Expected.Sequences)
	assert.Equal(t, float32(-0.5), c.Expected.SequencesScores[0])
	assert.Len(t, c.Expected.Scores[0], 2)
	logits, err := ToyModel(c.LogitsBySequence).Logits([]int32{1, 2})
	require.NoError(t, err)
	assert.Equal(t, float32(1), logits[1])
	_, err = ToyModel(c.LogitsBySequence).Logits([]int32{1})
	assert.ErrorContains(t, err, "diverged")
	assert.Equal(t, "3,1,4", SequenceKey([]int32{3, 1, 4}))

	g, err := DecodeCase[GreedyCase]([]byte(`{"id": "g", "expected": {"sequences": [[1]], "scores": [[["1"]]]}}`))
	require.NoError(t, err)
	assert.Equal(t, float32(1), g.Expected.Scores[0][0][0])
	_, err = DecodeCase[GreedyCase]([]byte(`{"id": "bad", "vocab_size": "x"}`))
	assert.ErrorContains(t, err, `"bad"`)
}

func TestVectorFilesDecode(t *testing.T) {
	for _, tc := range []struct {
		file, kind string
		n          int
	}{{"beam.json", "beam", 60}, {"greedy_logprobs.json", "greedy_logprobs", 20}} {
		f, err := ReadFile("testdata/" + tc.file)
		require.NoError(t, err)
		assert.Equal(t, tc.kind, f.Kind)
		require.Len(t, f.Cases, tc.n)
		for _, raw := range f.Cases {
			var err error
			if tc.kind == "beam" {
				_, err = DecodeCase[BeamCase](raw)
			} else {
				_, err = DecodeCase[GreedyCase](raw)
			}
			require.NoError(t, err)
		}
	}
}
