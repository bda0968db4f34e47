package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/llamaloop/llamaloop/llamacpp"
)

// maxGridValues bounds the values one option's grid may expand to (a range
// such as 1-100000000 would otherwise allocate before anything checks it).
const maxGridValues = 10000

// intGrid is the value of a llama-bench option that takes integers: a
// comma-separated list whose items may be ranges, first-last (step 1),
// first-last+step or first-last*mult, as llama-bench parses them. Given
// several times, the values add up; the first time replaces the default.
type intGrid struct {
	vals []int
	set  bool
	// negative accepts negative integers (not ranges of them), for -ngl,
	// whose -1 is every layer; the option's check bounds them
	negative bool
}

func (g *intGrid) String() string {
	if g == nil {
		return ""
	}
	return joinInts(g.vals)
}

func (g *intGrid) Set(v string) error {
	vals, err := parseIntGrid(v, g.negative)
	if err != nil {
		return err
	}
	if !g.set {
		g.vals, g.set = nil, true
	}
	if len(g.vals)+len(vals) > maxGridValues {
		return fmt.Errorf("more than %d values", maxGridValues)
	}
	g.vals = append(g.vals, vals...)
	return nil
}

// parseIntGrid parses "128,512", "1-4", "64-512*2" or "0-4096+1024"; empty
// items are skipped, so that "" is no value.
func parseIntGrid(s string, negative bool) ([]int, error) {
	const want = "not a comma-separated list of integers and ranges first-last, first-last+step or first-last*mult"
	var out []int
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if n, err := gridInt(strings.TrimPrefix(item, "-")); negative && strings.HasPrefix(item, "-") && err == nil {
			out = append(out, -n)
			continue
		}
		firstS, rest, isRange := strings.Cut(item, "-")
		first, err := gridInt(firstS)
		if err != nil {
			return nil, fmt.Errorf("%s", want)
		}
		if !isRange {
			out = append(out, first)
			continue
		}
		op, i := byte('+'), strings.IndexAny(rest, "+*")
		lastS, stepS := rest, "1"
		if i >= 0 {
			op, lastS, stepS = rest[i], rest[:i], rest[i+1:]
		}
		last, err1 := gridInt(lastS)
		step, err2 := gridInt(stepS)
		switch {
		case err1 != nil || err2 != nil:
			return nil, fmt.Errorf("%s", want)
		case last < first:
			return nil, fmt.Errorf("range %s: the last value is below the first", item)
		case op == '+' && step < 1, op == '*' && (step < 2 || first < 1):
			return nil, fmt.Errorf("range %s: the values would not grow", item)
		}
		for v := first; v <= last; {
			if len(out) >= maxGridValues {
				return nil, fmt.Errorf("more than %d values", maxGridValues)
			}
			out = append(out, v)
			if op == '+' {
				v += step
			} else {
				v *= step
			}
		}
	}
	return out, nil
}

// gridInt is a non-negative integer of a grid, at most 1<<30 so that no
// step of a range overflows.
func gridInt(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a non-negative integer")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 1<<30 {
		return 0, fmt.Errorf("too large")
	}
	return n, nil
}

func joinInts(vals []int) string {
	s := make([]string, len(vals))
	for i, v := range vals {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

// pairGrid is -pg: each value a prompt length and a generation length,
// "512,128"; the option repeats.
type pairGrid [][2]int

func (g *pairGrid) String() string {
	if g == nil {
		return ""
	}
	var s []string
	for _, p := range *g {
		s = append(s, fmt.Sprintf("%d,%d", p[0], p[1]))
	}
	return strings.Join(s, " ")
}

func (g *pairGrid) Set(v string) error {
	a, b, ok := strings.Cut(v, ",")
	pp, err1 := gridInt(strings.TrimSpace(a))
	tg, err2 := gridInt(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("not a prompt length and a generation length, as in -pg 512,128")
	}
	if len(*g) >= maxGridValues {
		return fmt.Errorf("more than %d values", maxGridValues)
	}
	*g = append(*g, [2]int{pp, tg})
	return nil
}

// boolGrid is -fa: "0", "1" or "0,1" (on, off, true and false too).
type boolGrid struct {
	vals []bool
	set  bool
}

func (g *boolGrid) String() string {
	if g == nil {
		return ""
	}
	s := make([]string, len(g.vals))
	for i, v := range g.vals {
		s[i] = boolDigit(v)
	}
	return strings.Join(s, ",")
}

func (g *boolGrid) Set(v string) error {
	if !g.set {
		g.vals, g.set = nil, true
	}
	for _, item := range strings.Split(v, ",") {
		switch strings.TrimSpace(item) {
		case "1", "on", "true":
			g.vals = append(g.vals, true)
		case "0", "off", "false":
			g.vals = append(g.vals, false)
		case "":
		default:
			return fmt.Errorf("not a comma-separated list of 0 and 1")
		}
	}
	if len(g.vals) > maxGridValues {
		return fmt.Errorf("more than %d values", maxGridValues)
	}
	return nil
}

func boolDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// kvGrid is -ctk or -ctv: KV cache types, comma-separated.
type kvGrid struct {
	vals []llamacpp.KVType
	set  bool
}

func (g *kvGrid) String() string {
	if g == nil {
		return ""
	}
	s := make([]string, len(g.vals))
	for i, v := range g.vals {
		s[i] = string(v)
	}
	return strings.Join(s, ",")
}

func (g *kvGrid) Set(v string) error {
	if !g.set {
		g.vals, g.set = nil, true
	}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		t := llamacpp.KVType(strings.ToLower(item))
		known := false
		for _, k := range llamacpp.KVTypes() {
			known = known || k == t
		}
		if !known {
			names := make([]string, 0, 9)
			for _, k := range llamacpp.KVTypes() {
				names = append(names, string(k))
			}
			return fmt.Errorf("%s is not a KV cache type (%s)", item, strings.Join(names, ", "))
		}
		g.vals = append(g.vals, t)
	}
	if len(g.vals) > maxGridValues {
		return fmt.Errorf("more than %d values", maxGridValues)
	}
	return nil
}
