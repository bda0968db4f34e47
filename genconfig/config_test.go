package genconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

func TestDefault(t *testing.T) {
	c := Default()
	assert.Equal(t, 20, c.MaxLength)
	assert.Equal(t, 50, c.TopK, "transformers' default top_k is 50")
	assert.Equal(t, 1, c.NumBeams)
	assert.Equal(t, 1.0, c.Temperature)
	assert.Equal(t, 1.0, c.TopP)
	assert.Equal(t, 1.0, c.TypicalP)
	assert.Equal(t, 1.0, c.RepetitionPenalty)
	assert.Equal(t, 1.0, c.LengthPenalty)
	assert.Nil(t, c.MinP)
	assert.Nil(t, c.EOSTokenID)
	assert.False(t, c.DoSample)
	w, err := c.Validate(0)
	assert.NoError(t, err)
	assert.Empty(t, w)
}

func TestLoad(t *testing.T) {
	c, err := Load("testdata/generation_config.json")
	require.NoError(t, err)
	assert.True(t, c.DoSample)
	assert.Equal(t, []int32{128001, 128008, 128009}, c.EOSTokenID)
	assert.Equal(t, int32(128000), *c.BOSTokenID)
	assert.Equal(t, 0.6, c.Temperature)
	assert.Equal(t, 0.9, c.TopP)
	assert.Equal(t, 50, c.TopK, "absent fields keep the default")
	assert.JSONEq(t, `"4.45.0.dev0"`, string(c.Extra["transformers_version"]), "unknown fields are kept")

	_, err = Load("testdata/missing.json")
	assert.Error(t, err)
}

func TestParse(t *testing.T) {
	c, err := Parse([]byte(`{
		"eos_token_id": 2, "pad_token_id": null, "max_new_tokens": 7, "min_p": 0.1, "top_k": null,
		"early_stopping": "never", "sequence_bias": [[[5, 6], -1.5], [[7], 2.0]],
		"bad_words_ids": [[1], [2, 3]], "forced_eos_token_id": [4, 5],
		"exponential_decay_length_penalty": [3, 1.5], "stop_strings": "###",
		"suppress_tokens": [], "my_field": {"a": 1}}`))
	require.NoError(t, err)
	assert.Equal(t, []int32{2}, c.EOSTokenID, "an int eos becomes a one-element list")
	assert.Nil(t, c.PadTokenID)
	assert.Equal(t, 7, *c.MaxNewTokens)
	assert.Equal(t, 0.1, *c.MinP)
	assert.Equal(t, 0, c.TopK, "top_k null disables it")
	assert.Equal(t, EarlyStoppingNever, c.EarlyStopping)
	require.Len(t, c.SequenceBias, 2)
	assert.Equal(t, []int32{5, 6}, c.SequenceBias[0].Tokens)
	assert.Equal(t, -1.5, c.SequenceBias[0].Bias)
	assert.Equal(t, [][]int32{{1}, {2, 3}}, c.BadWordsIDs)
	assert.Equal(t, []int32{4, 5}, c.ForcedEOSTokenID)
	assert.Equal(t, [2]float64{3, 1.5}, *c.ExponentialDecayLengthPenalty)
	assert.Equal(t, []string{"###"}, c.StopStrings)
	assert.NotNil(t, c.SuppressTokens)
	assert.Empty(t, c.SuppressTokens)
	assert.Contains(t, c.Extra, "my_field")
	pad, ok := c.PadToken()
	assert.True(t, ok)
	assert.Equal(t, int32(2), pad, "pad falls back to eos[0]")
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ json, field string }{
		{`{"top_k": 50.5}`, "top_k"},
		{`{"top_k": "50"}`, "top_k"},
		{`{"temperature": "hot"}`, "temperature"},
		{`{"do_sample": 1}`, "do_sample"},
		{`{"eos_token_id": [1, "x"]}`, "eos_token_id"},
		{`{"eos_token_id": 1.5}`, "eos_token_id"},
		{`{"bad_words_ids": [1, 2]}`, "bad_words_ids"},
		{`{"sequence_bias": {"1": 2.0}}`, "sequence_bias"},
		{`{"sequence_bias": [[[1], 2.0, 3]]}`, "sequence_bias"},
		{`{"early_stopping": "sometimes"}`, "early_stopping"},
		{`{"exponential_decay_length_penalty": [1]}`, "exponential_decay_length_penalty"},
		{`{"max_new_tokens": 1e3}`, "max_new_tokens"},
		{`[1, 2]`, "generation config"},
		{`null`, "generation config"},
		{`{"a": `, "generation config"},
	} {
		_, err := Parse([]byte(tc.json))
		if assert.Error(t, err, tc.json) {
			assert.Contains(t, err.Error(), tc.field, tc.json)
		}
	}
}

