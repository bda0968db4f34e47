package grammar

import (
	"math/big"
	"strings"
)

// maxFractionDigits is the longest fractional part of the number primitive (decimal-part in
// jsonPrimitives), and of a bounded number.
const maxFractionDigits = 16

// numberBounds reads minimum, maximum, exclusiveMinimum and exclusiveMaximum as the tightest
// lower and upper bound (nil: open), each inclusive or exclusive.
func numberBounds(s *node, path string) (lo *big.Rat, loEx bool, hi *big.Rat, hiEx bool, err error) {
	for _, b := range []struct {
		key              string
		upper, exclusive bool
	}{{"minimum", false, false}, {"exclusiveMinimum", false, true}, {"maximum", true, false}, {"exclusiveMaximum", true, true}} {
		v := s.get(b.key)
		if v == nil {
			continue
		}
		if v.kind == 'b' {
			return nil, false, nil, false, fail(path, b.key, "%s must be a number (the boolean form of draft 4 is not supported)", b.key)
		}
		if v.kind != 'n' {
			return nil, false, nil, false, fail(path, b.key, "%s must be a number", b.key)
		}
		r, ok := new(big.Rat).SetString(string(v.raw))
		if !ok {
			return nil, false, nil, false, fail(path, b.key, "%s %s is not a number", b.key, v.raw)
		}
		if b.upper {
			if hi == nil || r.Cmp(hi) < 0 || r.Cmp(hi) == 0 && b.exclusive {
				hi, hiEx = r, b.exclusive
			}
		} else if lo == nil || r.Cmp(lo) > 0 || r.Cmp(lo) == 0 && b.exclusive {
			lo, loEx = r, b.exclusive
		}
	}
	return lo, loEx, hi, hiEx, nil
}

// bound is one end of a range of magnitudes: nil is open; frac holds the digits of the
// fractional part with trailing zeros removed.
type bound struct {
	whole *big.Int
	frac  string
	excl  bool
}

// splitDecimal returns the integral part and the fractional digits of r >= 0, or false when r
// has more fractional digits than a bound of the grammar can use exactly.
func splitDecimal(r *big.Rat, excl bool) (*bound, bool) {
	whole := new(big.Int).Quo(r.Num(), r.Denom())
	rest := new(big.Rat).Sub(r, new(big.Rat).SetInt(whole))
	s := strings.TrimRight(strings.TrimPrefix(rest.FloatString(64), "0."), "0")
	if s == "0" {
		s = ""
	}
	check, _ := new(big.Rat).SetString("0." + s + "0")
	if check.Cmp(rest) != 0 {
		return nil, false
	}
	return &bound{whole: whole, frac: s, excl: excl}, true
}

// numberRange returns a GBNF expression (trailing space included) for the decimal numbers,
// written without an exponent, of at most 16 integral and 16 fractional digits, that lie between
// lo and hi (nil: open; each inclusive or exclusive). "" when there is none.
func numberRange(lo *big.Rat, loEx bool, hi *big.Rat, hiEx bool, maxFrac int) (string, bool) {
	var alts []string
	zero := new(big.Rat)
	// Non-negative part: magnitudes from max(lo, 0) to hi.
	if hi == nil || hi.Sign() > 0 || hi.Sign() == 0 && !hiEx {
		a, aEx := zero, false
		if lo != nil && lo.Sign() >= 0 {
			a, aEx = lo, loEx
		}
		e, ok := magnitudes(a, aEx, hi, hiEx, maxFrac)
		if !ok {
			return "", false
		}
		if e != "" {
			alts = append(alts, e)
		}
	}
	// Negative part: "-" and the magnitudes from max(-hi, 0), past zero, to -lo.
	if lo == nil || lo.Sign() < 0 {
		a, aEx := zero, true
		if hi != nil && hi.Sign() < 0 {
			a, aEx = new(big.Rat).Neg(hi), hiEx
		}
		var b *big.Rat
		if lo != nil {
			b = new(big.Rat).Neg(lo)
		}
		e, ok := magnitudes(a, aEx, b, loEx, maxFrac)
		if !ok {
			return "", false
		}
		if e != "" {
			alts = append(alts, `"-" `+e)
		}
	}
	if len(alts) == 0 {
		return "", true
	}
	return "(" + strings.Join(alts, " | ") + ") space", true
}

