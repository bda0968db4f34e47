package gguf

import (
	"bytes"
	"testing"
)

// FuzzNewReader feeds arbitrary bytes to the reader: it must return an error
// or a File whose tensor data can be read, and never panic or allocate more
// than the input could describe.
func FuzzNewReader(f *testing.F) {
	f.Add([]byte("GGUF"))
	f.Add([]byte{})
	var buf bytes.Buffer
	w, err := NewWriter(&buf, allTypesMetadata()[:6], []TensorInfo{
		{Name: "a", Type: TensorF32, Shape: []uint64{2}},
		{Name: "b", Type: TensorF16, Shape: []uint64{3, 1}},
	})
	if err != nil {
		f.Fatal(err)
	}
	if err := w.WriteFloat32s([]float32{1, 2, 3, 4, 5}); err != nil {
		f.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	// A string array whose count claims the rest of the file.
	var arr bytes.Buffer
	w, err = NewWriter(&arr, []KV{{Key: "a.str", Value: []string{"<unk>", "", "▁the"}}},
		[]TensorInfo{{Name: "a", Type: TensorF32, Shape: []uint64{64}}})
	if err != nil {
		f.Fatal(err)
	}
	if err := w.WriteFloat32s(make([]float32, 64)); err != nil {
		f.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(withStringCount(f, arr.Bytes(), "a.str"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r *Reader
		var err error
		// The header's Go form takes at most a few times its bytes (a 16-byte
		// string per 8-byte empty string, slices grown by appending), plus
		// the reader's buffer; a count trusted before its elements are read
		// would exceed it.
		if n := allocated(func() { r, err = NewReader(bytes.NewReader(data), int64(len(data))) }); n > 8*uint64(len(data))+1<<20 {
			t.Fatalf("parsing %d bytes allocated %d bytes", len(data), n)
		}
		if err != nil {
			return
		}
		for _, ti := range r.Tensors {
			if _, err := r.TensorBytes(ti.Name); err != nil {
				t.Fatalf("tensor %q listed but unreadable: %v", ti.Name, err)
			}
			vals, err := r.Float64s(ti.Name)
			if err == nil && uint64(len(vals)) != ti.Elements() {
				t.Fatalf("tensor %q: %d values for %d elements", ti.Name, len(vals), ti.Elements())
			}
		}
	})
}
