// Package numeric holds the arithmetic that logits, mirostat, beam and generation share, so that
// each routine has one implementation: the table exponential, the softmax normalizer
// (log-sum-exp), the inverse-CDF draw, and the bounded selection of the best n entries of a stream.
//
// # Exponentials
//
// A softmax over a large vocabulary costs one exponential per token, so the house uses its own
// instead of math.Exp: x = (1024n + j)·ln2/1024 + r with |r| <= ln2/2048, and
// e^x = 2^n · 2^(j/1024) · e^r, with 2^(j/1024) from an 8 KiB table and e^r from a short
// polynomial. [Exp] is within a few ulps of math.Exp; [ExpTerm], the normalizer's form, spends
// fewer instructions for 1e-13 relative and also returns the reduction's bits, from which mirostat
// files a token in its histogram of logit bands.
//
// # Normalizer
//
// [ExpSum] adds e^(x - m) in float64 with [Term] arithmetic in a fixed order of lanes and blocks
// (see [SumBlock]) that vector instructions and several cores can follow, so that the sum is the
// same bits on every machine; [ExpSumAt] over the list of a row's finite entries gives the same
// bits, and [ExpSumParallel] splits a wide row's blocks over the machine's cores. [LogSumExp] is
// m + ln of that sum.
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
