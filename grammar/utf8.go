package grammar

import (
	"slices"
	"unicode/utf8"
)

// normalize sorts ranges of code points and merges those that overlap or touch.
func normalize(ranges [][2]rune) [][2]rune {
	rs := slices.Clone(ranges)
	slices.SortFunc(rs, func(a, b [2]rune) int { return int(a[0] - b[0]) })
	var out [][2]rune
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// complement returns the code points of [0, MaxRune] outside the normalized ranges.
func complement(rs [][2]rune) [][2]rune {
	var out [][2]rune
	next := rune(0)
	for _, r := range rs {
		if r[0] > next {
			out = append(out, [2]rune{next, r[0] - 1})
		}
		next = r[1] + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, [2]rune{next, utf8.MaxRune})
	}
	return out
}

// utf8Sequences returns the UTF-8 encodings of the code point ranges as sequences of byte ranges
// (the classic split of regular-expression engines): every valid encoding of a code point in the
// ranges matches exactly one sequence, byte by byte. Surrogates, which UTF-8 cannot encode, are
// left out.
func utf8Sequences(rs [][2]rune) [][][2]byte {
	var out [][][2]byte
	var split func(lo, hi rune)
	split = func(lo, hi rune) {
		if lo > hi {
			return
		}
		if lo <= 0xDFFF && hi >= 0xD800 {
			split(lo, 0xD7FF)
			split(0xE000, hi)
			return
		}
		// One encoded length per sequence.
		for _, m := range []rune{0x7F, 0x7FF, 0xFFFF} {
			if lo <= m && hi > m {
				split(lo, m)
				split(m+1, hi)
				return
			}
		}
		if hi <= 0x7F {
			out = append(out, [][2]byte{{byte(lo), byte(hi)}})
			return
		}
		// Split until every continuation byte spans a full range or a single prefix.
		for i := 1; i < 4; i++ {
			m := rune(1)<<(6*i) - 1
			if lo&^m != hi&^m {
				if lo&m != 0 {
					split(lo, lo|m)
					split((lo|m)+1, hi)
					return
				}
				if hi&m != m {
					split(lo, (hi&^m)-1)
					split(hi&^m, hi)
					return
				}
			}
		}
		var a, b [utf8.UTFMax]byte
		n := utf8.EncodeRune(a[:], lo)
		utf8.EncodeRune(b[:], hi)
		seq := make([][2]byte, n)
		for i := range n {
			seq[i] = [2]byte{a[i], b[i]}
		}
		out = append(out, seq)
	}
	for _, r := range rs {
		split(r[0], r[1])
	}
	return out
}
