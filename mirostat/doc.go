// Package mirostat implements both algorithms of Basu et al., "Mirostat: A
// Neural Text Decoding Algorithm That Directly Controls Perplexity" (ICLR
// 2021), independently of any model. The caller passes one row of logits (or
// weights) and one uniform draw per token; a Sampler returns the token, its
// probability and surprise under the row's original distribution, the
// number of candidates kept, and the updated feedback state.
//
// This package is the sampler itself: its configuration and feedback state
// (Sampler, State, Checkpoint), batches and replays, prepared rows, and a
// generation loop (Generate, Stream). What a study of the sampler needs
// beside it, transforms of a row, comparison samplers with fixed
// truncations, diagnostics and traces, is package mirostat/lab.
//
// # Units
//
// Surprise is -log2 of a probability, in bits, and so are tau (the target),
// mu (the current truncation level) and every diagnostic that returns a
// surprise or an entropy. After each step
//
//	mu := mu - eta*(surprise - tau)
//
// where surprise is that of the chosen token under the original row, before
// truncation and renormalization. Mirostat drives the mean surprise of the
// generated tokens, the log2 of their perplexity, towards tau.
//
// # Candidates
//
// V2 (Algorithm 2) keeps every token whose surprise is at most mu, and always
// the most probable token. V1 (Algorithm 1) fits the Zipf exponent s of the
// row by least squares over the log-ratios of its top M probabilities, then
// keeps the top k with k = (ε·2^mu / (1 - N^-ε))^(1/s), ε = s - 1, N the
// vocabulary size, rounded to the nearest integer, taken at its limit near
// s = 1 and clamped to [1, N].
//
// # Draws
//
// Candidates are ranked by probability, highest first; equal probabilities
// rank by the smaller token id. A draw takes one uniform u in [0, 1) and
// returns the first candidate, in rank order, whose running sum of
// probabilities exceeds u times the candidates' total (the inverse CDF of
// the renormalized candidate set). The caller owns the randomness, so a
// fixed row and draw always give the same token; ParkMiller is a portable
// generator for reproducible examples.
//
// # Rows
//
// A row of logits may mask tokens with -Inf; NaN and +Inf are errors. A row
// of weights is non-negative and normalized by its sum; 0 masks a token. The
// softmax subtracts the largest logit and accumulates in float64. Token ids
// are indices into the row.
//
// # Cost
//
// A step reads the row twice: once for its maximum, once for the
// normalizer (numeric.Term per token, a polynomial within 1e-15 of
// math.Exp, the sum in float64, in internal/numeric's vector loops). When a
// step needs it (V1, and V2 when many tokens are near its threshold), a pass
// of its own files every token, with the same terms,
// in a histogram of probability mass by logit band, a list per band. When
// the candidates are few (V1: k <= M; V2: up to n/32 + 256), the lists give
// them; when they are many, the histogram leads to the band that holds the
// draw. Either way the draw partitions the remaining tokens by rank (a
// quickselect) instead of ranking them, so a step costs O(n) however many
// candidates it keeps, and draws exactly the token that ranking them would.
// Nothing sorts the vocabulary, and a Sampler keeps its scratch buffers
// (about 12 bytes per vocabulary entry, and the candidates), so steady-state
// steps do not allocate. Candidates, Preview, Observe and rows of Weights
// rank the candidates, O(k log k). A PreparedRow caches the softmax and the
// full ranking of a row that is drawn from many times.
//
// # Errors and state
//
// Errors are values: ErrEmptyRow, ErrAllMasked, ErrNonFiniteLogit and
// ErrInvalidProbability (in an *IndexError naming the entry),
// ErrInvalidUniform, ErrInvalidParameter and ErrNumerical. A step that fails
// leaves the sampler unchanged; Replay and SampleBatch document which
// earlier steps stay committed, and their atomic variants restore every
// sampler. A Sampler is not safe for concurrent use; Clone forks it.
package mirostat