func TestEarlyStoppingJSON(t *testing.T) {
	for in, want := range map[string]EarlyStopping{
		"true": EarlyStoppingTrue, "false": EarlyStoppingFalse, `"never"`: EarlyStoppingNever,
		"1": EarlyStoppingFalse, "0": EarlyStoppingFalse, // accepted by validate, behave as False
	} {
		var e EarlyStopping
		require.NoError(t, json.Unmarshal([]byte(in), &e), in)
		assert.Equal(t, want, e, in)
	}
	for _, e := range []EarlyStopping{EarlyStoppingTrue, EarlyStoppingFalse, EarlyStoppingNever} {
		data, err := json.Marshal(e)
		require.NoError(t, err)
		var back EarlyStopping
		require.NoError(t, json.Unmarshal(data, &back))
		assert.Equal(t, e, back)
	}
}

func TestSequenceBiasJSON(t *testing.T) {
	data, err := json.Marshal(SequenceBias{Tokens: []int32{4, 5}, Bias: -2.5})
	require.NoError(t, err)
	assert.JSONEq(t, `[[4, 5], -2.5]`, string(data))
}

func TestUpdateAndClone(t *testing.T) {
	model, err := Parse([]byte(`{"temperature": 0.6, "top_p": 0.9, "eos_token_id": [1, 2]}`))
	require.NoError(t, err)
	call := model.Clone()
	require.NoError(t, call.Update([]byte(`{"temperature": 0.2, "max_new_tokens": 5}`)))
	assert.Equal(t, 0.2, call.Temperature, "the caller wins")
	assert.Equal(t, 0.9, call.TopP, "fields the caller does not name keep the model's value")
	assert.Equal(t, 5, *call.MaxNewTokens)
	assert.Equal(t, 0.6, model.Temperature, "Clone is independent")
	call.EOSTokenID[0] = 99
	assert.Equal(t, int32(1), model.EOSTokenID[0], "Clone copies slices")

	before := call.Clone()
	assert.Error(t, call.Update([]byte(`{"temperature": 0.3, "top_k": "x"}`)))
	assert.Equal(t, before, call, "a failed Update leaves the config unchanged")
}

