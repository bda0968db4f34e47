//go:build cgo

package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/testkit/llamatest"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedBackend lets the test hold the engine between tokens: while held,
// each Eval waits for a permit (or its context), so that the test decides
// when the next token comes.
type gatedBackend struct {
	backend.Backend
	gate atomic.Pointer[chan struct{}]
}

func (g *gatedBackend) Eval(ctx context.Context, feeds []backend.Feed) error {
	if p := g.gate.Load(); p != nil {
		select {
		case <-*p:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Backend.Eval(ctx, feeds)
}

// hold makes every Eval wait for a permit sent on the channel returned.
func (g *gatedBackend) hold() chan struct{} {
	c := make(chan struct{})
	g.gate.Store(&c)
	return c
}

// release lets every Eval run.
func (g *gatedBackend) release() {
	if p := g.gate.Swap(nil); p != nil {
		close(*p)
	}
}

// chromiumPath is the browser the page test drives; the test skips
// without one.
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium to drive: install Debian's chromium (apt-get install -y chromium) to run the chat page's browser test")
	return ""
}

// browserEvents are what the page did that the test checks at the end.
type browserEvents struct {
	mu         sync.Mutex
	urls       []string
	exceptions []string
	violations []string
}

func (b *browserEvents) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		b.urls = append(b.urls, ev.Request.URL)
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		if d.Exception != nil {
			b.exceptions = append(b.exceptions, d.Text+": "+d.Exception.Description)
		} else {
			b.exceptions = append(b.exceptions, d.Text)
		}
	case *cdplog.EventEntryAdded:
		if strings.Contains(ev.Entry.Text, "Content Security Policy") {
			b.violations = append(b.violations, ev.Entry.Text)
		}
	}
}

