// Package logits turns one row of llama.cpp logits into the scores that the next token is chosen
// from, exactly as transformers 4.57's generate() does, in pure Go.
//
// # Configs and pipelines
//
// A model's generation_config.json is a genconfig.Config (package genconfig reads, updates and
// validates it). [NewPipeline] builds from it the processor list of transformers'
// _get_logits_processor: the same processors, in the same order, under the same conditions, with
// warpers only when sampling, min_tokens_to_keep = len(eos)+1 under beam search, user processors
// before the warpers and LogitNormalization last. [Chain] builds a custom list instead.
//
// # Choosing the token
//
// A chain ends in a [Chooser], the stage that selects the token from the processed scores: [Greedy]
// (torch.argmax) or [Multinomial] (one draw from softmax), the one [Pipeline.Chooser] returns for
// the config. Every draw of llamaloop comes from a [Source], whose documentation derives the
// uniform number once for every path: the decoding loop, beam search's sampling and Mirostat.
//
// # Rows and histories
//
// A row is one sequence's next-token scores: a []float32 as wide as the vocabulary, like a row of
// llama.cpp's logits. A [Processor] rewrites one row in place given that sequence's [History]: its
// prompt plus accepted tokens, and the state of the pipeline's stages for it. Histories are
// independent, so the same pipeline serves greedy search, sampling and beam search (where the
// scores are log-probabilities), and sequences of different prompt lengths. A processor's state for
// one sequence (n-gram tables, seen-token sets, counts) lives in its History and is updated
// incrementally by [History.Accept]; [History.Clone] and [History.CopyFrom] copy it for beam
// search. A [Pipeline] is immutable and safe for concurrent use; a History is not.
//
// # Arithmetic
//
// Everything follows transformers on CPU in float32: config scalars are rounded to float32 before
// they meet the scores, divisions are true divisions, filtered scores are -inf, TopK keeps every
// score tied with the k-th, [Argmax] takes the lowest index (the first NaN, as torch.argmax),
// cumulative sums and softmax sums accumulate in float64. The
// element-wise processors (penalties, biases, masks, temperature, top-k and the forced tokens) are
// bit-exact with transformers; values derived from a softmax ([LogSoftmax], LogitNormalization) agree
// to a few ulp, and the decisions of TopP, MinP, Typical, Epsilon and Eta can differ only for a token
// within rounding of the threshold.
//
// # Speed
//
// [Pipeline.Process] does not allocate in steady state. TopK selects with a bounded heap in one pass
// and never sorts the row; Temperature followed by TopK runs as that one pass and divides only the
// survivors; the warpers after TopK, LogitNormalization and [Pipeline.Sample] then visit only the
// surviving candidates.
//
// # Where this package departs from transformers
//
//   - Ties that torch's sort leaves in unspecified order (the boundary of TopP, MinP's
//     min_tokens_to_keep) are broken lowest index first.
//   - EncoderRepetitionPenalty and EncoderNoRepeatNGram use each row's own encoder input: the
//     encoder's input ids of an encoder-decoder model's row (Pipeline.NewEncoderHistory), the prompt
//     otherwise; transformers' EncoderRepetitionPenalty only touches the first B rows under beam
//     search.
//   - Token ids outside the row in a history are ignored (torch would raise); ids in the config are
//     checked against the vocabulary by genconfig.Config.Validate.
//   - The warpers leave a row that holds NaN or +inf, or is all -inf, unchanged (torch produces NaN or
//     raises later in multinomial).
//   - Classifier-free guidance, watermarking and the Hub-hosted modes (group beam search,
//     constrained beam search, contrastive search, DoLa) are rejected by genconfig.Config.Validate,
//     which NewPipeline calls.
//     prefix_allowed_tokens_fn is a user processor.
//   - The sign of a zero score is not preserved where transformers adds +0.0.
//
// # Beyond transformers
//
// [PresenceFrequencyPenalty], [LogitBias], [AllowTokens] and [BlockTokens] are not in transformers'
// list: add them with Options.User or [Chain]. User processors may keep per-sequence state by
// implementing [StatefulProcessor].
package logits
