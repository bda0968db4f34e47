package mirostat

import (
	"cmp"
	"math"
	"slices"

	"github.com/llamaloop/llamaloop/internal/numeric"
)

// The draw is an inverse CDF over the candidates in rank order (see Draws
// in the package documentation). The reference, selectLogits and
// selection.pick, ranks every candidate, sums the probabilities in rank
// order and walks the running sum to u times the total. A step only needs
// the candidate where the running sum crosses that target, so drawLogits
// finds it without ranking. Few candidates it collects and partitions by
// rank, keeping the side that holds the target (descend, a quickselect).
// Many it counts in a histogram of probability mass by logit band, built
// from the normalizer's terms in a pass of its own, walks the bands to the one
// that holds the target and partitions only that band's tokens, typically
// a few hundred.
// Either way a step costs O(n).
//
// Its sums add the same probabilities as the reference's in other orders,
// so they differ from them by rounding. cdfWalk allows for the largest such
// difference (drawSlack) in every comparison with the target, and when a
// comparison falls within it, the step falls back to the reference. The
// token is therefore the reference's own, bit for bit. The fallback takes
// about one draw in 2^49/n², n the number of candidates: one in several
// thousand at n = 262144, one in hundreds of millions at n = 1000.

// bands is the number of logit bands of a histogram.
const bands = 2048

// bandShift sets the width of a band: 2^bandShift steps of ln2/1024 (the
// rounding of d·1024/ln2, d the logit less the largest), 64·ln2/1024 ≈ 0.043,
// so that the bands span 88.7 below the largest logit, more than ln n + 40 for
// any row (n < 2^31).
const bandShift = 6

// bandStep is 1024/ln2: d·bandStep + numeric.ExpShifter holds the step of d
// in its low bits.
const bandStep = numeric.ExpTableSize / math.Ln2

// histogram holds the mass and count of a row's unmasked tokens by logit
// band, and the tokens of each band as a list: band b holds the logits x
// whose step k (the rounding of (x - shift)·1024/ln2) has -k >> bandShift = b,
// the last band everything lower; masked tokens are in none. Past
// ln n + 40 below the largest logit, all tokens together weigh less than
// e^-40 times the most probable one; on the rows of a language model, a band
// holds at most a few hundred tokens where the mass is. logitTerms fills it
// (fill) from the terms the normalizer adds, each within
// 1e-15 of the probability of its token times exp(lnZ), well within the
// 1e-12 that drawSlack allows.
type histogram struct {
	shift float64
	stats []bandStats // by band
	next  []int32     // by token: the previous token of its band, or -1
	terms []float64   // by token: its term, scratch of fill
}

// bandStats is one band of a histogram, in one cache line with its
// neighbours.
type bandStats struct {
	mass  float64 // exp(x - shift) summed, not normalized
	count int32
	head  int32 // its last token, or -1
}

// reset empties the histogram for a row of n tokens with largest logit
// shift.
func (h *histogram) reset(n int, shift float64) {
	h.shift = shift
	if h.stats == nil {
		h.stats = make([]bandStats, bands)
	}
	for b := range h.stats {
		h.stats[b] = bandStats{head: -1}
	}
	h.next = slices.Grow(h.next[:0], n)[:n]
}

// bandOf is the band of logit x under the largest logit m, non-increasing
// in x, or bands for a masked token: -k >> bandShift for x's step k, clamped
// to the last band.
func bandOf(x float32, m float64) uint64 {
	d := float64(x) - m
	if d < numeric.ExpFloor {
		d = numeric.ExpFloor
	}
	k := math.Float64bits(float64(d*bandStep) + numeric.ExpShifter)
	// A NaN lands in any band: its step fails.
	b := min((math.Float64bits(numeric.ExpShifter)-k)>>bandShift, bands-1)
	if math.Float32bits(x) == 0xff800000 { // -Inf
		b = bands
	}
	return b
}

// band is the band of logit x <= shift.
func (h *histogram) band(x float32) int { return int(bandOf(x, h.shift)) }

// add enters token i of logit x and term e, unless it is masked.
func (h *histogram) add(x float32, i int, e float64) {
	b := bandOf(x, h.shift)
	if b == bands {
		return
	}
	s := &h.stats[b]
	h.next[i], s.head = s.head, int32(i)
	s.mass += e
	s.count++
}

