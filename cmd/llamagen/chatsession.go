package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/clicommon"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/llamaloop/llamaloop/prefixcache"
	"github.com/llamaloop/llamaloop/statefile"
)

// chatBackend is the backend of --chat: a context of two sequences sharing
// one unified cache of cells cells, one for the conversation and one for
// the prefix cache, which keeps the conversation's evaluated tokens from
// one turn to the next, so that a turn evaluates only what is new.
func (s *session) chatBackend(cells int) (*prefixcache.Cache, *llamabackend.Backend, error) {
	lb, err := s.newBackend(2, cells, true)
	if err != nil {
		return nil, nil, err
	}
	pc, err := prefixcache.New(lb, prefixcache.Options{CacheSlots: 1})
	if err != nil {
		closeBackend(lb)
		return nil, nil, err
	}
	return pc, lb, nil
}

// savedChat is what --session keeps beside the KV state: the conversation
// and where its seeds are.
type savedChat struct {
	Messages []backend.Message `json:"messages"`
	Turns    int               `json:"turns"`
	Seed     uint64            `json:"seed"`
}

// chatSession is the --session FILE of a chat.
type chatSession struct {
	path string
	fp   [32]byte
	pc   *prefixcache.Cache
	lb   *llamabackend.Backend
}

// openChatSession reads the --session file when it exists and loads its
// state into the prefix cache; it returns nil without --session, and a nil
// savedChat for a file still to be written.
func (s *session) openChatSession(pc *prefixcache.Cache, lb *llamabackend.Backend) (*chatSession, *savedChat, error) {
	if s.o.session == "" {
		return nil, nil, nil
	}
	fp, err := statefile.Fingerprint(s.o.model)
	if err != nil {
		return nil, nil, err
	}
	cs := &chatSession{path: s.o.session, fp: fp, pc: pc, lb: lb}
	f, err := statefile.Read(cs.path, fp)
	if errors.Is(err, fs.ErrNotExist) {
		return cs, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--session: %w", err)
	}
	var saved savedChat
	if err := json.Unmarshal(f.App, &saved); err != nil {
		return nil, nil, fmt.Errorf("--session %s: conversation: %w", cs.path, err)
	}
	if len(saved.Messages) > clicommon.MaxChatMessages {
		return nil, nil, fmt.Errorf("--session %s: %d messages, more than the %d a conversation may hold", cs.path, len(saved.Messages), clicommon.MaxChatMessages)
	}
	if len(f.Tokens) > lb.Room(0) {
		return nil, nil, fmt.Errorf("--session %s: %d tokens do not fit in a cache of %d cells (raise --ctx)", cs.path, len(f.Tokens), lb.Room(0))
	}
	if err := f.Restore(pc, lb); err != nil {
		return nil, nil, fmt.Errorf("--session %s: %w", cs.path, err)
	}
	return cs, &saved, nil
}

// save writes the conversation and the KV state of seq, the tokens the
// cache holds for it, to the session file.
func (cs *chatSession) save(saved savedChat, seq []int32) error {
	if len(seq) == 0 {
		return fmt.Errorf("--session %s: not saved: the turn produced no token", cs.path)
	}
	f, err := statefile.Capture(cs.pc, cs.lb, seq)
	if err != nil {
		return fmt.Errorf("--session %s: not saved: %w", cs.path, err)
	}
	f.Fingerprint = cs.fp
	if f.App, err = json.Marshal(saved); err != nil {
		return err
	}
	if err := statefile.Write(cs.path, f); err != nil {
		return fmt.Errorf("--session %s: not saved: %w", cs.path, err)
	}
	return nil
}
