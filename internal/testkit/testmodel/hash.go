package testmodel

import (
	"hash/fnv"
	"math/rand/v2"
)

// HashModel returns a model function (a backend.ModelFunc) whose logits, in
// [-3, 3), are drawn from a generator seeded with a hash of the whole
// history: every history has its own row, and the same history always the
// same one, so a backend slot that held anything but the exact history
// gives other tokens. The row it returns is reused from call to call.
func HashModel(vocab int) func(history []int32) ([]float32, error) {
	buf := make([]float32, vocab)
	return func(history []int32) ([]float32, error) {
		h := fnv.New64a()
		for _, t := range history {
			h.Write([]byte{byte(t), byte(t >> 8)})
		}
		src := rand.NewPCG(h.Sum64(), 7)
		for i := range buf {
			buf[i] = float32(src.Uint64()>>40)/float32(1<<24)*6 - 3
		}
		return buf, nil
	}
}