// fill enters every unmasked token of row in h, with the normalizer's terms
// (numeric.Terms, the vector loop). The tokens within 88.7 of the largest
// logit, nearly all of them, go through a loop without calls (bandOf written
// out); add enters the others, whose bands bandOf clamps.
func (h *histogram) fill(row []float32) {
	m, shifter := h.shift, math.Float64bits(numeric.ExpShifter)
	h.terms = slices.Grow(h.terms[:0], len(row))[:len(row)]
	terms := h.terms
	numeric.Terms(terms, row, m)
	stats, next := h.stats[:bands], h.next[:len(row)]
	for i, x := range row {
		k := math.Float64bits(float64((float64(x)-m)*bandStep) + numeric.ExpShifter)
		b := (shifter - k) >> bandShift
		if b >= bands {
			if math.Float32bits(x) != 0xff800000 { // not masked: below the bands
				h.add(x, i, terms[i])
			}
			continue
		}
		s := &stats[b]
		next[i], s.head = s.head, int32(i)
		s.mass += terms[i]
		s.count++
	}
}

// best returns the m best tokens in rank order (fewer when fewer are
// unmasked), in dst's storage: the tokens of the first bands that hold m,
// partitioned by rank.
func (h *histogram) best(dst []cand, row []float32, m int) []cand {
	last, seen := bands-1, 0
	for b, s := range h.stats[:bands] {
		if seen += int(s.count); seen >= m {
			last = b
			break
		}
	}
	c := h.collect(dst, row, 0, last)
	if len(c) > m {
		selectBest(c, m)
		c = c[:m]
	}
	slices.SortFunc(c, byRank)
	return c
}

// collect appends the tokens of bands first to last.
func (h *histogram) collect(dst []cand, row []float32, first, last int) []cand {
	for b := first; b <= last; b++ {
		for i := h.stats[b].head; i >= 0; i = h.next[i] {
			x := float64(row[i])
			dst = append(dst, cand{v: x, lv: x, id: i})
		}
	}
	return dst
}

// lowestWhere returns the smallest finite float32 x <= hi for which keep
// holds, keep being monotone (false, then true up to hi), or false when
// keep(hi) does not hold.
func lowestWhere(hi float32, keep func(float32) bool) (float32, bool) {
	if !keep(hi) {
		return 0, false
	}
	if keep(-math.MaxFloat32) {
		return -math.MaxFloat32, true
	}
	// Bisect over the float32s in order; keep(up) holds, keep(lo) does not.
	lo, up := ordered(-math.MaxFloat32), ordered(hi)
	for up-lo > 1 {
		mid := lo + (up-lo)/2
		if keep(fromOrdered(mid)) {
			up = mid
		} else {
			lo = mid
		}
	}
	return fromOrdered(up), true
}

// ordered maps float32s other than NaN to integers in the same order (-0
// before +0).
func ordered(x float32) int64 {
	b := int32(math.Float32bits(x))
	return int64(b ^ (b >> 31 & math.MaxInt32))
}

func fromOrdered(k int64) float32 {
	b := int32(k)
	return math.Float32frombits(uint32(b ^ (b >> 31 & math.MaxInt32)))
}

// cdfWalk runs the reference's cumulative sum over blocks of candidates in
// rank order, one block's mass at a time, with the slack that makes each
// decision the reference's. Its sum is certain to be at most the
// reference's target: it is exactly 0 (nothing passed yet) or below target
// - slack.
type cdfWalk struct {
	sum, target, slack float64
}

func newCDFWalk(u, total float64, n int) cdfWalk {
	return cdfWalk{target: u * total, slack: drawSlack(total, n)}
}

// drawSlack bounds the difference between a comparison of cdfWalk and the
// reference's, for n candidates of total probability total. Both add the
// same non-negative probabilities, each partial sum within γ_h ≈ h·2^-53
// of its exact value (h the additions along any path: at most n in the
// reference, n + bands + a few in cdfWalk), and the histogram's
// probabilities are within 1e-12. The target, u times the total, inherits
// both. The bound allows for each of them twice.
func drawSlack(total float64, n int) float64 {
	return total * (4e-12 + float64(n+bands+128)*0x1p-50)
}

