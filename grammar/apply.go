package grammar

import "math/bits"

// applyAllowed sets to -inf every score of row whose bit in allowed (a
// bitset over the token ids, bit t%64 of word t/64) is clear. A word of 64
// blocked tokens is one block copy; a word of 64 allowed ones is skipped.
// On amd64 with AVX2 the whole row goes through maskAVX2, a blend of 8
// scores at a time, which costs about as much as reading and writing the row
// once: dense masks (tens of thousands of tokens on either side) cost a few
// stores per token otherwise.
func applyAllowed(row []float32, allowed []uint64, negInf []float32) {
	done := maskVector(row, allowed)
	for w := done / 64; w*64 < len(row); w++ {
		word := allowed[w]
		base := w * 64
		switch {
		case word == ^uint64(0):
		case word == 0 && base+64 <= len(row):
			copy(row[base:base+64], negInf)
		default:
			for blocked := ^word; blocked != 0; blocked &= blocked - 1 {
				if t := base + bits.TrailingZeros64(blocked); t < len(row) {
					row[t] = negInf[0]
				}
			}
		}
	}
}
