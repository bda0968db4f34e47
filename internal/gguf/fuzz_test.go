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
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)))
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
