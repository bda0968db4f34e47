package logits

import (
	"encoding/binary"
	"math"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/llamaloop/llamaloop/genconfig"
)

func ptr[T any](v T) *T { return &v }

// FuzzParseGenerationConfig feeds arbitrary JSON to the loader: it must never panic, a config that
// parses must clone and re-apply to itself unchanged, and a config that Validate accepts must build
// a pipeline that processes a row without panicking.
func FuzzParseGenerationConfig(f *testing.F) {
	if data, err := os.ReadFile("../genconfig/testdata/generation_config.json"); err == nil {
		f.Add(data)
	}
	for _, s := range []string{everything, stateful, `{}`, `{"eos_token_id": [1, 2], "max_new_tokens": 4}`,
		`{"do_sample": true, "temperature": 0.0}`, `{"sequence_bias": [[[1, 2], 2]]}`,
		`{"bad_words_ids": [[1], [2, 3]], "early_stopping": "never", "top_k": null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := genconfig.Parse(data)
		if err != nil {
			return
		}
		if !reflect.DeepEqual(c, c.Clone()) {
			t.Fatalf("Clone differs")
		}
		again := c.Clone()
		if err := again.Update(data); err != nil || !reflect.DeepEqual(c, again) {
			t.Fatalf("re-applying the same JSON changed the config (err %v)", err)
		}
		const v = 16
		_, verr := c.Validate(v)
		p, perr := NewPipeline(c, Options{VocabSize: v})
		if (verr == nil) != (perr == nil) {
			t.Fatalf("Validate error %v but NewPipeline error %v", verr, perr)
		}
		if perr != nil {
			return
		}
		c.Resolve(3)
		c.CheckLengths(3)
		c.PipelineMaxNewTokens(3)
		row := p.NewHistory([]int32{1, 2, 3})
		for step := range 4 {
			scores := make([]float32, v)
			for i := range scores {
				scores[i] = float32(i%5) - float32(step)
			}
			p.Process(row, scores)
			p.Sample(row, scores, 0.5)
			row.Accept(int32(Argmax(scores) % v))
		}
	})
}

// FuzzPipeline runs pipelines built from fuzzed settings over fuzzed rows (any float32 bits,
// NaN and infinities included) and histories (any ids, out-of-vocabulary ones included). It checks
// that nothing panics, that Pipeline.Sample agrees with SampleIndex, and that a row grown token by
// token processes like a row rebuilt from the same history.
func FuzzPipeline(f *testing.F) {
	f.Add(uint64(0xffffffff), uint8(3), 0.5, 0.7, []byte("\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x80\x7f\x00\x00\xc0\x7f"), []byte{1, 2, 3, 1, 2})
	f.Add(uint64(1<<13|1<<14|1<<15|1<<16), uint8(50), 0.9, 0.7, []byte("abcdefghijklmnopqrstuvwxyz012345"), []byte{9, 9})
	f.Add(uint64(0x5555), uint8(1), 0.01, 2.0, []byte("\x00\x00\x80\xff\x00\x00\x80\xff\x00\x00\x80\xff\x00\x00\x80\xff"), []byte{0})
	f.Fuzz(func(t *testing.T, flags uint64, k uint8, a, b float64, rowBits, hist []byte) {
		const v = 12
		if len(rowBits) < 4 {
			return
		}
		frac := func(x float64) float64 { // any float64 to (0, 1)
			if x != x || math.IsInf(x, 0) {
				return 0.5
			}
			x = math.Abs(x)
			x -= math.Floor(x)
			return min(max(x, 1e-6), 1-1e-6)
		}
		pa, pb := frac(a), frac(b)
		on := func(bit int) bool { return flags&(1<<bit) != 0 }
		c := genconfig.Default()
		c.EOSTokenID = []int32{int32(k % v)}
		if on(20) {
			c.EOSTokenID = append(c.EOSTokenID, int32((k/3)%v))
		}
		c.DoSample = on(0)
		if on(1) {
			c.NumBeams = 2
		}
		if on(2) {
			c.RepetitionPenalty = 0.5 + 2*pa
		}
		if on(3) {
			c.NoRepeatNGramSize = 1 + int(k%4)
		}
		if on(4) {
			c.BadWordsIDs = [][]int32{{int32(k % v)}, {1, int32(k % v)}}
		}
		if on(5) {
			c.MinLength = int(k % 8)
		}
		if on(6) {
			c.MinNewTokens = ptr(int(k % 5))
		}
		if on(7) {
			c.ForcedBOSTokenID = ptr(int32(k % v))
		}
		if on(8) {
			c.ForcedEOSTokenID = []int32{int32(k % v)}
			c.MaxNewTokens = ptr(1 + int(k%6))
		}
		if on(9) {
			c.RemoveInvalidValues = true
		}
		if on(10) {
			c.ExponentialDecayLengthPenalty = &[2]float64{float64(k % 4), 0.5 + 2*pb}
		}
		if on(11) {
			c.SuppressTokens = []int32{int32(k % v), 99}
		}
		if on(12) {
			c.BeginSuppressTokens = []int32{int32(k % v)}
		}
		if on(13) {
			c.Temperature = 0.05 + 3*pa
		}
		c.TopK = 0
		if on(14) {
			c.TopK = 1 + int(k%16)
		}
		if on(15) {
			c.TopP = pa
		}
		if on(16) {
			c.MinP = ptr(pb)
		}
		if on(17) {
			c.TypicalP = pb
		}
		if on(18) {
			c.EpsilonCutoff = pa
		}
		if on(19) {
			c.EtaCutoff = pb
		}
		if on(21) {
			c.RenormalizeLogits = true
		}
		if on(22) {
			c.SequenceBias = []genconfig.SequenceBias{{Tokens: []int32{1 + int32(k%(v-1))}, Bias: 2 * pa}, {Tokens: []int32{2, 3}, Bias: -pb}}
		}
		if on(23) {
			c.EncoderRepetitionPenalty = 0.5 + pb
			c.EncoderNoRepeatNGramSize = 1 + int(k%3)
		}
		var user []Processor
		if on(24) {
			user = append(user, must(NewPresenceFrequencyPenalty(float32(pa), float32(pb), int(k%5))))
		}
		p, err := NewPipeline(c, Options{VocabSize: v, User: user})
		if err != nil {
			t.Fatalf("valid settings rejected: %v", err)
		}
		prompt := []int32{int32(k)}
		for _, h := range hist[:min(len(hist), 2)] {
			prompt = append(prompt, int32(int8(h))) // negative and out-of-vocabulary ids too
		}
		row := p.NewHistory(prompt)
		for step := 0; len(rowBits) >= 4; step++ {
			scores := make([]float32, v)
			for i := range scores {
				off := (4*i + step) % (len(rowBits) - 3)
				scores[i] = math.Float32frombits(binary.LittleEndian.Uint32(rowBits[off:]))
			}
			rebuilt := p.NewHistory(prompt)
			for _, tok := range row.Tokens()[len(prompt):] {
				rebuilt.Accept(tok)
			}
			other, sparse := slices.Clone(scores), slices.Clone(scores)
			sparseHist := p.NewHistory(prompt)
			for _, tok := range row.Tokens()[len(prompt):] {
				sparseHist.Accept(tok)
			}
			p.Process(row, scores)
			p.Process(rebuilt, other)
			p.ProcessForSample(sparseHist, sparse)
			for i := range scores {
				if math.Float32bits(scores[i]) != math.Float32bits(other[i]) && !(scores[i] != scores[i] && other[i] != other[i]) {
					t.Fatalf("step %d: incremental row gives %v, rebuilt row %v", step, scores, other)
				}
			}
			for _, u := range []float64{0, 0.37, 0.999} {
				i1, ok1 := p.Sample(row, scores, u)
				i2, ok2 := SampleIndex(scores, u)
				if i1 != i2 || ok1 != ok2 {
					t.Fatalf("Sample %d,%v but SampleIndex %d,%v on %v", i1, ok1, i2, ok2, scores)
				}
				if i3, ok3 := p.Sample(sparseHist, sparse, u); i3 != i1 || ok3 != ok1 {
					t.Fatalf("Sample after ProcessForSample %d,%v but after Process %d,%v on %v", i3, ok3, i1, ok1, scores)
				}
			}
			if step >= 6 {
				break
			}
			next := int32(Argmax(scores))
			if len(hist) > step+2 {
				next = int32(int8(hist[step+2]))
			}
			row.Accept(next)
		}
	})
}
