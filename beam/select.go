package beam

import (
	"math"

	"github.com/llamaloop/llamaloop/internal/numeric"
	"github.com/llamaloop/llamaloop/internal/numeric/parallel"
)

// cand is one extension of a beam: a token appended to the beam's path.
type cand struct {
	key   float64 // ranking key, highest first
	score float32 // Transformers: beam score + processed score (float32, as torch adds)
	beam  int32   // row of the candidate table: the beam the token extends
	token int32
	tmp   float32 // Transformers: score, or score+neg for a candidate that hit a stop
	hit   bool    // Transformers: ends with eos or reaches max_length
	node  int32   // its path node once made, else -1
}

// table is one row of the candidate table: a beam's processed scores and
// the running score added to each of them.
type table struct {
	scores []float32
	add    float32
	base   float64
}

// The three rankings below scan every candidate of every row in flat-index
// order beam*V+token and keep the best n in a numeric.Best, keyed by their
// ranking key with the flat index breaking ties (torch.topk leaves the order
// of equal scores unspecified; the lower index wins here). A flat index is
// an int32: rows*V stays far below 2^31 for any search that fits in memory
// (V scores per row).

// flatIndex returns the flat index of token v of row j in rows of width.
func flatIndex(j, width, v int) int32 { return int32(j*width + v) }

// ranked returns the candidates that best kept, best first, in dst's
// storage, with their beam, token and float32 score (add + score).
func ranked(dst []cand, best *numeric.Best[float64], rows []table) []cand {
	dst = dst[:0]
	width := int32(len(rows[0].scores))
	for _, e := range best.Sorted() {
		j, v := e.Index/width, e.Index%width
		r := &rows[j]
		dst = append(dst, cand{key: e.Key, score: r.scores[v] + r.add, beam: j, token: v, node: -1})
	}
	return dst
}

// topScores ranks the candidates of rows by float32 add+score and keeps the
// best n, ties to the lower flat index. NaN candidates are never kept. With
// a job and rows wide enough, each row's best n are found on a core of its
// own and then merged (rowTops).
func topScores(dst []cand, best *numeric.Best[float64], rows []table, n int, job *rowTops) []cand {
	if job != nil && len(rows) > 1 && parallel.Workers() > 1 && len(rows)*len(rows[0].scores) >= parallelEntries {
		job.rows, job.n = rows, n
		if len(job.best) < len(rows) {
			job.best = make([]numeric.Best[float64], len(rows))
		}
		job.run.Run(len(rows), job)
		job.rows = nil
		best.Reset(n)
		for j := range rows {
			for _, e := range job.best[j].Sorted() {
				best.Offer(e)
			}
		}
		return ranked(dst, best, rows)
	}
	best.Reset(n)
	for j, r := range rows {
		topScoresOf(best, r, j)
	}
	return ranked(dst, best, rows)
}

// topScoresOf offers the candidates of row j, r, to best in flat-index
// order. Once best is full, a candidate enters only when its key is above
// the worst kept, w: when its float32 score is above the largest float32
// at most w. numeric.FirstAboveSum skips the others.
func topScoresOf(best *numeric.Best[float64], r table, j int) {
	add, scores := r.add, r.scores
	v := 0
	for ; v < len(scores) && !best.Full(); v++ {
		if acc := scores[v] + add; acc == acc {
			best.Offer(numeric.Entry[float64]{Key: float64(acc), Index: flatIndex(j, len(scores), v)})
		}
	}
	if best.Len() == 0 {
		return // best keeps nothing
	}
	for ; v < len(scores); v++ {
		w := best.Worst().Key
		thr := float32(w) // w itself: every key is a float32's
		if float64(thr) > w {
			thr = math.Nextafter32(thr, float32(math.Inf(-1)))
		}
		if v = numeric.FirstAboveSum(scores, v, add, thr); v == len(scores) {
			return
		}
		best.Replace(numeric.Entry[float64]{Key: float64(scores[v] + add), Index: flatIndex(j, len(scores), v)})
	}
}

// rowTops finds the best n candidates of each row on its own core. The
// step's best n are among the union of the rows' best n (a candidate with n
// better ones in its own row has n better ones overall), and Best ranks by
// key, then flat index, a total order: merging the rows' best gives what
// one scan of every row gives.
type rowTops struct {
	rows []table
	n    int
	best []numeric.Best[float64]
	run  parallel.Runner
}

// Do ranks row j.
func (t *rowTops) Do(j int) {
	b := &t.best[j]
	b.Reset(t.n)
	topScoresOf(b, t.rows[j], j)
}

// topSampled draws n candidates without replacement from softmax(add+score)
// over all rows, as torch.multinomial does: the n largest p_i/q_i with q_i ~
// Exp(1), in that order (not re-sorted by score), each q_i made from one
// uniform of the search's Source (logits.Source.ExpFloat64), candidate by
// candidate in flat-index order. Ranking by log p_i - log q_i needs no
// normalisation. Candidates of probability zero come last, in flat-index
// order, and take no draw.
func (s *search) topSampled(dst []cand, best *numeric.Best[float64], rows []table, n int) []cand {
	best.Reset(n)
	for j, r := range rows {
		add := r.add
		for v, x := range r.scores {
			acc := x + add
			if acc != acc {
				continue
			}
			key := math.Inf(-1)
			if !math.IsInf(float64(acc), -1) {
				key = float64(acc) - math.Log(s.src.ExpFloat64())
			}
			if !best.Admits(key) {
				continue
			}
			best.Offer(numeric.Entry[float64]{Key: key, Index: flatIndex(j, len(r.scores), v)})
		}
	}
	return ranked(dst, best, rows)
}

// topLogProbs ranks the candidates of rows by float64 base+score and keeps
// the best n finite ones, ties to the lower flat index.
func topLogProbs(dst []cand, best *numeric.Best[float64], rows []table, n int) []cand {
	best.Reset(n)
	for j, r := range rows {
		base := r.base
		for v, x := range r.scores {
			key := base + float64(x)
			if !best.Admits(key) || math.IsInf(key, 0) || key != key {
				continue
			}
			best.Offer(numeric.Entry[float64]{Key: key, Index: flatIndex(j, len(r.scores), v)})
		}
	}
	return ranked(dst, best, rows)
}
