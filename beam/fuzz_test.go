package beam_test

import (
	"context"
	"math"
	"testing"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
)

// FuzzSearch runs searches with arbitrary sizes, rules, eos sets, length
// penalties and models that mask tokens or return NaN: a search either
// fails with an error or returns well-formed hypotheses, never panics, and
// always leaves every slot empty.
func FuzzSearch(f *testing.F) {
	f.Add(uint64(1), uint8(2), uint8(5), uint8(4), uint8(1), false, int8(10), uint8(0), false, uint8(0), uint8(2))
	f.Add(uint64(7), uint8(4), uint8(3), uint8(6), uint8(2), true, int8(0), uint8(2), false, uint8(3), uint8(1))
	f.Add(uint64(3), uint8(1), uint8(9), uint8(3), uint8(0), false, int8(-10), uint8(1), true, uint8(5), uint8(3))
	f.Fuzz(func(t *testing.T, seed uint64, k, vocab, maxNew, nEOS uint8, narrowing bool, lp int8, es uint8, sample bool, maskEvery, prompts uint8) {
		v := int(vocab%12) + 1
		base := hashModel(v, seed)
		model := func(h []int32) ([]float32, error) {
			l, err := base(h)
			if maskEvery > 0 {
				for i := range l {
					switch (i + len(h)) % (int(maskEvery%8) + 1) {
					case 0:
						l[i] = float32(math.Inf(-1))
					case 7:
						l[i] = float32(math.NaN())
					}
				}
			}
			return l, err
		}
		cfg := genconfig.Default()
		cfg.NumBeams = int(k%6) - 1
		cfg.MaxNewTokens = intp(int(maxNew % 7))
		cfg.LengthPenalty = float64(lp) / 10
		cfg.EarlyStopping = genconfig.EarlyStopping(es % 3)
		cfg.DoSample = sample
		for i := range int(nEOS % 4) {
			cfg.EOSTokenID = append(cfg.EOSTokenID, int32((int(seed)+i)%v))
		}
		cfg.NumReturnSequences = max(1, cfg.NumBeams/2)
		rule := beam.Transformers
		if narrowing {
			rule = beam.Narrowing
		}
		var ps [][]int32
		for i := range int(prompts % 4) {
			ps = append(ps, []int32{int32(i % v), int32((i + 1) % v)})
		}
		mem := backend.NewMemoryBackend(v, 5, model)
		res, err := beam.Search(context.Background(), mem, ps, beam.Options{Rule: rule, Config: cfg, Seed: seed, OutputScores: true})
		for i := range mem.Slots() {
			if len(mem.History(i)) != 0 {
				t.Fatalf("slot %d not cleared (err %v)", i, err)
			}
		}
		if err != nil {
			return
		}
		if len(res.Hypotheses) != len(ps) {
			t.Fatalf("%d hypothesis lists for %d prompts", len(res.Hypotheses), len(ps))
		}
		for _, hs := range res.Hypotheses {
			if len(hs) == 0 || len(hs) > cfg.NumBeams {
				t.Fatalf("%d hypotheses for %d beams", len(hs), cfg.NumBeams)
			}
			for _, h := range hs {
				if len(h.Tokens) > *cfg.MaxNewTokens {
					t.Fatalf("%d tokens, max %d", len(h.Tokens), *cfg.MaxNewTokens)
				}
				for _, tok := range h.Tokens {
					if tok < 0 || int(tok) >= v {
						t.Fatalf("token %d outside the vocabulary", tok)
					}
				}
			}
		}
	})
}
