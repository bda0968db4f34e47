package testmodel

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math"

	"github.com/llamaloop/llamaloop/internal/gguf"
)

// KeyFingerprint is the metadata key under which every file written here
// records the Fingerprint of its builder; llama.cpp ignores it.
const KeyFingerprint = "llamaloop.fingerprint"

// Model is anything this package can write: a Random spec, a Markov or
// Demo model, a Prefix oracle.
type Model interface {
	// Write writes the model to path, atomically.
	Write(path string) error
	// Fingerprint identifies the exact file Write produces.
	Fingerprint() string
}

// Random is a Spec written with seeded random weights (see WriteRandom).
type Random struct{ Spec Spec }

// Write writes the random model to path.
func (r Random) Write(path string) error { return WriteRandom(path, r.Spec) }

// Fingerprint identifies the file Write produces.
func (r Random) Fingerprint() string { return fingerprint(r.Spec, "random-v1", nil) }

// Fingerprint identifies the file Write produces.
func (m *Markov) Fingerprint() string {
	return fingerprint(m.Spec, "markov-v1", func(h hash.Hash) {
		writeInts(h, m.StateOf)
		for _, row := range m.LogProbs {
			writeFloats(h, row)
		}
		writeFloats(h, []float32{m.NormWeight})
	})
}

// Fingerprint identifies the file Write produces.
func (p *Prefix) Fingerprint() string {
	return fingerprint(p.Spec, "prefix-v1", func(h hash.Hash) {
		writeFloats(h, p.Embd)
		writeFloats(h, p.Out)
		writeFloats(h, p.OutNorm)
		writeFloats(h, []float32{p.HistoryGain})
	})
}

// fingerprint hashes the spec, the vocabulary and the weight source.
func fingerprint(s Spec, source string, weights func(hash.Hash)) string {
	v := s.Vocab
	if v == nil {
		v = &Vocab{}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s|%q|%d %d %d %d %d %d %d|%g %g|%v %v %d|", source, s.Name, s.NEmbd, s.NLayer, s.NHead,
		s.NHeadKV, s.NFF, s.NCtxTrain, len(v.Tokens), s.RopeFreqBase, s.RMSEps, s.WeightType, s.Tied, s.Seed)
	for i, t := range v.Tokens {
		fmt.Fprintf(h, "%q %g %d|", t, v.Scores[i], v.Types[i])
	}
	fmt.Fprintf(h, "%v %v %q|", v.AddBOS, v.AddEOS, v.ChatTemplate)
	if weights != nil {
		weights(h)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writeInts(h hash.Hash, xs []int) {
	var b [8]byte
	for _, x := range xs {
		binary.LittleEndian.PutUint64(b[:], uint64(x))
		h.Write(b[:])
	}
}

func writeFloats(h hash.Hash, xs []float32) {
	b := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	h.Write(b)
}

// UpToDate reports whether path holds a complete GGUF file written from m:
// it parses, all tensor data is present, and its fingerprint matches.
func UpToDate(path string, m Model) bool {
	r, err := gguf.Open(path)
	if err != nil {
		return false
	}
	defer r.Close()
	fp, err := gguf.Get[string](r.File, KeyFingerprint)
	return err == nil && fp == m.Fingerprint()
}

// WriteIfStale writes m to path unless UpToDate(path, m); it reports whether
// it wrote.
func WriteIfStale(path string, m Model) (bool, error) {
	if UpToDate(path, m) {
		return false, nil
	}
	if err := m.Write(path); err != nil {
		return false, err
	}
	return true, nil
}
