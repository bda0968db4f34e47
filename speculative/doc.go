// Package speculative is speculative decoding over a backend.Backend, as
// transformers 4.57 runs it in generate(): assisted generation, whose
// candidates come from a smaller draft model (assistant_model,
// num_assistant_tokens, num_assistant_tokens_schedule,
// assistant_confidence_threshold), and prompt lookup decoding, whose
// candidates are copied from the text so far (prompt_lookup_num_tokens,
// max_matching_ngram_size).
//
// # One step
//
// A sequence S has its first len(S)-1 tokens in the target's slot. A
// CandidateGenerator proposes up to k candidate tokens d1..dk; the target
// evaluates [last token of S, d1, ..., dk] in one Eval and returns the logits
// after each of them (backend.AllLogits); the logits processors of the
// request's config run on each position in order, with the history S, d1,
// ..., dj (transformers' loop over candidate_length+1 positions), and the
// acceptance rule keeps a prefix d1..dm and adds one token of the target's
// own. Then the target's slot is truncated (backend.Backend.Truncate) to
// len(S')-1 tokens, and the draft model's slot to the prefix that it shares
// with S': rejected candidates leave no cells behind in either.
//
// # Acceptance
//
//   - Greedy (do_sample false): the target's argmax at each position is
//     compared with the candidate; candidates are kept up to the first
//     mismatch, and the target's argmax there is the step's last token. The
//     tokens are exactly those of plain greedy decoding (generation.Generator).
//   - Sampling with a draft model: transformers' _speculative_sampling
//     (Leviathan et al., algorithm 1). With p and q the softmax of the
//     target's and the draft's processed scores, candidate d is kept when
//     u <= p(d)/q(d) for a uniform u; at the first rejection the token is
//     drawn from max(0, p-q) normalised, and after k acceptances from p. The
//     tokens follow the target's distribution exactly.
//   - Sampling with prompt lookup: the candidates have no draft
//     distribution, and transformers draws the target's own token at each
//     position (torch.multinomial) and keeps candidates while the draws equal
//     them. This is the rule above with q one-hot at the candidate: the draw
//     equals d with probability p(d), and otherwise follows p without d,
//     normalised, which is max(0, p-q) normalised.
//
// Every draw of a request comes from its logits.Source seeded with
// Request.Seed (the draft model's draws from a second Source of the same
// seed), so a request and a seed give the same tokens on every run, but not
// those of generation.Generator for that seed: speculative sampling draws
// other uniforms. Only the distribution is the same.
//
// # Where this package departs from transformers
//
//   - Batches: transformers runs assisted generation for one sequence only;
//     here every request of a batch has its own candidates and acceptance,
//     and the rows share the target's and the draft's evaluations.
//   - Lengths: candidates never reach beyond max_length-1 (transformers'
//     rule for the draft model; its prompt lookup can overshoot).
//   - The draft model runs the request's own processor pipeline with the
//     request's lengths (transformers gives the assistant min_length 0 and
//     per-call min_new_tokens). This changes which candidates are proposed,
//     never the output's distribution or greedy tokens.
//   - assistant_confidence_threshold stops drafting after a token whose
//     draft probability is below it (transformers' ConfidenceCriteria); the
//     threshold is not re-fitted during generation (transformers does that
//     with scikit-learn's ROC curve when scikit-learn is installed).
//   - Prompt lookup does not run the processors on a row of ones to drop
//     forbidden candidates (transformers does, to save a verification
//     step); forbidden candidates are rejected by the verification instead.
//   - A Request has a prompt of tokens, a config and a seed: no text, stop
//     strings, log-probabilities, Mirostat or user processors (package
//     generation has them), and max_time is the caller's context.
//   - Prompt lookup scans the whole sequence at every step, as transformers
//     does: a step costs time proportional to the sequence's length.
//   - num_assistant_tokens_schedule "heuristic" carries the draft length of
//     the last request that finished over to the next call of the same
//     Decoder (transformers keeps it in the assistant's generation config).
package speculative
