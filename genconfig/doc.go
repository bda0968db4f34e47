// Package genconfig reads, updates and validates a model's generation_config.json as transformers
// 4.57 does: a [Config] holds every decoding field of transformers' GenerationConfig with its 4.57
// default (note top_k = 50).
//
// Read a file with [Load] (or bytes with [Parse]), apply the caller's settings with
// [Config.Update] (transformers' GenerationConfig.update), and check the result with
// [Config.Validate], which returns transformers' errors as errors and its warnings as strings.
// [Config.Resolve], [Config.CheckLengths] and [Config.PipelineMaxNewTokens] apply generate()'s
// length rules for a prompt. Package logits turns a valid config into processors
// (logits.NewPipeline); package generation and package beam decode with it.
//
// # Optional fields
//
// A field that transformers sets to None by default is a pointer here, nil when unset. Go 1.26's
// new(expr) sets one in place, with no variable: cfg.MaxNewTokens = new(32), cfg.MinP =
// new(0.05), cfg.PadTokenID = new(int32(2)). [Config.Update] sets them from JSON
// (`{"max_new_tokens": 32}`), as a generation_config.json does.
//
// # Errors that name their field
//
// Every value that transformers rejects, and every field of the wrong JSON type, is a
// [*FieldError]: the field's Go name (Temperature), its JSON name (temperature), the value and the
// reason. Validate joins them with errors.Join; errors.As finds the first and [FieldErrors] lists
// them all, so that a command line can name the flag, or the file, that set each one.
//
// # Where this package departs from transformers
//
//   - Validate reports at once what transformers raises only when generate() builds a processor (a
//     temperature of 0 with sampling, an integer temperature or penalty in the JSON, "2" rather than
//     "2.0", which its processors reject), and checks token ids against the vocabulary when it is
//     given.
//   - Fields this package does not know are kept in Extra as they were read; the settings that select
//     a mode we do not run (classifier-free guidance, watermarking, group beam search, contrastive
//     search, constraints, DoLa) are errors.
package genconfig