// next passes a block of the given mass: within reports that the target lies
// in it (the block is not passed), ok false that rounding leaves it undecided.
func (w *cdfWalk) next(mass float64) (within, ok bool) {
	s := w.sum + mass
	switch {
	case s > w.target+w.slack:
		return true, true
	case s < w.target-w.slack:
		w.sum = s
		return false, true
	}
	return false, false
}

// descentLeaf is the size at which descend ranks what is left.
const descentLeaf = 24

// descend continues w through c, the next candidates in rank order (in any
// order, their probabilities set), and returns the index of the candidate
// in which the target lies. It reorders c. ok is false when rounding leaves
// it undecided or the target lies beyond c.
func descend(c []cand, w *cdfWalk) (int, bool) {
	lo, hi := 0, len(c)
	seed := uint64(len(c))
	for rounds := 0; hi-lo > descentLeaf && rounds < 64; rounds++ {
		k, left := partitionByRank(c[lo:hi], &seed)
		k += lo
		if k > lo {
			within, ok := w.next(left)
			if !ok {
				return 0, false
			}
			if within {
				hi = k
				continue
			}
		}
		within, ok := w.next(c[k].p)
		if !ok {
			return 0, false
		}
		if within {
			return k, true
		}
		lo = k + 1
	}
	slices.SortFunc(c[lo:hi], byRank) // also what 64 unlucky pivots leave
	for i := lo; i < hi; i++ {
		within, ok := w.next(c[i].p)
		if !ok {
			return 0, false
		}
		if within {
			return i, true
		}
	}
	return 0, false
}

// partitionByRank moves the candidates that rank before a pivot to the front
// of c, the pivot after them, and returns the pivot's index and their total
// probability. The pivot is the median of three entries at pseudo-random
// positions, so that no order of the row makes the quickselects quadratic
// in expectation.
func partitionByRank(c []cand, seed *uint64) (int, float64) {
	n := len(c)
	a, b, d := randIndex(seed, n), randIndex(seed, n), randIndex(seed, n)
	if ranksAfter(c[a], c[b]) {
		a, b = b, a
	}
	if ranksAfter(c[b], c[d]) {
		b = d
		if ranksAfter(c[a], c[b]) {
			b = a
		}
	}
	c[b], c[n-1] = c[n-1], c[b]
	pivot := c[n-1]
	k, left := 0, 0.0
	for i := range n - 1 {
		if ranksAfter(pivot, c[i]) {
			left += c[i].p
			c[i], c[k] = c[k], c[i]
			k++
		}
	}
	c[k], c[n-1] = c[n-1], c[k]
	return k, left
}

func randIndex(seed *uint64, n int) int {
	*seed = *seed*6364136223846793005 + 1442695040888963407
	return int((*seed >> 33) % uint64(n))
}

// selectBest moves the j best candidates of c, in any order, to c[:j].
func selectBest(c []cand, j int) {
	lo, hi := 0, len(c)
	seed := uint64(len(c))
	for rounds := 0; lo < j && j < hi; rounds++ {
		if rounds == 64 {
			slices.SortFunc(c[lo:hi], byRank)
			return
		}
		k, _ := partitionByRank(c[lo:hi], &seed)
		k += lo
		switch {
		case k == j || k+1 == j:
			return
		case k > j:
			hi = k
		default:
			lo = k + 1
		}
	}
}

// collectLimit is how many candidates a V2 draw collects from the
// histogram's lists, at most, before it walks the histogram's bands instead.
func collectLimit(n int) int { return 256 + n/32 }

// drawLogits is SampleLogits: it draws the token that selectLogits and pick
// draw, without ranking the candidates. A step reads the row twice, for its
// maximum, then for the normalizer and the histogram (logitTerms); the
// candidates, or the tokens of the bands the target can fall in, come from
// the histogram's lists.
func (s *Sampler) drawLogits(row []float32, u float64) (Step, error) {
	if s.cfg.Version == V1 {
		return s.drawLogitsV1(row, u)
	}
	// The histogram's pass costs several times the normalizer's, and a V2
	// step needs it only when many tokens are near its threshold. So the
	// normalizer comes first, then one light pass counts the tokens of the
	// bands the histogram would have looked at and collects the candidates;
	// only when they are too many does the step run the histogram's way.
	st, err := logitStats(row, nil)
	if err != nil {
		return Step{}, err
	}
	lo, any := s.lowestCandidate(&st)
	if !any { // the most probable token alone
		x := float64(st.shift)
		return s.commit(st, cand{v: x, lv: x, id: int32(st.top)}, st.prob(x), 1, 0, 0)
	}
	// The bands up to lo's hold the logits from floor up.
	last := bandOf(lo, st.shift)
	floor, _ := lowestWhere(float32(st.shift), func(x float32) bool { return bandOf(x, st.shift) <= last })
	c, ok := collectAbove(s.cands[:0], row, floor, lo, collectLimit(len(row)))
	s.cands = c
	if !ok {
		return s.drawLogitsHistogram(row, u)
	}
	// In the histogram's order: by band, the last token of a band first.
	slices.SortFunc(c, func(a, b cand) int {
		if ba, bb := bandOf(float32(a.v), st.shift), bandOf(float32(b.v), st.shift); ba != bb {
			return cmp.Compare(ba, bb)
		}
		return cmp.Compare(b.id, a.id)
	})
	return s.drawAmong(row, st, c, u)
}

