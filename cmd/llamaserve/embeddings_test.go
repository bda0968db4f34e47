package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/embedding"
	ref64 "github.com/llamaloop/llamaloop/internal/testkit/reference"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/require"
)

// demoEmbedding is the float64 reference of the server's answer for
// tokens: mean-pooled, L2-normalised.
func demoEmbedding(t *testing.T, ref *ref64.Model, tokens []int32) []float64 {
	t.Helper()
	rows, err := ref.Embeddings(tokens)
	require.NoError(t, err)
	v, err := embedding.Pool(rows, embedding.PoolingMean)
	require.NoError(t, err)
	embedding.Normalize(v, embedding.NormL2)
	return v
}

// demoTokens tokenizes text as the server does (BOS, special tokens as
// text), with the model's own vocabulary.
func demoTokens(t *testing.T, text string) []int32 {
	t.Helper()
	m, err := llamacpp.LoadModel(demoModel, llamacpp.ModelParams{VocabOnly: true})
	require.NoError(t, err)
	defer m.Close()
	toks, err := m.Vocab().Tokenize(text, true, false)
	require.NoError(t, err)
	return toks
}

func requireClose(t *testing.T, want []float64, got []float64, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	d := 0.0
	for i := range want {
		d = math.Max(d, math.Abs(got[i]-want[i]))
	}
	// llama.cpp (f32 cache, flash attention off) against the float64
	// reference on unit vectors: measured below 1e-7 on tiny-f32
	require.LessOrEqual(t, d, 1e-5, "%s: largest difference from the reference", what)
}

// /v1/embeddings through the official OpenAI Go SDK: strings, token arrays
// and a list of them, against the float64 reference; usage counts the
// tokens; a generation request still works beside it.
func TestServeEmbeddingsWithOpenAISDK(t *testing.T) {
	s := startServer(t, "--embeddings", "--pooling", "mean", "--batch", "128")
	client := s.client()
	ctx := context.Background()
	ref, err := ref64.Load(demoModel)
	require.NoError(t, err)
	texts := []string{"The cat sat on the mat.", "Embeddings are vectors", "a"}
	var toks [][]int32
	total := 0
	for _, x := range texts {
		toks = append(toks, demoTokens(t, x))
		total += len(toks[len(toks)-1])
	}

	resp, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "demo",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts}})
	require.NoError(t, err)
	require.Equal(t, "list", string(resp.Object))
	require.Equal(t, "demo", resp.Model)
	require.Len(t, resp.Data, len(texts))
	for i, d := range resp.Data {
		require.EqualValues(t, i, d.Index)
		requireClose(t, demoEmbedding(t, ref, toks[i]), d.Embedding, texts[i])
	}
	require.EqualValues(t, total, resp.Usage.PromptTokens)
	require.EqualValues(t, total, resp.Usage.TotalTokens)

	one, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "demo",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(texts[0])}})
	require.NoError(t, err)
	require.Equal(t, resp.Data[0].Embedding, one.Data[0].Embedding, "alone or with others")

	ids := make([]int64, len(toks[1]))
	for i, t := range toks[1] {
		ids[i] = int64(t)
	}
	byTokens, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "demo",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: ids}})
	require.NoError(t, err)
	require.Equal(t, resp.Data[1].Embedding, byTokens.Data[0].Embedding)
	lists, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "demo",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokenArrays: [][]int64{ids, {5, 6, 7}}}})
	require.NoError(t, err)
	require.Len(t, lists.Data, 2)
	requireClose(t, demoEmbedding(t, ref, []int32{5, 6, 7}), lists.Data[1].Embedding, "tokens 5 6 7")
	require.EqualValues(t, len(ids)+3, lists.Usage.PromptTokens)

	// dimensions: the model's own width is no truncation; another is refused
	_, err = client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "demo", Dimensions: openai.Int(int64(len(resp.Data[0].Embedding))),
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	require.NoError(t, err)
	_, err = client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "demo", Dimensions: openai.Int(8),
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	require.Equal(t, "dimensions", apiErr.Param)
	require.Contains(t, apiErr.Message, "cannot be truncated to 8 dimensions")

	// generation goes on beside the embeddings
	c, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "demo", MaxTokens: openai.Int(4), Temperature: openai.Float(0),
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("The cat")}})
	require.NoError(t, err)
	require.Len(t, c.Choices, 1)
}

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	r, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer r.Body.Close()
	data, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, json.Unmarshal(data, &v), "%s", data)
	return r.StatusCode, v
}

