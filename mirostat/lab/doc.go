// Package lab is Mirostat's workbench: what a study of the sampler needs beside it, but a
// program that generates text does not. Package mirostat is the sampler itself (its state,
// batches, replays and generation loop); this package holds
//
//   - transforms of a row of logits before sampling (Mask, Allow, Block, Bias, PenalizeRepetition,
//     PenalizeCounts, WithTemperature);
//   - comparison samplers that truncate a row by a fixed rule (top-k, top-p, min-p, epsilon,
//     typical, temperature) and draw with the same uniform as a Sampler (SampleTopK, ...,
//     DrawPrefix);
//   - diagnostics of a probability row and of a candidate prefix (entropy, surprise, the retained
//     mass, its KL divergence, V1's Zipf fit and k);
//   - traces of a run's steps (summaries, spreads, running and windowed surprise).
//
// # One implementation per rule
//
// Every transform and every truncation is the processor of package logits that implements the
// rule for transformers (RepetitionPenalty, PresenceFrequencyPenalty, LogitBias, AllowTokens,
// BlockTokens, Temperature, TopK, TopP, MinP, Epsilon, Typical), applied
// to a copy of the row, so a rule behaves the same here and in a generation pipeline. That fixes
// their arithmetic and ranges: float32 as in transformers (a temperature or penalty is rounded to
// float32 before it meets a logit), top_p in [0, 1] (0 keeps the top token), epsilon in (0, 1),
// typical_p in (0, 1); ties at a boundary are kept lowest id first. A truncation keeps at least
// one token (min_tokens_to_keep 1).
//
// # The draw
//
// A comparison sampler draws among the tokens its rule keeps exactly as a Sampler draws among its
// candidates: ranked by probability (ties by smaller id), renormalized, and the first token whose
// running sum exceeds u times their mass, with the probabilities from Mirostat's own normalizer (a
// PreparedRow of the truncated row). So a Sampler that keeps every token and SampleTemperature(row,
// 1, u) draw the same token from the same u. The typical sampler draws in that rank order too, not
// in its typical order.
//
// # Units and errors
//
// Units are Mirostat's: surprise, entropy and divergence in bits. Errors wrap package mirostat's
// sentinels (ErrInvalidParameter, ErrEmptyRow, ErrAllMasked, ErrNonFiniteLogit,
// ErrInvalidProbability, ErrInvalidUniform, ErrNumerical) and its *IndexError, so errors.Is and
// errors.As work the same on both packages. A parameter that a logits constructor rejects is an
// ErrInvalidParameter carrying its message.
package lab
