package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/internal/clicommon"
	"github.com/llamaloop/llamaloop/prefixcache"
)

// chatCells is the default cache size of a conversation, when the model
// was trained on at least that many positions.
const chatCells = 4096

// chat reads user turns from stdin, one per line, and answers each with
// the model's chat template applied to the whole conversation. On a
// terminal it prompts with "> " on stderr. Ctrl-C during an answer ends
// the answer; Ctrl-C while waiting for a turn, or the end of stdin, ends
// the conversation.
func (s *session) chat() error {
	if s.cfg.NumBeams > 1 {
		return cli.Usagef("--chat without a prompt does not combine with --num-beams")
	}
	cells := s.o.ctx
	if cells == 0 {
		cells = min(chatCells, max(s.model.Info().CtxTrain, 256))
	}
	pc, lb, err := s.chatBackend(cells)
	if err != nil {
		return err
	}
	defer closeBackend(lb)
	// A draft model (--assistant-model) or prompt lookup speculates in
	// every turn as in a one-shot run.
	gen, closeDraft, err := s.generator(context.Background(), pc, pc.Slots(), cells)
	if err != nil {
		return err
	}
	defer closeDraft()
	cs, saved, err := s.openChatSession(pc, lb)
	if err != nil {
		return err
	}

	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(s.stdin)
		sc.Buffer(make([]byte, 64*1024), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		readErr <- sc.Err()
		close(lines)
	}()

	var msgs []backend.Message
	turn := 0
	switch {
	case saved != nil:
		msgs, turn = saved.Messages, saved.Turns
		if s.o.seed < 0 {
			s.seed = saved.Seed
		}
		if !s.o.quiet {
			fmt.Fprintf(s.stderr, "llamagen: session %s: resuming after turn %d\n", cs.path, turn)
		}
	case s.o.system != "":
		msgs = append(msgs, backend.Message{Role: "system", Content: s.o.system})
	}
	for {
		if s.stdinTerminal {
			fmt.Fprint(s.stderr, "> ")
		}
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				if s.stdinTerminal {
					fmt.Fprintln(s.stderr)
				}
				return <-readErr
			}
			line = l
		case <-s.interrupts:
			fmt.Fprintln(s.stderr)
			return context.Canceled
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		if len(msgs)+2 > clicommon.MaxChatMessages {
			return fmt.Errorf("the conversation holds %d messages: at most %d (start another)", len(msgs), clicommon.MaxChatMessages)
		}
		msgs = append(msgs, backend.Message{Role: "user", Content: line})
		reply, seq, err := s.chatTurn(gen, pc, msgs, turn)
		if err != nil {
			return err
		}
		msgs = append(msgs, backend.Message{Role: "assistant", Content: reply})
		turn++
		if cs != nil {
			if err := cs.save(savedChat{Messages: msgs, Turns: turn, Seed: s.seed}, seq); err != nil {
				s.warn(err.Error())
			}
		}
	}
}

// chatTurn generates the answer to the conversation msgs and returns its
// text, without the stop string that ended it, and the tokens its backend
// slot held at the end (the prompt and every reply token but the last).
func (s *session) chatTurn(gen *generation.Generator, pc *prefixcache.Cache, msgs []backend.Message, turn int) (string, []int32, error) {
	req := generation.Request{Messages: msgs, ParseSpecial: s.o.parseSpecial}
	toks, err := s.tokenize(&req)
	if err != nil {
		return "", nil, err
	}
	cfg := s.cfg
	req = generation.Request{Prompt: toks, Config: cfg, Seed: s.seed + uint64(turn), StopStrings: cfg.StopStrings,
		Logprobs: s.o.logprobs > 0, TopLogprobs: s.o.logprobs, Processors: s.procs, TrimLeadingSpace: s.o.trimLeadingSpace}
	if s.o.mirostat != 0 {
		req.Mirostat = s.o.mirostatConfig()
	}
	r := &row{index: turn, promptIndex: turn, sequences: 1, prompt: prompt{Messages: msgs[len(msgs)-1:]}, promptTokens: len(toks)}
	ctx, stopWatching := s.untilInterrupt()
	p := s.newPrinter(false)
	saved := pc.Stats().TokensSaved
	st, err := s.stream(ctx, gen, []generation.Request{req}, []*row{r}, 1, p)
	stopWatching()
	st.cachedTokens = int(pc.Stats().TokensSaved - saved)
	interrupted := ctx.Err() != nil
	p.close()
	if err == nil {
		s.contextFullNotice([]*row{r}, pc.Room(0))
	}
	note := ""
	if s.speculating() {
		note = speculationNote(st.spec)
	}
	if interrupted {
		note = "interrupted"
	}
	s.summary(st, note)
	if err != nil && !(interrupted && errors.Is(err, context.Canceled)) {
		return "", nil, err
	}
	reply := string(r.text)
	if r.stopString != "" {
		if i := strings.Index(reply, r.stopString); i >= 0 {
			reply = reply[:i]
		}
	}
	var seq []int32
	if len(r.tokens) > 0 {
		seq = append(toks, r.tokens[:len(r.tokens)-1]...)
	}
	return reply, seq, nil
}
