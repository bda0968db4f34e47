package beam

import "math"

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

// insert puts c into the ranked list dst (capacity >= n, at most n entries),
// highest key first; a key equal to an entry's ranks after it, so entries
// pushed in flat-index order break ties to the lower index.
func insert(dst []cand, n int, c cand) []cand {
	if len(dst) == n {
		dst = dst[:n-1]
	}
	i := len(dst)
	dst = append(dst, c)
	for i > 0 && dst[i-1].key < c.key {
		dst[i] = dst[i-1]
		i--
	}
	dst[i] = c
	return dst
}

// topScores ranks the candidates of rows by float32 add+score and keeps the
// best n, ties to the lower flat index beam*V+token (torch.topk leaves their
// order unspecified). NaN candidates are never kept.
func topScores(dst []cand, rows []table, n int) []cand {
	dst = dst[:0]
	for j, r := range rows {
		add := r.add
		for v, x := range r.scores {
			acc := x + add
			key := float64(acc)
			if len(dst) == n && !(key > dst[n-1].key) || acc != acc {
				continue
			}
			dst = insert(dst, n, cand{key: key, score: acc, beam: int32(j), token: int32(v), node: -1})
		}
	}
	return dst
}

// topSampled draws n candidates without replacement from softmax(add+score)
// over all rows, as torch.multinomial does: the n largest p_i/q_i with q_i ~
// Exp(1), in that order (not re-sorted by score), each q_i made from one
// uniform of the search's Source (logits.Source.ExpFloat64), candidate by
// candidate in flat-index order. Ranking by log p_i - log q_i needs no
// normalisation. Candidates of probability zero come last, in flat-index
// order, and take no draw.
func (s *search) topSampled(dst []cand, rows []table, n int) []cand {
	dst = dst[:0]
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
			if len(dst) == n && !(key > dst[n-1].key) {
				continue
			}
			dst = insert(dst, n, cand{key: key, score: acc, beam: int32(j), token: int32(v), node: -1})
		}
	}
	return dst
}

// topLogProbs ranks the candidates of rows by float64 base+score and keeps
// the best n finite ones, ties to the lower flat index.
func topLogProbs(dst []cand, rows []table, n int) []cand {
	dst = dst[:0]
	for j, r := range rows {
		base := r.base
		for v, x := range r.scores {
			key := base + float64(x)
			if len(dst) == n && !(key > dst[n-1].key) || math.IsInf(key, 0) || key != key {
				continue
			}
			dst = insert(dst, n, cand{key: key, beam: int32(j), token: int32(v), node: -1})
		}
	}
	return dst
}