func TestValidateErrors(t *testing.T) {
	for _, tc := range []struct {
		name, json, want string
		vocab            int
	}{
		{"negative top_p", `{"do_sample": true, "top_p": -0.1}`, "top_p", 0},
		{"temperature 0 with sampling", `{"do_sample": true, "temperature": 0.0}`, "do_sample=false", 0},
		{"negative temperature", `{"do_sample": true, "temperature": -1.0}`, "temperature", 0},
		{"integer temperature", `{"do_sample": true, "temperature": 2}`, "temperature (=2)", 0},
		{"integer repetition penalty", `{"repetition_penalty": 2}`, "repetition_penalty", 0},
		{"zero repetition penalty", `{"repetition_penalty": 0.0}`, "repetition_penalty", 0},
		{"negative top_k", `{"do_sample": true, "top_k": -3}`, "top_k", 0},
		{"min_p above 1", `{"do_sample": true, "min_p": 1.5}`, "min_p", 0},
		{"typical_p 0", `{"do_sample": true, "typical_p": 0.0}`, "typical_p", 0},
		{"bad_words_ids empty", `{"bad_words_ids": []}`, "bad_words_ids", 0},
		{"bad word empty", `{"bad_words_ids": [[]]}`, "bad_words_ids", 0},
		{"bad word negative", `{"bad_words_ids": [[-1]]}`, "bad_words_ids", 0},
		{"bad word outside vocab", `{"bad_words_ids": [[3, 10]]}`, "bad_words_ids", 10},
		{"sequence_bias empty", `{"sequence_bias": []}`, "sequence_bias", 0},
		{"sequence_bias integer bias", `{"sequence_bias": [[[3], 2]]}`, "must be a float", 0},
		{"sequence_bias id 0", `{"sequence_bias": [[[0], 2.0]]}`, "sequence_bias", 0},
		{"sequence_bias outside vocab", `{"sequence_bias": [[[12], 2.0]]}`, "sequence_bias", 10},
		{"forced_bos outside vocab", `{"forced_bos_token_id": 10}`, "forced_bos_token_id", 10},
		{"forced_eos negative", `{"forced_eos_token_id": -1}`, "forced_eos_token_id", 0},
		{"forced_eos outside vocab", `{"forced_eos_token_id": [1, 11]}`, "forced_eos_token_id", 10},
		{"max_new_tokens 0", `{"max_new_tokens": 0}`, "max_new_tokens", 0},
		{"num_return_sequences greedy", `{"num_return_sequences": 2}`, "num_return_sequences", 0},
		{"num_return_sequences > beams", `{"num_beams": 2, "num_return_sequences": 3}`, "num_return_sequences", 0},
		{"decay without eos", `{"exponential_decay_length_penalty": [2, 1.1]}`, "exponential_decay_length_penalty", 0},
		{"group beam search", `{"num_beams": 4, "num_beam_groups": 2}`, "num_beam_groups", 0},
		{"guidance", `{"guidance_scale": 1.5}`, "guidance_scale", 0},
		{"constraints", `{"force_words_ids": [[1]]}`, "force_words_ids", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.json))
			require.NoError(t, err)
			_, err = c.Validate(tc.vocab)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			fes := FieldErrors(err)
			require.NotEmpty(t, fes, "every error of Validate names its field")
			for _, fe := range fes {
				assert.Contains(t, tc.json, `"`+fe.JSON+`"`, "the field named is one the JSON sets")
			}
		})
	}
}

func TestValidateWarnings(t *testing.T) {
	for _, tc := range []struct{ name, json, want string }{
		{"temperature 0 without sampling", `{"temperature": 0.0}`, "temperature"},
		{"top_p without sampling", `{"top_p": 0.5}`, "top_p"},
		{"top_k without sampling", `{"top_k": 10}`, "top_k"},
		{"min_p without sampling", `{"min_p": 0.1}`, "min_p"},
		{"length_penalty without beams", `{"length_penalty": 2.0}`, "length_penalty"},
		{"early_stopping without beams", `{"early_stopping": true}`, "early_stopping"},
		{"negative pad", `{"pad_token_id": -1}`, "pad_token_id"},
		{"suppress outside vocab", `{"suppress_tokens": [3, 99]}`, "suppress_tokens"},
		{"integer temperature without sampling", `{"temperature": 2}`, "temperature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.json))
			require.NoError(t, err)
			w, err := c.Validate(10)
			require.NoError(t, err)
			assert.Contains(t, strings.Join(w, "\n"), tc.want)
		})
	}
}

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name             string
		json             string
		prompt           int
		maxLen, minLen   int
		pipelineMaxNewTk int
	}{
		{"default max_length means 20 new tokens", `{}`, 5, 25, 0, 256},
		{"max_new_tokens wins over max_length", `{"max_length": 100, "max_new_tokens": 7}`, 5, 12, 0, 7},
		{"max_length is a total length", `{"max_length": 448}`, 5, 448, 0, 443},
		{"min_new_tokens rewrites min_length", `{"min_length": 3, "min_new_tokens": 4}`, 5, 25, 9, 256},
		{"min_length is a total length", `{"min_length": 3}`, 5, 25, 3, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.json))
			require.NoError(t, err)
			r := c.Resolve(tc.prompt)
			assert.Equal(t, tc.maxLen, r.MaxLength)
			assert.Equal(t, tc.minLen, r.MinLength)
			assert.Equal(t, r, r.Resolve(tc.prompt), "resolving twice changes nothing")
			assert.Equal(t, tc.pipelineMaxNewTk, c.PipelineMaxNewTokens(tc.prompt))
		})
	}
}