// The chat page in a real headless Chromium, on the demo model, with an
// API key: the key prompt, a reply streamed token by token (the engine held
// between tokens, so the test sees each intermediate state), stop (the
// sequence freed), regenerate (equal to the API's own greedy reply),
// token probabilities on hover, the conversation after a reload, a JSON
// Schema whose output is markup (shown as text, no script run), a phone's
// viewport, and no request to any other origin.
func TestChatPageInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	const apiKey = "page-test-key"

	path, err := demoPath()
	require.NoError(t, err)
	m, err := llamacpp.LoadModel(path, llamatest.ModelParams(t, llamacpp.ModelParams{}))
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	c, err := m.NewContext(llamacpp.ContextParams{ContextSize: 512, Sequences: 1, Threads: 1})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	lb, err := llamabackend.New(c)
	require.NoError(t, err)
	t.Cleanup(func() { lb.Close() })
	gb := &gatedBackend{Backend: lb}
	t.Cleanup(gb.release)
	tok := llamabackend.Tokenizer{Vocab: m.Vocab()}
	e, err := generation.NewEngine(gb, tok, generation.EngineOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { e.Close() })
	srv := New(Config{Engine: e, Tokenizer: tok, ModelID: "demo", SequenceSize: lb.Room(0), APIKey: apiKey})

	// ended receives a chat request's end: while the engine is held,
	// only a client that left ends one.
	ended := make(chan struct{}, 8)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.ServeHTTP(w, r)
		if r.URL.Path == "/v1/chat/completions" {
			select {
			case ended <- struct{}{}:
			default:
			}
		}
	}))
	t.Cleanup(ts.Close)

	events := &browserEvents{}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.WindowSize(1100, 760))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses root's sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithListener(events.listen))
	defer cancelTab()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, steps...))
	}
	// until waits for a JavaScript condition on the page, re-checked at
	// every DOM change and animation frame.
	until := func(cond string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(time.Minute)))
		require.NoError(t, err, "waiting for %s", cond)
	}
	eval := func(expr string, out any) {
		t.Helper()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
		require.NoError(t, err, expr)
		require.NoError(t, json.Unmarshal(raw, out), "%s: %s", expr, raw)
	}
	permit := func(gate chan struct{}) {
		t.Helper()
		select {
		case gate <- struct{}{}:
		case <-ctx.Done():
			t.Fatal("the engine never asked for the next evaluation")
		}
	}
	const lastReply = `document.querySelector('#log .msg.assistant:last-of-type')`
	const tokens = lastReply + `.querySelectorAll('.body .tok').length`
	settings := func(fields map[string]any) {
		t.Helper()
		data, err := json.Marshal(fields)
		require.NoError(t, err)
		do(chromedp.Click(chromedp.CSS("#open-settings")))
		until(`document.querySelector('#settings').open`)
		do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const f = document.querySelector('#settings-form');
			for (const [k, v] of Object.entries(%s)) {
				if (typeof v === 'boolean') f.elements[k].checked = v; else f.elements[k].value = v;
			}
		})()`, data)),
			chromedp.Click(chromedp.CSS(`#settings button[value=save]`)))
		until(`!document.querySelector('#settings').open`)
	}

	// The page loads without the key, then asks for it.
	do(chromedp.Navigate(ts.URL + "/"))
	until(`document.querySelector('#ask').open`)
	var title string
	eval(`document.querySelector('#ask-title').textContent`, &title)
	assert.Equal(t, "API key", title)
	do(chromedp.SendKeys(chromedp.CSS("#ask-input"), apiKey), chromedp.Click(chromedp.CSS(`#ask button[value=ok]`)))
	until(`document.querySelector('#model').textContent === 'demo · 512 tokens'`)

	// The settings show the server's defaults where a field is left empty.
	do(chromedp.Click(chromedp.CSS("#open-settings")))
	until(`document.querySelector('#settings').open`)
	var placeholders map[string]string
	eval(`Object.fromEntries([...document.querySelector('#settings-form').elements].filter((e) => e.placeholder).map((e) => [e.name, e.placeholder]))`, &placeholders)
	assert.Equal(t, map[string]string{"temperature": "1", "top_p": "1", "top_k": "0", "typical_p": "1", "repetition_penalty": "1",
		"presence_penalty": "0", "frequency_penalty": "0", "max_tokens": "512", "mirostat_tau": "5", "mirostat_eta": "0.1", "top_logprobs": "5"}, placeholders)
	do(chromedp.KeyEvent(kb.Escape))
	until(`!document.querySelector('#settings').open`)

	// Greedy, 40 tokens at most, the replies as tokens coloured by probability.
	settings(map[string]any{"temperature": "0", "max_tokens": "40", "markdown": false})

	// A reply streamed token by token: the engine evaluates the prompt and
	// each token only when the test lets it.
	gate := gb.hold()
	do(chromedp.SendKeys(chromedp.CSS("#input"), "Hello"), chromedp.KeyEvent("\r"))
	permit(gate) // the prompt: its logits give the first token
	until(tokens + ` === 1`)
	// Where the controls are: streaming must not move them.
	const layout = `(() => { const r = (s) => { const b = document.querySelector(s).getBoundingClientRect(); return [b.x, b.y, b.width, b.height]; };
		const b = document.querySelector('#send').hidden ? '#stop' : '#send';
		return {button: r(b), composer: r('#composer'), stop: !document.querySelector('#stop').hidden}; })()`
	type controls struct {
		Button, Composer []float64
		Stop             bool
	}
	var atFirst, atSecond controls
	eval(layout, &atFirst)
	assert.True(t, atFirst.Stop, "the stop button replaces send while the reply streams")
	permit(gate)
	until(tokens + ` === 2`)
	eval(layout, &atSecond)
	assert.Equal(t, atFirst, atSecond, "the controls stay put while tokens arrive")
	var meta string
	eval(lastReply+`.querySelector('.meta').textContent`, &meta)
	assert.Equal(t, "…", meta, "the reply is still running")

	// Stop: the browser ends the request, the server lets the sequence go.
	before := e.Stats()
	do(chromedp.Click(chromedp.CSS("#stop")))
	until(lastReply + `.querySelector('.meta').textContent.startsWith('finish: stopped')`)
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Fatal("the server never saw the stopped request's client leave")
	}
	gb.release()
	require.Eventually(t, func() bool {
		st := e.Stats()
		return st.Active == 0 && st.Waiting == 0 && st.Finished == st.Submitted && srv.inFlight.Load() == 0
	}, time.Minute, 10*time.Millisecond, "the stopped sequence is freed")
	st := e.Stats()
	assert.Less(t, st.GeneratedTokens-before.GeneratedTokens, uint64(40), "the stopped reply did not run to max_tokens")
	eval(tokens, new(int))

	// Regenerate: the one sequence is free again, and the reply is the
	// API's own greedy reply, token by token with its probabilities.
	do(chromedp.Click(chromedp.CSS(".regenerate")))
	until(lastReply + `.querySelector('.meta').textContent.startsWith('finish: ') && !document.querySelector('#send').hidden`)
	var after controls
	eval(layout, &after)
	assert.Equal(t, atFirst.Button, after.Button, "send comes back where stop was")
	assert.Equal(t, atFirst.Composer, after.Composer)
	eval(lastReply+`.querySelector('.meta').textContent`, &meta)
	assert.Regexp(t, `^finish: (stop|length) · \d+ tokens · .*first token \d+ ms$`, meta)
	want := apiChat(t, ts.URL, apiKey, `{"messages":[{"role":"user","content":"Hello"}],"temperature":0,"max_tokens":40,"logprobs":true,"top_logprobs":5}`)
	var text string
	eval(lastReply+`.querySelector('.body').textContent`, &text)
	assert.Equal(t, want.Choices[0].Message.Content, text)
	var stored []struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
			Tokens  []struct {
				T   string   `json:"t"`
				LP  float64  `json:"lp"`
				Top [][2]any `json:"top"`
			} `json:"tokens"`
		} `json:"messages"`
	}
	eval(`JSON.parse(localStorage.getItem('llamaserve.conversations'))`, &stored)
	require.Len(t, stored, 1)
	require.Len(t, stored[0].Messages, 2)
	got := stored[0].Messages[1]
	wantTokens := want.Choices[0].Logprobs.Content
	require.Len(t, got.Tokens, len(wantTokens))
	for i, w := range wantTokens {
		assert.Equal(t, w.Token, got.Tokens[i].T)
		assert.InDelta(t, w.Logprob, got.Tokens[i].LP, 1e-6)
		assert.Len(t, got.Tokens[i].Top, len(w.TopLogprobs))
	}

	// Each token is coloured by its probability, with its alternatives in
	// its title and, on hover, in a table.
	var classes []string
	eval(`[...`+lastReply+`.querySelectorAll('.tok')].map((s) => s.className)`, &classes)
	for _, cl := range classes {
		assert.Regexp(t, `^tok p[0-4]$`, cl)
	}
	var hover struct{ X, Y float64 }
	eval(`(() => { const r = `+lastReply+`.querySelectorAll('.tok')[1].getBoundingClientRect(); return {x: r.x + r.width / 2, y: r.y + r.height / 2}; })()`, &hover)
	do(chromedp.MouseEvent(chromedp.MouseMoved, hover.X, hover.Y))
	until(`!document.querySelector('#tokinfo').hidden`)
	var rows []string
	eval(`[...document.querySelectorAll('#tokinfo tr')].map((r) => r.textContent)`, &rows)
	second := wantTokens[1]
	require.NotEmpty(t, rows)
	assert.True(t, strings.HasPrefix(rows[0], jsQuote(second.Token)), "the chosen token first: %q", rows[0])
	alternatives := 0 // the top ones but the chosen token
	for _, a := range second.TopLogprobs {
		if a.Token != second.Token {
			alternatives++
		}
	}
	assert.Len(t, rows, 1+alternatives)
	var tip string
	eval(lastReply+`.querySelectorAll('.tok')[1].title`, &tip)
	assert.Contains(t, tip, " — top: ")
	shot(t, ctx, "chat-page.png")
	do(chromedp.MouseEvent(chromedp.MouseMoved, 1, 1))
	until(`document.querySelector('#tokinfo').hidden`)

	// With the keyboard: a reply's tokens are one tab stop, the arrows walk them.
	do(chromedp.Focus(chromedp.CSS("#log .msg.assistant .body.tokens")), chromedp.KeyEvent(kb.ArrowRight))
	until(`!document.querySelector('#tokinfo').hidden && ` + lastReply + `.querySelectorAll('.tok')[1].classList.contains('sel')`)
	eval(`document.querySelector('#tokinfo tr').textContent`, &title)
	assert.Equal(t, rows[0], title)
	do(chromedp.KeyEvent(kb.Escape))
	until(`document.querySelector('#tokinfo').hidden`)

	// The conversation is kept in the browser.
	do(chromedp.Reload())
	until(`document.querySelectorAll('#log .msg').length === 2 && document.querySelectorAll('#convs li').length === 1`)
	var again string
	var convsAfterEdit []string
	eval(lastReply+`.querySelector('.body').textContent`, &again)
	assert.Equal(t, text, again)

	// Edit takes the last message back into the box, and its reply away.
	do(chromedp.Click(chromedp.CSS(".edit")))
	until(`document.querySelectorAll('#log .msg').length === 0`)
	var box string
	eval(`document.querySelector('#input').value`, &box)
	assert.Equal(t, "Hello", box)
	do(chromedp.KeyEvent(" again"), chromedp.KeyEvent("\r"))
	until(`document.querySelectorAll('#log .msg').length === 2 && ` + lastReply + `.querySelector('.meta').textContent.startsWith('finish: ')`)
	eval(`JSON.parse(localStorage.getItem('llamaserve.conversations'))[0].messages.map((m) => m.role + (m.role === 'user' ? ': ' + m.content : ''))`, &convsAfterEdit)
	assert.Equal(t, []string{"user: Hello again", "assistant"}, convsAfterEdit)

	// A JSON Schema whose only value is markup: the reply is that JSON,
	// shown as text, and nothing it holds runs.
	const markup = `<img src=x onerror=document.title=1><script>document.title=2</script>`
	schema, err := json.Marshal(map[string]any{"type": "string", "enum": []string{markup}})
	require.NoError(t, err)
	settings(map[string]any{"format": "json_schema", "schema": string(schema), "markdown": true, "max_tokens": "200"})
	do(chromedp.Click(chromedp.CSS("#new-chat")), chromedp.SendKeys(chromedp.CSS("#input"), "Markup, please"), chromedp.KeyEvent("\r"))
	until(`document.querySelectorAll('#log .msg').length === 2 && ` + lastReply + `.querySelector('.meta').textContent.startsWith('finish: ') && !document.querySelector('#send').hidden`)
	eval(lastReply+`.querySelector('.body').textContent`, &text)
	var reply string
	require.NoError(t, json.Unmarshal([]byte(text), &reply), "the reply %q", text)
	assert.Equal(t, markup, reply)
	var injected struct {
		Title            string
		Imgs, Scripts, P int
	}
	eval(`({title: document.title, imgs: document.querySelectorAll('#log img').length,
		scripts: document.querySelectorAll('#log script').length, p: `+lastReply+`.querySelectorAll('.body p').length})`, &injected)
	var asked []string
	eval(`JSON.parse(localStorage.getItem('llamaserve.conversations')).map((c) => c.messages[0].content)`, &asked)
	assert.Equal(t, []string{"Markup, please", "Hello again"}, asked)
	assert.Equal(t, "llamaserve", injected.Title, "no script of the model's ran")
	assert.Zero(t, injected.Imgs)
	assert.Zero(t, injected.Scripts)
	assert.Equal(t, 1, injected.P, "the reply is one paragraph of text")

	// A phone's window: the conversations fold away, nothing is wider
	// than the screen, and the composer stays reachable.
	do(chromedp.EmulateViewport(390, 844))
	until(`getComputedStyle(document.querySelector('#side')).visibility === 'hidden'`)
	var phone struct{ Overflow, Composer bool }
	eval(`({overflow: document.documentElement.scrollWidth > innerWidth,
		composer: document.querySelector('#input').getBoundingClientRect().bottom <= innerHeight})`, &phone)
	assert.False(t, phone.Overflow, "the page is wider than a phone")
	assert.True(t, phone.Composer, "the message box is on screen")
	shot(t, ctx, "chat-page-phone.png")
	do(chromedp.Click(chromedp.CSS("#toggle-side")))
	until(`getComputedStyle(document.querySelector('#side')).visibility === 'visible'`)
	var convs []string
	eval(`[...document.querySelectorAll('#convs .open')].map((b) => b.textContent)`, &convs)
	assert.Equal(t, []string{"Markup, please", "Hello"}, convs)

	// Rename and delete, each through its dialog.
	do(chromedp.Click(chromedp.CSS("#convs li:nth-child(2) .rename")))
	until(`document.querySelector('#ask').open`)
	do(chromedp.SetValue(chromedp.CSS("#ask-input"), "Greeting"), chromedp.Click(chromedp.CSS(`#ask button[value=ok]`)))
	until(`document.querySelector('#convs li:nth-child(2) .open').textContent === 'Greeting'`)
	do(chromedp.Click(chromedp.CSS("#convs li:nth-child(1) .delete")))
	until(`document.querySelector('#ask').open`)
	do(chromedp.Click(chromedp.CSS(`#ask button[value=ok]`)))
	until(`document.querySelectorAll('#convs li').length === 1`)
	eval(`JSON.parse(localStorage.getItem('llamaserve.conversations')).map((c) => c.title)`, &convs)
	assert.Equal(t, []string{"Greeting"}, convs)
	eval(`document.querySelector('#title').textContent`, &title)
	assert.Equal(t, "Greeting", title, "the remaining conversation is open")

	// Markdown, from a stored conversation: elements for its syntax, text
	// for everything else, links only to http(s).
	const markdown = "# Title\n\nSome **bold**, `<code>` and [a link](https://example.com/x) but [not this](javascript:document.title=3).\n\n" +
		"```html\n<script>document.title=4</script>\n```\n\n- one\n- <b>two</b>\n"
	stored2, err := json.Marshal([]any{map[string]any{"id": "md", "title": "Markdown", "created": "", "messages": []any{
		map[string]any{"role": "user", "content": "Show Markdown"},
		map[string]any{"role": "assistant", "content": markdown, "tokens": []any{}, "meta": map[string]any{"state": "done", "finish": "stop"}},
	}}})
	require.NoError(t, err)
	do(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`localStorage.setItem('llamaserve.conversations', %q); localStorage.setItem('llamaserve.current', '"md"')`, stored2)),
		chromedp.Reload())
	until(`document.querySelector('#title').textContent === 'Markdown' && document.querySelectorAll('#log .msg').length === 2`)
	var md struct {
		H3, Strong, Code, Pre, Copy, Text, Title string
		Links                                    []string
		Items, Bold                              int
	}
	eval(`(() => { const b = `+lastReply+`.querySelector('.body'); const q = (s) => { const e = b.querySelector(s); return e ? e.textContent : ''; };
		return {h3: q('h3'), strong: q('strong'), code: q('p code'), pre: q('pre code'), copy: q('pre button.copy'), text: b.textContent,
			links: [...b.querySelectorAll('a')].map((a) => a.href), items: b.querySelectorAll('ul li').length,
			bold: b.querySelectorAll('b').length, title: document.title}; })()`, &md)
	assert.Equal(t, "Title", md.H3)
	assert.Equal(t, "bold", md.Strong)
	assert.Equal(t, "<code>", md.Code)
	assert.Equal(t, "<script>document.title=4</script>", md.Pre)
	assert.Equal(t, "Copy", md.Copy)
	assert.Equal(t, []string{"https://example.com/x"}, md.Links)
	assert.Contains(t, md.Text, "[not this](javascript:document.title=3)")
	assert.Contains(t, md.Text, "<b>two</b>")
	assert.Equal(t, 2, md.Items)
	assert.Zero(t, md.Bold)
	assert.Equal(t, "llamaserve", md.Title)

	// Export: the open conversation as a JSON file.
	downloads := t.TempDir()
	progress := chromedp.Events(ctx, browser.DownloadProgress)
	do(chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: downloads, EventsEnabled: new(true)})
		return err
	}), chromedp.Click(chromedp.CSS("#toggle-side")))
	until(`getComputedStyle(document.querySelector('#side')).visibility === 'visible'`)
	do(chromedp.Click(chromedp.CSS("#export")))
	var file string
	for ev, err := range progress {
		require.NoError(t, err)
		if ev.State == browser.DownloadProgressStateCompleted {
			file = filepath.Join(downloads, ev.GUID)
			break
		}
		require.NotEqual(t, browser.DownloadProgressStateCanceled, ev.State)
	}
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var exported struct {
		Title    string
		Messages []struct{ Role, Content string }
	}
	require.NoError(t, json.Unmarshal(data, &exported))
	assert.Equal(t, "Markdown", exported.Title)
	require.Len(t, exported.Messages, 2)
	assert.Equal(t, markdown, exported.Messages[1].Content)

	// A GBNF grammar (the grammar field): the reply is its one sentence.
	do(chromedp.EmulateViewport(1280, 900))
	settings(map[string]any{"format": "grammar", "grammar": `root ::= "Grammar says yes."`, "markdown": true, "max_tokens": "50"})
	do(chromedp.Click(chromedp.CSS("#new-chat")), chromedp.SendKeys(chromedp.CSS("#input"), "Any grammar?"), chromedp.KeyEvent("\r"))
	until(`document.querySelectorAll('#log .msg').length === 2 && ` + lastReply + `.querySelector('.meta').textContent.startsWith('finish: ') && !document.querySelector('#send').hidden`)
	eval(lastReply+`.querySelector('.body').textContent`, &text)
	assert.Equal(t, "Grammar says yes.", strings.TrimSpace(text))

	// Offline: every request went to the server itself.
	events.mu.Lock()
	defer events.mu.Unlock()
	require.NotEmpty(t, events.urls)
	for _, u := range events.urls {
		assert.True(t, strings.HasPrefix(u, ts.URL+"/") || strings.HasPrefix(u, "blob:"+ts.URL), "a request to %s", u)
	}
	assert.Empty(t, events.exceptions)
	assert.Empty(t, events.violations)
}

// pageReply is the part of a chat completion the page test compares.
type pageReply struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Logprobs struct {
			Content []struct {
				Token       string  `json:"token"`
				Logprob     float64 `json:"logprob"`
				TopLogprobs []struct {
					Token   string  `json:"token"`
					Logprob float64 `json:"logprob"`
				} `json:"top_logprobs"`
			} `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
}

func apiChat(t *testing.T, url, key, body string) pageReply {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
	var r pageReply
	require.NoError(t, json.Unmarshal(data, &r))
	require.Len(t, r.Choices, 1)
	return r
}

// jsQuote is JSON.stringify of a string, as the page shows a token.
func jsQuote(s string) string {
	b, _ := json.Marshal(s)
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(b))
}

// shot saves a screenshot of the page in the test's folder, and in
// $LLAMASERVE_SCREENSHOTS when set (how docs/ gets the README's).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(t.TempDir(), name), png, 0o644))
	if dir := os.Getenv("LLAMASERVE_SCREENSHOTS"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	}
}
