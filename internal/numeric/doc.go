// Package numeric holds the arithmetic that logits, mirostat, beam and generation share, so that
// each routine has one implementation: the exponentials, the softmax normalizer
// (log-sum-exp), the inverse-CDF draw, and the bounded selection of the best n entries of a stream.
//
// # Exponentials
//
// A softmax over a large vocabulary costs one exponential per token, so the house uses its own
// instead of math.Exp. [Exp] is a table exponential within a few ulps of math.Exp: x =
// (1024n + j)·ln2/1024 + r, e^x = 2^n · 2^(j/1024) · e^r, 2^(j/1024) from an 8 KiB table, e^r
// from a short polynomial. [Term], the normalizer's term, has no table: e^d = 2^k · p(r) with k =
// round(d/ln2), r = d - k·ln2 (ln2 in two parts) and p the minimax polynomial of degree 10 for
// e^r on [-ln2/2, ln2/2], its even and odd halves in Horner's form in r², every step a fused
// multiply-add (math.FMA, which rounds once as VFMADD does), 2^k added to p's exponent bits. The
// vector loops compute it operation for operation, 8 terms at a time with AVX-512 (0.42 ns a
// term on this project's AMD EPYC, where the table's AVX2 loop took 0.78, its gather a third)
// and 4 with AVX2 (0.80), so the Go loop, AVX2 and AVX-512 give the same bits; tests run every
// loop the machine has against Term. Term is within 1e-15 relative of math.Exp over [ExpFloor,
// 0] (6.6e-16 measured over 4 million arguments, math.Exp's own error included; the
// polynomial's truncation error is 3.0e-16), where the table term it replaces was within 1e-13.
//
// The change of term changed the normalizer's bits (by about 1e-13 relative), so a draw for a
// given seed differs from the releases before it where its uniform falls within that much of a
// cumulative boundary: about once in 10^12 draws for Mirostat, top-p and sampling from
// log-softmax; the token ranking of greedy and beam search can change only where two log
// probabilities tie within 1e-13. Mirostat's histogram takes the same terms ([Terms]); its bands
// are the rounding of d·1024/ln2 as before.
//
// # Normalizer
//
// [ExpSum] adds Term(x - m) in float64 in a fixed order of lanes and blocks (see [SumBlock])
// that vector instructions and several cores can follow, so that the sum is the same bits on
// every machine; [ExpSumAt] over the list of a row's finite entries gives the same bits, and
// [ExpSumParallel] splits a wide row's blocks over the machine's cores. [LogSumExp] is m + ln of
// that sum.
//
// # Draws
//
// [InverseCDF] maps one uniform to an index of a probability row by its running sum, the draw of
// Mirostat's samplers and of its lab's comparison samplers. [Log] is math.Log made right for
// subnormal arguments.
//
// # Scans
//
// [MaxIndex], [FirstAtLeast], [MaskBelow] and [FirstAboveSum] find the few entries of a row that
// matter (the maximum, the entries past a threshold), 32 scores an iteration with AVX2 on amd64,
// plain loops elsewhere, with the same results to the bit; callers handle the hits in Go. [Shift]
// is log-softmax's last pass, vectorized the same way.
//
// # Selection
//
// [Best] keeps the n best entries of a stream (largest key first, smaller index first among equal
// keys) in a bounded min-heap, without sorting the stream and without allocating once its storage
// has grown: logits' top-k threshold, beam search's candidates, the alternatives of a token's
// log-probability and Mirostat v1's top M all use it.
package numeric