func TestCheckLengths(t *testing.T) {
	c, err := Parse([]byte(`{"max_length": 10, "min_length": 12}`))
	require.NoError(t, err)
	w, err := c.CheckLengths(4)
	require.NoError(t, err)
	assert.Contains(t, strings.Join(w, ""), "min_length")
	_, err = c.CheckLengths(10)
	assert.ErrorContains(t, err, "max_length")
}

func TestValidateNaNFromGo(t *testing.T) {
	for _, set := range []func(c *Config){
		func(c *Config) { c.Temperature = math.NaN() },
		func(c *Config) { c.RepetitionPenalty = math.NaN() },
		func(c *Config) { c.TopP = math.NaN() },
		func(c *Config) { c.MinP = ptr(math.NaN()) },
		func(c *Config) { c.TypicalP = math.NaN() },
	} {
		c := Default()
		c.DoSample = true
		set(c)
		_, err := c.Validate(10)
		assert.Error(t, err)
	}
}

// A rejected value is a *FieldError naming the field in Go and in JSON, with the value and the
// reason, so that a command line can point at the flag that set it.
func TestFieldError(t *testing.T) {
	c, err := Parse([]byte(`{"do_sample": true, "temperature": -1.0, "top_k": -3}`))
	require.NoError(t, err)
	_, err = c.Validate(0)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, &FieldError{Field: "Temperature", JSON: "temperature", Value: -1.0,
		Reason: "has to be a strictly positive float"}, fe)
	assert.Equal(t, "genconfig: temperature (=-1) has to be a strictly positive float", fe.Error())
	all := FieldErrors(err)
	require.Len(t, all, 2)
	assert.Equal(t, "TopK", all[1].Field)
	assert.Equal(t, -3, all[1].Value)

	// A value of the wrong JSON type, found by Parse and Update.
	_, err = Parse([]byte(`{"top_k": "x"}`))
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "TopK", fe.Field)
	assert.Equal(t, "top_k", fe.JSON)
	assert.JSONEq(t, `"x"`, string(fe.Value.(json.RawMessage)))
	assert.Equal(t, `genconfig: top_k (="x") must be an integer`, fe.Error())
	err = Default().Update([]byte(`{"early_stopping": "sometimes"}`))
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "EarlyStopping", fe.Field)
	_, err = Parse([]byte(`{"sequence_bias": [[[1], 2.0], [3]]}`))
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "SequenceBias", fe.Field)

	// Pointer fields show their value, Extra fields their JSON.
	c = Default()
	c.MaxNewTokens = ptr(0)
	c.Extra = map[string]json.RawMessage{"watermarking_config": json.RawMessage(`{"a": 1}`)}
	_, err = c.Validate(0)
	all = FieldErrors(err)
	require.Len(t, all, 2)
	assert.Equal(t, "genconfig: max_new_tokens (=0) must be greater than 0", all[0].Error())
	assert.Equal(t, "Extra", all[1].Field)
	assert.Equal(t, "watermarking_config", all[1].JSON)

	// CheckLengths names the length that leaves no room.
	c = Default()
	c.MaxNewTokens = ptr(4)
	_, err = c.CheckLengths(0)
	require.NoError(t, err)
	c.MaxLength, c.MaxNewTokens = 6, nil
	_, err = c.CheckLengths(6)
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "MaxLength", fe.Field)

	assert.Nil(t, FieldErrors(nil))
	assert.Nil(t, FieldErrors(errors.New("other")))
}

