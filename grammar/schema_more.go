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
			return fail(path+"/"+key, "%s must be a number (the boolean form of draft 4 is not supported)", key)
		}
		if v.kind != 'n' {
			return fail(path+"/"+key, "%s must be a number", key)
		}
		r, ok := new(big.Rat).SetString(string(v.raw))
		if !ok {
			return fail(path+"/"+key, "%s %s is not a number", key, v.raw)
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
		return nil, nil, fail(path, "the range allows no integer of at most %d digits", maxIntegerDigits)
	}
	if lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return nil, nil, fail(path, "the range [%v, %v] holds no integer", lo, hi)
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

// integer returns the rule of an integer schema, bounded when it has numeric keywords.
func (c *converter) integer(s *node, path string) (string, error) {
	if !hasNumericBounds(s) {
		return "integer", nil
	}
	lo, hi, err := integerBounds(s, path)
	if err != nil {
		return "", err
	}
	return c.rule("integer", integerRange(lo, hi)), nil
}

// tuple returns the rule of an array with prefixItems (or items as a list, the draft-4 form):
// exactly its items in order, then further items of the items schema when there is one (and it
// is not false), within maxItems. Like llama.cpp, it does not emit the shorter arrays that the
// schema also allows.
func (c *converter) tuple(s *node, prefix *node, rest *node, path, key string) (string, error) {
	if prefix.kind != 'a' || len(prefix.arr) == 0 {
		return "", fail(path+"/"+key, "%s must be a non-empty array of schemas", key)
	}
	parts := make([]string, len(prefix.arr))
	for i, sub := range prefix.arr {
		e, err := c.visit(sub, fmt.Sprintf("%s/%s/%d", path, key, i))
		if err != nil {
			return "", err
		}
		parts[i] = e
	}
	lo, hi, err := sizeBounds(s, path, "minItems", "maxItems")
	if err != nil {
		return "", err
	}
	if hi >= 0 && hi < len(parts) {
		return "", fail(path, "maxItems %d is below the %d items of %s", hi, len(parts), key)
	}
	body := strings.Join(parts, ` "," space `)
	if rest != nil && !(rest.kind == 'b' && string(rest.raw) == "false") {
		e, err := c.visit(rest, path+"/items")
		if err != nil {
			return "", err
		}
		more := -1
		if hi >= 0 {
			more = hi - len(parts)
		}
		if more != 0 {
			body += ` ("," space ` + e + ")" + repeatSuffix(max(0, lo-len(parts)), more)
		}
	} else if lo > len(parts) {
		return "", fail(path, "minItems %d needs more than the %d items of %s, and no more are allowed", lo, len(parts), key)
	}
	return c.rule("tuple", `"[" space `+body+` "]" space`), nil
}

// allOf returns the rule of a schema with allOf. A single member is the schema itself (the
// usual way to annotate a $ref); several members must all be object schemas (type object,
// properties, required, or a $ref to such), whose properties and required lists merge into
// one object without other keys, a subset of what the schema allows. Anything else would need
// an intersection of grammars and is refused.
func (c *converter) allOf(s *node, path string) (string, error) {
	members := s.get("allOf")
	if members.kind != 'a' || len(members.arr) == 0 {
		return "", fail(path+"/allOf", "allOf must be a non-empty array")
	}
	var own []string
	for _, k := range s.keys {
		if k != "allOf" && !slices.Contains(annotations, k) && !strings.HasPrefix(k, "x-") {
			own = append(own, k)
		}
	}
	if len(members.arr) == 1 && len(own) == 0 {
		return c.visit(members.arr[0], path+"/allOf/0")
	}
	props := &node{kind: 'o'}
	required := &node{kind: 'a'}
	add := func(m *node, at string) error {
		for depth := 0; m.get("$ref") != nil; depth++ {
			r, _ := m.get("$ref").str()
			target := c.resolve(r)
			if target == nil || depth > 32 {
				return fail(at+"/$ref", "$ref %q in allOf must name a local object schema", r)
			}
			at, m = r[1:], target
		}
		if m.kind != 'o' {
			return fail(at, "allOf members must be object schemas")
		}
		for i, k := range m.keys {
			v := m.vals[i]
			switch {
			case k == "allOf" && m == s:
			case k == "type":
				if name, _ := v.str(); name != "object" {
					return fail(at+"/type", "allOf merges object schemas only, not type %s", v.raw)
				}
			case k == "properties":
				if v.kind != 'o' {
					return fail(at+"/properties", "properties must be an object")
				}
				for j, name := range v.keys {
					if props.get(name) != nil {
						return fail(at+"/properties/"+name, "property %q appears in two allOf members (their intersection is not supported)", name)
					}
					props.keys = append(props.keys, name)
					props.vals = append(props.vals, v.vals[j])
				}
			case k == "required":
				if v.kind != 'a' {
					return fail(at+"/required", "required must be an array of names")
				}
				required.arr = append(required.arr, v.arr...)
			case slices.Contains(annotations, k) || strings.HasPrefix(k, "x-"):
			default:
				return fail(at, "keyword %q in an allOf of several schemas is not supported (only type object, properties and required merge)", k)
			}
		}
		return nil
	}
	if len(own) > 0 {
		if err := add(s, path); err != nil {
			return "", err
		}
	}
	for i, m := range members.arr {
		if err := add(m, fmt.Sprintf("%s/allOf/%d", path, i)); err != nil {
			return "", err
		}
	}
	for _, r := range required.arr {
		name, ok := r.str()
		if !ok {
			return "", fail(path+"/allOf", "required must be an array of names")
		}
		if props.get(name) == nil {
			return "", fail(path+"/allOf", "required property %q is in no member's properties", name)
		}
	}
	props.raw = props.encode()
	required.raw = required.encode()
	merged := &node{kind: 'o', keys: []string{"properties", "required"}, vals: []*node{props, required}}
	return c.object(merged, path)
}
