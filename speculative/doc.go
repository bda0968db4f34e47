// Package speculative holds what is speculative decoding's own, as
// transformers 4.57 runs it in generate(): the candidate generators and the
// acceptance rule. The decoding loop is package generation's: there a
// request speculates with prompt lookup (its config's
// prompt_lookup_num_tokens, max_matching_ngram_size) or with a draft model
// (generation.Options.Draft or EngineOptions.Draft, transformers'
// assistant_model, with num_assistant_tokens, num_assistant_tokens_schedule
// and assistant_confidence_threshold), and every accepted token goes
// through the same per-token step as any other (see generation's
// Speculation).
//
//   - [Lookup] is transformers' PromptLookupCandidateGenerator: the
//     candidates are copied from the text so far. It is a pure function.
//   - [Draft] is transformers' AssistedCandidateGenerator: a smaller model
//     over the same vocabulary drafts the candidates token by token, with
//     the request's processors from a copy of the target's history (user
//     processors and grammars included: the draft proposes, the
//     constrained target verifies). [Proposal] is one sequence's
//     candidates and what the draft keeps of it between steps.
//   - [Accept] is transformers' _speculative_sampling (Leviathan et al.,
//     algorithm 1): with p and q the target's and the draft's
//     probabilities, candidate d is kept when u <= p(d)/q(d), and at the
//     first rejection the token is drawn from max(0, p-q) normalised. The
//     tokens follow the target's distribution exactly.
//
// Every other case verifies by the target's own choice: the request's
// chooser (argmax, a multinomial draw or Mirostat, from the request's
// Source) picks the token at each position, and the candidate is kept when
// it is that token. This is transformers' rule for greedy decoding and for
// prompt lookup sampling (q one-hot at the candidate), and it draws the
// very tokens of the plain loop for the same seed: greedy and sampling
// with prompt lookup (all 40000 seeds of TestSpeculativeSamplingDistribution
// equal), greedy and Mirostat with a draft model. Only sampling with a
// draft model, through Accept, draws other uniforms than the plain loop:
// its distribution is the same, its tokens for a seed are not.
//
// # Where this departs from transformers
//
//   - Batches: transformers runs assisted generation for one sequence only;
//     here every request of a batch has its own candidates and acceptance,
//     and the requests share the target's EvalAll and the draft's Evals.
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
//   - Mirostat, which transformers does not have, verifies by its own
//     draws, as above.
//   - num_assistant_tokens_schedule "heuristic" carries the draft length of
//     the last sequence that finished over to the next sequence of the same
//     Draft (transformers keeps it in the assistant's generation config).
package speculative