// Every known JSON field maps to a field of Config of that Go name.
func TestFieldNames(t *testing.T) {
	typ := reflect.TypeFor[Config]()
	for name, f := range configFields {
		sf, ok := typ.FieldByName(f.goName)
		require.True(t, ok, "%s: no field %s", name, f.goName)
		assert.True(t, sf.IsExported(), name)
	}
}

// Parse errors say what is wrong in the terms of the JSON document: the range of an integer that is
// too large, a number beyond float64, the JSON type given instead of an object, and where a syntax
// error is, never the Go types encoding/json decodes into.
func TestParseErrorsSayWhatIsWrong(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"max_length": 99999999999}`, "max_length (=99999999999) must be an integer in [-2147483648, 2147483647]"},
		{`{"num_beams": -3000000000}`, "num_beams (=-3000000000) must be an integer in [-2147483648, 2147483647]"},
		{`{"max_new_tokens": 1.5}`, "max_new_tokens (=1.5) must be an integer"},
		{`{"temperature": 1e999}`, "temperature (=1e999) must be a number within ±1.7976931348623157e+308"},
		{`{"max_time": -1e400}`, "max_time (=-1e400) must be a number within ±"},
		{`[1, 2]`, "generation config: want a JSON object, got a JSON array"},
		{`"x"`, "generation config: want a JSON object, got a JSON string"},
		{"{\n  \"a\": nope}", "generation config: invalid JSON at line 2, column 9"},
	} {
		_, err := Parse([]byte(tc.json))
		require.Error(t, err, tc.json)
		assert.Contains(t, err.Error(), tc.want, tc.json)
		assert.NotContains(t, err.Error(), "Go value", tc.json)
	}
}

// Every size field is bounded, whatever sets it: its bound passes, one more
// is a FieldError naming the field, with the bound.
func TestValidateBounds(t *testing.T) {
	for _, tc := range []struct {
		field string
		max   int
	}{
		{"max_new_tokens", MaxTokens}, {"max_length", MaxTokens}, {"min_new_tokens", MaxTokens}, {"min_length", MaxTokens},
		{"num_beams", 256}, {"num_return_sequences", 1 << 16},
		{"no_repeat_ngram_size", MaxTokens}, {"encoder_no_repeat_ngram_size", MaxTokens},
		{"num_assistant_tokens", MaxTokens}, {"prompt_lookup_num_tokens", MaxTokens}, {"max_matching_ngram_size", MaxTokens},
	} {
		bound, ok := Bound(tc.field)
		require.True(t, ok, tc.field)
		assert.Equal(t, tc.max, bound, tc.field)
		for _, v := range []int{tc.max, tc.max + 1} {
			// Beam search and sampling make the counts of sequences valid.
			doc := fmt.Sprintf(`{"do_sample":true,"num_beams":256,%q:%d}`, tc.field, v)
			if tc.field == "num_beams" {
				doc = fmt.Sprintf(`{"num_beams":%d}`, v)
			}
			if tc.field == "num_return_sequences" {
				doc = fmt.Sprintf(`{"do_sample":true,%q:%d}`, tc.field, v)
			}
			c, err := Parse([]byte(doc))
			require.NoError(t, err, doc)
			_, err = c.Validate(0)
			var bad []string
			for _, fe := range FieldErrors(err) {
				if fe.Reason == fmt.Sprintf("must be at most %d", tc.max) {
					bad = append(bad, fe.JSON)
				}
			}
			if v == tc.max {
				assert.Empty(t, bad, doc)
			} else {
				assert.Equal(t, []string{tc.field}, bad, doc)
			}
		}
	}
	_, ok := Bound("temperature")
	assert.False(t, ok)
	// The 55-byte config that ran llamagen out of memory.
	c, err := Parse([]byte(`{"do_sample": true, "num_return_sequences": 999999999}`))
	require.NoError(t, err)
	_, err = c.Validate(0)
	assert.EqualError(t, err, "genconfig: num_return_sequences (=999999999) must be at most 65536")
}