// collectAbove appends to dst the tokens of row with logits at least lo,
// counting those at least floor (<= lo), and reports false once limit of
// them are counted. Nearly every token is below floor: numeric.FirstAtLeast
// skips them.
func collectAbove(dst []cand, row []float32, floor, lo float32, limit int) ([]cand, bool) {
	n := 0
	for i := numeric.FirstAtLeast(row, 0, floor); i < len(row); i = numeric.FirstAtLeast(row, i+1, floor) {
		if x := row[i]; x >= lo {
			v := float64(x)
			dst = append(dst, cand{v: v, lv: v, id: int32(i)})
		}
		if n++; n >= limit {
			return dst, false
		}
	}
	return dst, n < limit
}

// lowestCandidate is the lowest logit whose token is a V2 candidate (its
// surprise at most mu), and false when only the most probable token is:
// selectLogits' float32 threshold and its exact test, both monotone in the
// logit, so every token with a logit at least lo is a candidate.
func (s *Sampler) lowestCandidate(st *rowStats) (float32, bool) {
	thr := float32Below(st.shift + st.lnZ - s.mu*math.Ln2 -
		1e-9*(math.Abs(st.shift)+st.lnZ+math.Abs(s.mu*math.Ln2)+1))
	return lowestWhere(float32(st.shift), func(x float32) bool {
		return x >= thr && st.surpriseBits(float64(x)) <= s.mu
	})
}

// drawLogitsHistogram is drawLogits by the histogram, for the rows whose
// candidates, or the tokens of their bands, are many.
func (s *Sampler) drawLogitsHistogram(row []float32, u float64) (Step, error) {
	h := &s.hist
	st, err := logitTerms(row, nil, h)
	if err != nil {
		return Step{}, err
	}
	lo, any := s.lowestCandidate(&st)
	if !any { // the most probable token alone
		x := float64(st.shift)
		return s.commit(st, cand{v: x, lv: x, id: int32(st.top)}, st.prob(x), 1, 0, 0)
	}
	last := h.band(lo)
	n := 0
	for _, s := range h.stats[:last+1] {
		n += int(s.count)
	}
	if n >= collectLimit(len(row)) {
		return s.drawHistogram(row, st, u, cut{band: last, lo: lo}, 0, 0)
	}
	c := h.collect(s.cands[:0], row, 0, last)
	c = slices.DeleteFunc(c, func(c cand) bool { return float32(c.v) < lo })
	s.cands = c
	return s.drawAmong(row, st, c, u)
}

// drawLogitsV1 is drawLogits for V1. The top M and, when k exceeds M, the
// top k of the row come from the histogram.
func (s *Sampler) drawLogitsV1(row []float32, u float64) (Step, error) {
	h := &s.hist
	st, err := logitTerms(row, nil, h)
	if err != nil {
		return Step{}, err
	}
	top := h.best(s.cands[:0], row, min(s.cfg.M, len(row)))
	s.cands = top
	exponent := s.zipfExponent(top)
	k, err := adaptiveK(s.mu, exponent, len(row))
	if err != nil {
		return Step{}, err
	}
	if k <= len(top) || len(top) < min(s.cfg.M, len(row)) { // top holds the candidates, ranked
		kept := top[:min(k, len(top))]
		probs := s.fillProbs(st, kept)
		i := numeric.InverseCDF(probs, u)
		return s.commit(st, kept[i], probs[i], len(kept), k, exponent)
	}
	// The candidates are the first k in rank order: the tokens of the bands
	// before the one where the count reaches k, and the best of that band.
	seen := 0
	for b, bs := range h.stats[:bands] {
		if seen+int(bs.count) >= k {
			return s.drawHistogram(row, st, u, cut{band: b, best: k - seen}, k, exponent)
		}
		seen += int(bs.count)
	}
	return s.drawHistogram(row, st, u, cut{band: bands}, k, exponent) // k covers every unmasked token
}