func errorMessage(v map[string]any) string {
	e, _ := v["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

// base64 is the little-endian float32 bytes of the float answer; bad input
// gets a 400 naming the field; --matryoshka makes dimensions truncate and
// renormalise.
func TestServeEmbeddingsFormatsAndErrors(t *testing.T) {
	s := startServer(t, "--embeddings", "--pooling", "last", "--batch", "64", "--matryoshka")
	_, f := postJSON(t, s.url+"/v1/embeddings", `{"input":"hello world","model":"demo"}`)
	code, b := postJSON(t, s.url+"/v1/embeddings", `{"input":"hello world","encoding_format":"base64"}`)
	require.Equal(t, http.StatusOK, code)
	floats := f["data"].([]any)[0].(map[string]any)["embedding"].([]any)
	raw, err := base64.StdEncoding.DecodeString(b["data"].([]any)[0].(map[string]any)["embedding"].(string))
	require.NoError(t, err)
	require.Len(t, raw, 4*len(floats))
	for i, x := range floats {
		require.Equal(t, float32(x.(float64)), math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
	}
	ref, err := ref64.Load(demoModel)
	require.NoError(t, err)
	rows, err := ref.Embeddings(demoTokens(t, "hello world"))
	require.NoError(t, err)
	want := append([]float64(nil), rows[len(rows)-1][:16]...)
	embedding.Normalize(want, embedding.NormL2)
	code, cut := postJSON(t, s.url+"/v1/embeddings", `{"input":"hello world","dimensions":16}`)
	require.Equal(t, http.StatusOK, code)
	var got []float64
	for _, x := range cut["data"].([]any)[0].(map[string]any)["embedding"].([]any) {
		got = append(got, x.(float64))
	}
	requireClose(t, want, got, "the first 16 values, renormalised")

	for _, c := range []struct{ body, param, msg string }{
		{`{"model":"demo"}`, "input", "input is required"},
		{`{"input":""}`, "input", "input 0 is an empty string"},
		{`{"input":[]}`, "input", "input is an empty array"},
		{`{"input":[[1,2],[]]}`, "input", "input 1 is empty"},
		{`{"input":[1,100000]}`, "input", "input 0: token 1 is 100000, not a token id"},
		{`{"input":{"a":1}}`, "input", "input must be a string, an array of strings"},
		{`{"input":"x","encoding_format":"int8"}`, "encoding_format", `encoding_format "int8" (want float or base64)`},
		{`{"input":"x","dimensions":0}`, "dimensions", "dimensions 0 outside [1,"},
		{`{"input":"x","truncate":true}`, "truncate", `unknown field "truncate"`},
		{`{"input":[` + strings.Repeat("5,", 64) + `5]}`, "input", "input 0 has 65 tokens; an embedding takes at most 64 (--batch)"},
	} {
		code, v := postJSON(t, s.url+"/v1/embeddings", c.body)
		require.Equal(t, http.StatusBadRequest, code, c.body)
		require.Contains(t, errorMessage(v), c.msg, c.body)
		require.Equal(t, c.param, v["error"].(map[string]any)["param"], c.body)
	}
}

// Without --embeddings the endpoint says how to get it.
func TestServeEmbeddingsNotLoaded(t *testing.T) {
	s := startServer(t)
	code, v := postJSON(t, s.url+"/v1/embeddings", `{"input":"x"}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "this server computes no embeddings: start llamaserve with --embeddings", errorMessage(v))
}
