// Command serveload is a load generator for llamaserve (or any server of
// OpenAI's completions API): for each number of concurrent clients, every
// client sends its requests one after the other, streamed, and serveload
// reports the throughput (generated tokens per second of wall time, all
// clients together) and the time to first token.
//
//	go run ./internal/cmd/serveload -url http://127.0.0.1:8080 -clients 1,4,16,64
//
// Prompts are token ids (so that their length is exact), different for
// every request after their first -shared tokens (a common system prompt); max_tokens is fixed and ignore_eos-like behaviour comes
// from the model (a random benchmark model rarely produces EOS), so every
// request generates about the same number of tokens. Connections are kept
// alive between a client's requests (one idle connection per client). The
// tokens of a request are its usage chunk's completion_tokens, or its
// chunks with text when the server sends no usage. -tsv prints one line
// per level for scripts (build/sidebyside.sh).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "the server's base URL")
	clients := flag.String("clients", "1,4,16,64", "comma-separated numbers of concurrent clients")
	requests := flag.Int("requests", 2, "requests per client at each level")
	promptLen := flag.Int("prompt-tokens", 64, "prompt length in tokens")
	maxTokens := flag.Int("max-tokens", 32, "max_tokens of every request")
	vocab := flag.Int("vocab", 1000, "prompt token ids are drawn from [10, vocab)")
	shared := flag.Int("shared", 0, "the first N tokens of every prompt are the same (a system prompt), the rest differ")
	tsv := flag.Bool("tsv", false, "print tab-separated lines: clients, requests, tokens, wall s, tok/s, TTFT p50 ms, TTFT p99 ms")
	flag.Parse()
	var levels []int
	for _, f := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "serveload: -clients %q: not a list of positive numbers\n", *clients)
			os.Exit(2)
		}
		levels = append(levels, n)
	}
	if *shared < 0 || *shared > *promptLen {
		fmt.Fprintf(os.Stderr, "serveload: -shared %d: must be in [0, -prompt-tokens]\n", *shared)
		os.Exit(2)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: slices.Max(levels), IdleConnTimeout: time.Minute}}
	if !*tsv {
		fmt.Printf("%d-token prompts (%d shared), max_tokens %d, %d requests per client, streamed, keep-alive\n\n", *promptLen, *shared, *maxTokens, *requests)
		fmt.Println("| clients | requests | tokens | wall s | throughput tok/s | TTFT p50 ms | TTFT p90 ms | TTFT max ms | per-request tok/s |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|")
	}
	for _, c := range levels {
		r, err := level(client, *url, c, *requests, *promptLen, *shared, *maxTokens, *vocab)
		if err != nil {
			fmt.Fprintf(os.Stderr, "serveload: %d clients: %v\n", c, err)
			os.Exit(1)
		}
		if *tsv {
			fmt.Printf("%d\t%d\t%d\t%.3f\t%.2f\t%.1f\t%.1f\n", c, r.requests, r.tokens, r.wall.Seconds(),
				float64(r.tokens)/r.wall.Seconds(), ms(pct(r.ttft, 0.5)), ms(pct(r.ttft, 0.99)))
			continue
		}
		fmt.Printf("| %d | %d | %d | %.2f | %.1f | %.0f | %.0f | %.0f | %.1f |\n", c, r.requests, r.tokens, r.wall.Seconds(),
			float64(r.tokens)/r.wall.Seconds(), ms(pct(r.ttft, 0.5)), ms(pct(r.ttft, 0.9)), ms(pct(r.ttft, 1)), r.perRequest)
	}
}

type result struct {
	requests, tokens int
	wall             time.Duration
	ttft             []time.Duration
	perRequest       float64 // mean of each request's tokens / its time after the first token
}

// level runs c clients of n requests each.
func level(client *http.Client, url string, c, n, promptLen, shared, maxTokens, vocab int) (result, error) {
	var mu sync.Mutex
	var res result
	var firstErr error
	var rates []float64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), uint64(i)))
			for range n {
				prompt := make([]int, promptLen)
				common := rand.New(rand.NewPCG(0, 0))
				for k := range prompt {
					if k < shared {
						prompt[k] = 10 + common.IntN(vocab-10)
					} else {
						prompt[k] = 10 + rng.IntN(vocab-10)
					}
				}
				ttft, total, tokens, err := request(client, url, prompt, maxTokens)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				res.requests++
				res.tokens += tokens
				res.ttft = append(res.ttft, ttft)
				if tokens > 1 && total > ttft {
					rates = append(rates, float64(tokens-1)/(total-ttft).Seconds())
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.wall = time.Since(start)
	for _, r := range rates {
		res.perRequest += r / float64(len(rates))
	}
	return res, firstErr
}

// request sends one streamed completion and returns the time to its first
// token, its total time and its number of tokens (from the usage chunk, or
// its chunks with text when there is none).
func request(client *http.Client, url string, prompt []int, maxTokens int) (ttft, total time.Duration, tokens int, err error) {
	body, _ := json.Marshal(map[string]any{
		"model": "bench", "prompt": prompt, "max_tokens": maxTokens, "temperature": 0,
		"stream": true, "stream_options": map[string]bool{"include_usage": true},
	})
	req, err := http.NewRequest(http.MethodPost, url+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return 0, 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	// A server may close an idle keep-alive connection as the request goes
	// out on it (llama-server's cpp-httplib does after a few requests): the
	// key makes net/http resend the request on a new connection.
	req.Header.Set("Idempotency-Key", strconv.Itoa(rand.Int()))
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, 0, fmt.Errorf("status %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	chunks := 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return 0, 0, 0, err
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Text != "" {
			if ttft == 0 {
				ttft = time.Since(start)
			}
			chunks++
		}
		if chunk.Usage != nil {
			tokens = chunk.Usage.CompletionTokens
		}
	}
	if tokens == 0 {
		tokens = chunks
	}
	// Read to the end, so that the connection is reused.
	io.Copy(io.Discard, resp.Body)
	return ttft, time.Since(start), tokens, sc.Err()
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
