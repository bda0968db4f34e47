package grammar

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// maxIntegerDigits is the longest integral part of the integer primitive (integral-part in
// jsonPrimitives); ranges are cut to it so that a bounded and an unbounded integer agree.
const maxIntegerDigits = 16

// integerBounds reads minimum, maximum, exclusiveMinimum and exclusiveMaximum of an integer
// schema as an inclusive range; a nil bound is open. Fractional bounds round inwards.
func integerBounds(s *node, path string) (lo, hi *big.Int, err error) {
	tighten := func(key string, upper, exclusive bool) error {
		v := s.get(key)
		if v == nil {
			return nil
		}
		if v.kind == 'b' {
			return fail(path, key, "%s must be a number (the boolean form of draft 4 is not supported)", key)
		}
		if v.kind != 'n' {
			return fail(path, key, "%s must be a number", key)
		}
		r, ok := new(big.Rat).SetString(string(v.raw))
		if !ok {
			return fail(path, key, "%s %s is not a number", key, v.raw)
		}
		// The integers allowed by the bound: ceil(r) for a minimum, floor(r) for a maximum,
		// one step further in when the bound itself is excluded and is an integer.
		q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
		if m.Sign() != 0 && (r.Sign() > 0) != upper {
			// QuoRem truncates towards zero; move one step outwards from zero.
			if upper {
				q.Sub(q, big.NewInt(1))
			} else {
				q.Add(q, big.NewInt(1))
			}
		} else if m.Sign() == 0 && exclusive {
			if upper {
				q.Sub(q, big.NewInt(1))
			} else {
				q.Add(q, big.NewInt(1))
			}
		}
		switch {
		case upper && (hi == nil || q.Cmp(hi) < 0):
			hi = q
		case !upper && (lo == nil || q.Cmp(lo) > 0):
			lo = q
		}
		return nil
	}
	for _, b := range []struct {
		key              string
		upper, exclusive bool
	}{{"minimum", false, false}, {"exclusiveMinimum", false, true}, {"maximum", true, false}, {"exclusiveMaximum", true, true}} {
		if err := tighten(b.key, b.upper, b.exclusive); err != nil {
			return nil, nil, err
		}
	}
	limit := new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(maxIntegerDigits), nil), big.NewInt(1))
	if lo != nil && lo.CmpAbs(limit) > 0 && lo.Sign() > 0 || hi != nil && hi.CmpAbs(limit) > 0 && hi.Sign() < 0 {
		return nil, nil, fail(path, "minimum", "the range allows no integer of at most %d digits", maxIntegerDigits)
	}
	if lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return nil, nil, fail(path, "maximum", "the range [%v, %v] holds no integer", lo, hi)
	}
	return lo, hi, nil
}

// integerRange returns a GBNF expression (trailing space included) for the decimal integers of
// [lo, hi], written as JSON writes them: no leading zeros, no "-0", at most maxIntegerDigits
// digits. A nil bound is open.
func integerRange(lo, hi *big.Int) string {
	limit := int64(math.Pow10(maxIntegerDigits-1))*10 - 1 // 10^16-1 fits int64
	clampLow := func(b *big.Int) int64 {
		if b == nil || b.Cmp(big.NewInt(-limit)) < 0 {
			return -limit
		}
		return b.Int64()
	}
	clampHigh := func(b *big.Int) int64 {
		if b == nil || b.Cmp(big.NewInt(limit)) > 0 {
			return limit
		}
		return b.Int64()
	}
	a, b := clampLow(lo), clampHigh(hi)
	var alts []string
	if a < 0 {
		// Negative part: "-" and the magnitudes [max(1, -b), -a].
		m := max(1, -b)
		if m <= -a {
			alts = append(alts, `"-" `+naturalRange(m, -a))
		}
	}
	if b >= 0 {
		alts = append(alts, naturalRange(max(0, a), b))
	}
	return "(" + strings.Join(alts, " | ") + ") space"
}

// naturalRange returns a GBNF expression for the decimal numerals of [a, b], 0 <= a <= b,
// grouped by length so that no numeral has a leading zero.
func naturalRange(a, b int64) string {
	var alts []string
	for n := len(strconv.FormatInt(a, 10)); n <= len(strconv.FormatInt(b, 10)); n++ {
		first, last := int64(0), int64(math.Pow10(n))-1
		if n > 1 {
			first = int64(math.Pow10(n - 1))
		}
		first, last = max(first, a), min(last, b)
		if first <= last {
			alts = append(alts, sameLengthRange(strconv.FormatInt(first, 10), strconv.FormatInt(last, 10)))
		}
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

// sameLengthRange returns a GBNF expression for the digit strings from x to y, which have the
// same length and x <= y: the classic split into a shared prefix, the low edge, the full middle
// and the high edge.
func sameLengthRange(x, y string) string {
	if x == "" {
		return `""`
	}
	rest := len(x) - 1
	digits := func(n int) string {
		switch n {
		case 0:
			return ""
		case 1:
			return " [0-9]"
		}
		return fmt.Sprintf(" [0-9]{%d}", n)
	}
	class := func(lo, hi byte) string {
		if lo == hi {
			return `"` + string(lo) + `"`
		}
		return "[" + string(lo) + "-" + string(hi) + "]"
	}
	if x[0] == y[0] {
		if rest == 0 {
			return class(x[0], x[0])
		}
		return class(x[0], x[0]) + " " + sameLengthRange(x[1:], y[1:])
	}
	lowFull := strings.Trim(x[1:], "0") == ""
	highFull := strings.Trim(y[1:], "9") == ""
	var alts []string
	lo, hi := x[0], y[0]
	if !lowFull {
		alts = append(alts, class(x[0], x[0])+" "+sameLengthRange(x[1:], strings.Repeat("9", rest)))
		lo++
	}
	if !highFull {
		hi--
	}
	if lo <= hi {
		alts = append(alts, class(lo, hi)+digits(rest))
	}
	if !highFull {
		alts = append(alts, class(y[0], y[0])+" "+sameLengthRange(strings.Repeat("0", rest), y[1:]))
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

// numericKeywords constrain numbers only; the grammar expresses them for integers.
var numericKeywords = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}

func hasNumericBounds(s *node) bool {
	return slices.ContainsFunc(numericKeywords, func(k string) bool { return s.get(k) != nil })
}