// magnitudes returns the expression of the unsigned decimals from a to b (b nil: open), or
// false when a bound has too many digits to be used exactly.
func magnitudes(a *big.Rat, aEx bool, b *big.Rat, bEx bool, maxFrac int) (string, bool) {
	limit := new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(maxIntegerDigits), nil), big.NewInt(1))
	lo, ok := splitDecimal(a, aEx)
	if !ok {
		return "", false
	}
	var hi *bound
	if b != nil {
		if a.Cmp(b) > 0 || a.Cmp(b) == 0 && (aEx || bEx) {
			return "", true
		}
		if hi, ok = splitDecimal(b, bEx); !ok {
			return "", false
		}
		if hi.whole.Cmp(limit) > 0 {
			hi = nil // past the longest integral part: open
		}
	}
	if lo.whole.Cmp(limit) > 0 {
		return "", true
	}
	fracLo, fracHi := lo.frac, ""
	var alts []string
	add := func(whole *big.Int, f string) {
		if f != "" {
			alts = append(alts, `"`+whole.String()+`" `+f)
		}
	}
	if hi != nil && lo.whole.Cmp(hi.whole) == 0 {
		fracHi = hi.frac
		add(lo.whole, fraction(&fracLo, lo.excl, &fracHi, hi.excl, maxFrac))
	} else {
		add(lo.whole, fraction(&fracLo, lo.excl, nil, false, maxFrac))
		first := new(big.Int).Add(lo.whole, big.NewInt(1))
		last := limit
		if hi != nil {
			last = new(big.Int).Sub(hi.whole, big.NewInt(1))
		}
		if first.Cmp(last) <= 0 {
			alts = append(alts, naturalRange(first.Int64(), last.Int64())+fractionAny(maxFrac))
		}
		if hi != nil {
			fracHi = hi.frac
			add(hi.whole, fraction(nil, false, &fracHi, hi.excl, maxFrac))
		}
	}
	if len(alts) == 0 {
		return "", true
	}
	return "(" + strings.Join(alts, " | ") + ")", true
}

// fraction returns the expression of the optional fractional part ("" or "." and digits) whose
// value lies between 0.lo and 0.hi (a nil side is open), or "" when none does. lo and hi are
// digit strings without trailing zeros.
func fraction(lo *string, loEx bool, hi *string, hiEx bool, maxFrac int) string {
	var alts []string
	if (lo == nil || *lo == "" && !loEx) && (hi == nil || *hi != "" || !hiEx) {
		alts = append(alts, `""`)
	}
	if f := fracDigits(lo, loEx, hi, hiEx, maxFrac); f != "" && maxFrac > 0 {
		alts = append(alts, `"." `+f)
	}
	if len(alts) == 0 {
		return ""
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

// fracDigits returns the expression of the digit strings (at least one at depth 0, at most
// maxFractionDigits-depth) that continue a fraction whose remaining bounds are lo and hi: nil
// once the digits so far are past that bound, else the bound's remaining digits. "" when no
// string qualifies.
func fracDigits(lo *string, loEx bool, hi *string, hiEx bool, room int) string {
	return fracDigitsAt(lo, loEx, hi, hiEx, 0, room)
}

// fractionAny is the optional fractional part of at most maxFrac digits.
func fractionAny(maxFrac int) string {
	if maxFrac == 0 {
		return ""
	}
	return ` ("." [0-9]` + repeatSuffix(1, maxFrac) + `)?`
}

func fracDigitsAt(lo *string, loEx bool, hi *string, hiEx bool, depth, maxFrac int) string {
	room := maxFrac - depth
	if lo == nil && hi == nil {
		if depth == 0 {
			return "[0-9]" + repeatSuffix(1, maxFrac)
		}
		return repeatDigits(room)
	}
	var alts []string
	// Ending here: the remaining digits are zeros.
	if depth > 0 && (lo == nil || *lo == "" && !loEx) && (hi == nil || *hi != "" || !hiEx) {
		alts = append(alts, `""`)
	}
	if room == 0 {
		return strings.Join(alts, "")
	}
	digit := func(b *string) int {
		if b == nil || *b == "" {
			return 0
		}
		return int((*b)[0] - '0')
	}
	rest := func(b *string) *string {
		if *b == "" {
			return b
		}
		r := strings.TrimRight((*b)[1:], "0")
		return &r
	}
	lowD, highD := -1, 10 // digits strictly between keep both bounds behind
	if lo != nil {
		lowD = digit(lo)
	}
	if hi != nil {
		highD = digit(hi)
	}
	// Digits equal to a bound's digit stay on that bound.
	if lo != nil && hi != nil && lowD == highD {
		if e := fracDigitsAt(rest(lo), loEx, rest(hi), hiEx, depth+1, maxFrac); e != "" {
			alts = append(alts, `"`+string(rune('0'+lowD))+`" `+e)
		}
	} else {
		if lo != nil {
			var h *string // the low digit is below hi's digit, so hi is behind
			if e := fracDigitsAt(rest(lo), loEx, h, false, depth+1, maxFrac); e != "" {
				alts = append(alts, `"`+string(rune('0'+lowD))+`" `+e)
			}
		}
		if from, to := lowD+1, highD-1; from <= to {
			class := "[" + string(rune('0'+from)) + "-" + string(rune('0'+to)) + "]"
			if from == to {
				class = `"` + string(rune('0'+from)) + `"`
			}
			alts = append(alts, class+" "+repeatDigits(room-1))
		}
		if hi != nil {
			if e := fracDigitsAt(nil, false, rest(hi), hiEx, depth+1, maxFrac); e != "" {
				alts = append(alts, `"`+string(rune('0'+highD))+`" `+e)
			}
		}
	}
	switch len(alts) {
	case 0:
		return ""
	case 1:
		return alts[0]
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

func repeatDigits(n int) string {
	if n <= 0 {
		return `""`
	}
	return "[0-9]" + repeatSuffix(0, n)
}