// cut is where the candidates end in a histogram: every token of the bands
// before band, and in band (unless it is bands) the best `best` tokens or,
// when best is 0, those with logits at least lo.
type cut struct {
	band, best int
	lo         float32
}

// drawHistogram draws from the candidates of s.hist up to cut: it walks the
// bands before the target's, then descends through the tokens of the bands
// the target can fall in. k and exponent are V1's, for the step.
func (s *Sampler) drawHistogram(row []float32, st rowStats, u float64, cut cut, k int, exponent float64) (Step, error) {
	h := &s.hist
	zinv := math.Exp(-st.lnZ)
	last := cut.band
	var before float64
	kept := 0
	for b := range last {
		before += h.stats[b].mass * zinv
		kept += int(h.stats[b].count)
	}
	// The target is u times the mass of the bands before last plus part of
	// band last's. Collect the bands that it can fall in, found from the
	// two extremes, and band last.
	var lastMass float64
	lastCount := 0
	if last < bands {
		lastMass, lastCount = h.stats[last].mass*zinv, int(h.stats[last].count)
	}
	margin := 2 * drawSlack(before+lastMass, kept+lastCount)
	low, high := u*before-margin, u*(before+lastMass)+margin
	first, end := last, last
	var cum float64
	for b := range last {
		cum += h.stats[b].mass * zinv
		if first == last && cum >= low {
			first = b
		}
		if cum > high {
			end = b
			break
		}
	}
	c := h.collect(s.cands[:0], row, first, min(end, last-1))
	n := len(c)
	if last < bands {
		c = h.collect(c, row, last, last)
	}
	s.cands = c
	// c[:n] holds bands first to end (or last-1), c[n:] band last; move the
	// candidates of band last to the front of in.
	in := c[n:]
	switch {
	case last == bands:
	case cut.best > 0:
		selectBest(in, cut.best)
		in = in[:cut.best]
	default:
		j := 0
		for i := range in {
			if float32(in[i].v) >= cut.lo {
				in[i], in[j] = in[j], in[i]
				j++
			}
		}
		in = in[:j]
	}
	for i := range c[:n+len(in)] {
		c[i].p = st.prob(c[i].lv)
	}
	total := before
	for _, x := range in {
		total += x.p
	}
	kept += len(in)
	w := newCDFWalk(u, total, kept)
	for b := range first {
		if within, ok := w.next(h.stats[b].mass * zinv); within || !ok {
			return s.sampleRanked(row, u)
		}
	}
	if end == last {
		n += len(in)
	}
	if i, ok := descend(c[:n], &w); ok {
		return s.commit(st, c[i], c[i].p, kept, k, exponent)
	}
	return s.sampleRanked(row, u)
}

// drawAmong draws from V2's collected candidates c, in any order: by the
// reference itself when they are few, else by descend.
func (s *Sampler) drawAmong(row []float32, st rowStats, c []cand, u float64) (Step, error) {
	if len(c) <= descentLeaf {
		slices.SortFunc(c, byRank)
		probs := s.fillProbs(st, c)
		i := numeric.InverseCDF(probs, u)
		return s.commit(st, c[i], probs[i], len(c), 0, 0)
	}
	var total float64
	for i := range c {
		c[i].p = st.prob(c[i].lv)
		total += c[i].p
	}
	w := newCDFWalk(u, total, len(c))
	if i, ok := descend(c, &w); ok {
		return s.commit(st, c[i], c[i].p, len(c), 0, 0)
	}
	return s.sampleRanked(row, u)
}

// sampleRanked is the reference draw: rank the candidates, walk their sum.
func (s *Sampler) sampleRanked(row []float32, u float64) (Step, error) {
	sel, err := s.selectLogits(row)
	if err != nil {
		return Step{}, err
	}
	return s.commitAt(&sel, sel.pick(u))
}
