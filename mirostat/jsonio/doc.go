// Package jsonio is a JSON wire protocol over package mirostat for a host
// written in another language (a WebAssembly embedder, a model server): the
// host keeps each session's configuration and state and sends them with
// every request, so the library holds nothing between calls. It performs
// no model inference and no I/O.
//
// Handle takes any request, chosen by its "op" field, and always answers
// JSON; HandleInit, HandleStep, HandleBatch, HandlePreview and
// HandleWeights take their own request and return Go errors instead.
// Requests are decoded strictly: unknown fields and trailing data are
// errors.
//
// # Schema
//
// Units are those of package mirostat: tau, mu and surprise in bits. Token
// ids index the row from 0. Objects:
//
//	config    {"version": 1|2, "tau": number > 0, "eta": number >= 0,
//	           "mu": number (optional; 0 or absent: 2·tau),
//	           "m": integer (optional; 0 or absent: 100, otherwise >= 2)}
//	state     {"mu": number, "steps": integer >= 0}
//	logits    [number | null, ...]   null masks a token (JSON has no -Infinity);
//	                                 numbers must fit a float32
//	weights   [number >= 0, ...]     0 masks a token
//	step      {"token": int, "prob": number, "surprise": number, "kept": int,
//	           "k": int (V1's k, 0 for V2), "mu_before": number,
//	           "mu": number (after the update), "s": number (V1's Zipf exponent)}
//	preview   {"vocabulary": int, "kept": int, "k": int, "retained_mass": number,
//	           "expected_surprise": number, "mu": number}
//	error     {"code": string, "message": string,
//	           "index": int (optional: the offending row entry),
//	           "session": int (optional: the failing session of a batch)}
//
// Operations (request → response):
//
//	init     {"op": "init", "config": config}
//	         → {"config": config with defaults applied, "state": state}
//	step     {"op": "step", "config": config, "state": state (optional: initial),
//	          "logits": logits, "uniform": number in [0, 1)}
//	         → {"step": step, "state": state after the step}
//	weights  as step, with "weights": weights instead of "logits"
//	batch    {"op": "batch", "sessions": [step request without "op", ...]}
//	         → {"results": [{"step": step, "state": state}, ...]}
//	         all or nothing: if a session fails, the answer is its error
//	preview  {"op": "preview", "config": config, "state": state (optional),
//	          "logits": logits or "weights": weights (exactly one),
//	          "candidates": bool (optional)}
//	         → {"preview": preview, "candidates": {"tokens": [int],
//	            "original": [number], "renormalized": [number]} (if asked)}
//
// Any failure answers {"error": error}. Codes: bad_request (not JSON, wrong
// types, unknown fields or op), empty_row, all_masked, non_finite_logit,
// invalid_uniform, invalid_probability (a negative weight, with its index),
// invalid_parameter (configuration or state), numerical_failure.
//
// A session is continued by sending back the "state" of the previous
// answer; the result is exactly that of one mirostat.Sampler stepping
// through the same rows and draws.
package jsonio
