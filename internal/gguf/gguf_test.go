package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allTypesMetadata has one entry of every scalar and array type.
func allTypesMetadata() []KV {
	return []KV{
		{"general.architecture", "llama"},
		{"t.u8", uint8(200)},
		{"t.i8", int8(-100)},
		{"t.u16", uint16(60000)},
		{"t.i16", int16(-30000)},
		{"t.u32", uint32(4000000000)},
		{"t.i32", int32(-2000000000)},
		{"t.f32", float32(1.5)},
		{"t.bool", true},
		{"t.str", "héllo ▁world"},
		{"t.u64", uint64(1) << 63},
		{"t.i64", int64(-1) << 62},
		{"t.f64", math.Pi},
		{"a.u8", []uint8{1, 2, 255}},
		{"a.i8", []int8{-1, 0, 1}},
		{"a.u16", []uint16{1, 65535}},
		{"a.i16", []int16{-32768, 32767}},
		{"a.u32", []uint32{7}},
		{"a.i32", []int32{-7, 6, 1, 3}},
		{"a.f32", []float32{0.25, -1e-5}},
		{"a.bool", []bool{true, false, true}},
		{"a.str", []string{"<unk>", "", "▁the"}},
		{"a.u64", []uint64{math.MaxUint64}},
		{"a.i64", []int64{math.MinInt64}},
		{"a.f64", []float64{1e300, -0.5}},
		{"a.empty", []int32{}},
	}
}

type testTensor struct {
	info TensorInfo
	raw  []byte
}

func testTensors() []testTensor {
	f32 := []float32{1, -2, 3.5, 0.1, 1e-3, -7}
	var f32raw []byte
	for _, v := range f32 {
		f32raw = binary.LittleEndian.AppendUint32(f32raw, math.Float32bits(v))
	}
	var f16raw []byte
	for _, v := range []float32{0.5, -1, 2, 65504, 1.0 / 3} {
		f16raw = binary.LittleEndian.AppendUint16(f16raw, Float32ToFloat16(v))
	}
	q8 := make([]byte, 2*34)
	for i := range q8 {
		q8[i] = byte(i)
	}
	return []testTensor{
		{TensorInfo{Name: "a.weight", Type: TensorF32, Shape: []uint64{3, 2}}, f32raw},
		{TensorInfo{Name: "b", Type: TensorF16, Shape: []uint64{5}}, f16raw},
		{TensorInfo{Name: "empty", Type: TensorF32, Shape: []uint64{0, 4}}, nil},
		{TensorInfo{Name: "q", Type: TensorQ8_0, Shape: []uint64{32, 1, 2, 1}}, q8},
	}
}

func writeFile(t *testing.T, md []KV, tensors []testTensor) []byte {
	t.Helper()
	infos := make([]TensorInfo, len(tensors))
	for i, tt := range tensors {
		infos[i] = tt.info
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, md, infos)
	require.NoError(t, err)
	for _, tt := range tensors {
		_, err := w.Write(tt.raw)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, align := range []uint32{0, 64, 1} {
		md := allTypesMetadata()
		if align != 0 {
			md = append(md, KV{KeyAlignment, align})
		}
		want := uint64(align)
		if align == 0 {
			want = DefaultAlignment
		}
		data := writeFile(t, md, testTensors())
		r, err := NewReader(bytes.NewReader(data), int64(len(data)))
		require.NoError(t, err)
		assert.Equal(t, uint32(3), r.Version)
		assert.Equal(t, want, r.Alignment)
		assert.Equal(t, md, r.Metadata)
		assert.Zero(t, r.DataOffset%want)

		offset := uint64(0)
		for _, tt := range testTensors() {
			info, ok := r.Tensor(tt.info.Name)
			require.True(t, ok)
			assert.Equal(t, tt.info.Type, info.Type)
			assert.Equal(t, tt.info.Shape, info.Shape)
			assert.Equal(t, offset, info.Offset, tt.info.Name)
			offset += alignUp(uint64(len(tt.raw)), want)
			raw, err := r.TensorBytes(tt.info.Name)
			require.NoError(t, err)
			assert.Equal(t, len(tt.raw), len(raw))
			if len(tt.raw) > 0 {
				assert.Equal(t, tt.raw, raw)
			}
		}
		// The last tensor is padded too, as gguf.cpp writes it.
		assert.Equal(t, r.DataOffset+offset, uint64(len(data)))

		vals, err := r.Float64s("a.weight")
		require.NoError(t, err)
		assert.Equal(t, []float64{1, -2, 3.5, float64(float32(0.1)), float64(float32(1e-3)), -7}, vals)
		vals, err = r.Float64s("b")
		require.NoError(t, err)
		assert.Equal(t, []float64{0.5, -1, 2, 65504, 0.333251953125}, vals)
		_, err = r.Float64s("q")
		assert.ErrorIs(t, err, ErrUnsupportedType)
		_, err = r.Float64s("missing")
		assert.Error(t, err)

		n, err := Get[uint32](r.File, "t.u32")
		require.NoError(t, err)
		assert.Equal(t, uint32(4000000000), n)
		_, err = Get[int32](r.File, "t.u32")
		assert.Error(t, err)
		_, err = Get[string](r.File, "nope")
		assert.Error(t, err)
	}
}

// TestExactBytes checks the encoding against a file laid out by hand from the
// format description.
func TestExactBytes(t *testing.T) {
	var w bytes.Buffer
	gw, err := NewWriter(&w, []KV{{"k", uint32(5)}, {"s", []string{"ab"}}},
		[]TensorInfo{{Name: "x", Type: TensorF32, Shape: []uint64{3}}, {Name: "y", Type: TensorF16, Shape: []uint64{1}}})
	require.NoError(t, err)
	require.NoError(t, gw.WriteFloat32s([]float32{1, 2, -0.5, 1}))
	require.NoError(t, gw.Close())

	want := []byte{
		'G', 'G', 'U', 'F', 3, 0, 0, 0,
		2, 0, 0, 0, 0, 0, 0, 0, // tensors
		2, 0, 0, 0, 0, 0, 0, 0, // kv
		1, 0, 0, 0, 0, 0, 0, 0, 'k', 4, 0, 0, 0, 5, 0, 0, 0,
		1, 0, 0, 0, 0, 0, 0, 0, 's', 9, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 'a', 'b',
		1, 0, 0, 0, 0, 0, 0, 0, 'x', 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
		1, 0, 0, 0, 0, 0, 0, 0, 'y', 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0,
	}
	for len(want)%32 != 0 {
		want = append(want, 0)
	}
	want = append(want, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0, 0xbf) // 1, 2, -0.5 as f32
	want = append(want, make([]byte, 20)...)
	want = append(want, 0x00, 0x3c) // 1 as f16
	want = append(want, make([]byte, 30)...)
	assert.Equal(t, want, w.Bytes())
}

func TestWriteFloat32sCrossesTensors(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, nil, []TensorInfo{
		{Name: "a", Type: TensorF16, Shape: []uint64{3}},
		{Name: "b", Type: TensorF32, Shape: []uint64{2, 2}},
	})
	require.NoError(t, err)
	require.NoError(t, w.WriteFloat32s([]float32{1, 2}))
	require.NoError(t, w.WriteFloat32s([]float32{3, 4, 5, 6}))
	require.NoError(t, w.WriteFloat32s([]float32{7}))
	assert.Error(t, w.WriteFloat32s([]float32{8}))
	require.NoError(t, w.Close())

	r, err := NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	require.NoError(t, err)
	a, err := r.Float64s("a")
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 2, 3}, a)
	b, err := r.Float64s("b")
	require.NoError(t, err)
	assert.Equal(t, []float64{4, 5, 6, 7}, b)
}

func TestWriterErrors(t *testing.T) {
	var buf bytes.Buffer
	f32 := func(name string, shape ...uint64) TensorInfo {
		return TensorInfo{Name: name, Type: TensorF32, Shape: shape}
	}
	cases := map[string]struct {
		md      []KV
		tensors []TensorInfo
	}{
		"empty key":        {md: []KV{{"", uint32(1)}}},
		"duplicate key":    {md: []KV{{"a", uint32(1)}, {"a", uint32(2)}}},
		"bad value":        {md: []KV{{"a", 3}}},
		"nested array":     {md: []KV{{"a", [][]int32{{1}}}}},
		"alignment type":   {md: []KV{{KeyAlignment, uint64(32)}}},
		"alignment pow2":   {md: []KV{{KeyAlignment, uint32(48)}}},
		"empty name":       {tensors: []TensorInfo{f32("", 1)}},
		"long name":        {tensors: []TensorInfo{f32(string(make([]byte, 64)), 1)}},
		"duplicate tensor": {tensors: []TensorInfo{f32("a", 1), f32("a", 2)}},
		"no dims":          {tensors: []TensorInfo{f32("a")}},
		"five dims":        {tensors: []TensorInfo{f32("a", 1, 1, 1, 1, 1)}},
		"block multiple":   {tensors: []TensorInfo{{Name: "q", Type: TensorQ4_0, Shape: []uint64{16}}}},
		"unknown type":     {tensors: []TensorInfo{{Name: "q", Type: 4, Shape: []uint64{16}}}},
		"too many":         {tensors: []TensorInfo{f32("a", 1<<32, 1<<32)}},
	}
	for name, c := range cases {
		_, err := NewWriter(&buf, c.md, c.tensors)
		assert.Error(t, err, name)
	}

	w, err := NewWriter(&buf, nil, []TensorInfo{f32("a", 2), {Name: "q", Type: TensorQ8_0, Shape: []uint64{32}}})
	require.NoError(t, err)
	assert.Error(t, w.Close(), "missing data")
	require.NoError(t, w.WriteFloat32s([]float32{1, 2}))
	assert.Error(t, w.WriteFloat32s([]float32{1}), "floats into a q8_0 tensor")
	_, err = w.Write(make([]byte, 35))
	assert.Error(t, err, "past the end")
}

func TestReaderErrors(t *testing.T) {
	valid := writeFile(t, allTypesMetadata(), testTensors())
	read := func(b []byte) error {
		_, err := NewReader(bytes.NewReader(b), int64(len(b)))
		return err
	}
	require.NoError(t, read(valid))

	// Every prefix that cuts into the tensor data is an error, never a panic;
	// only the padding after the last tensor (68 bytes of q8_0) may be missing.
	for n := 0; n < len(valid); n++ {
		if n >= len(valid)-(96-68) {
			require.NoError(t, read(valid[:n]), "prefix of %d bytes", n)
			continue
		}
		require.Error(t, read(valid[:n]), "prefix of %d bytes", n)
	}

	patch := func(off int, b ...byte) []byte {
		c := bytes.Clone(valid)
		copy(c[off:], b)
		return c
	}
	assert.ErrorContains(t, read(patch(0, 'G', 'G', 'M', 'L')), "not a GGUF file")
	assert.ErrorContains(t, read(patch(4, 1)), "version")
	assert.ErrorContains(t, read(patch(4, 4)), "version")
	assert.ErrorContains(t, read(patch(8, 0xff, 0xff, 0xff, 0xff)), "tensors")
	assert.ErrorContains(t, read(patch(16, 0xff, 0xff, 0xff, 0xff)), "metadata")
	// The first key's type (after 24 header bytes, an 8-byte length and the
	// 20-byte key "general.architecture").
	assert.ErrorContains(t, read(patch(24+8+20, 13)), "invalid value type")
	assert.ErrorContains(t, read(patch(24+8+20, 9, 0, 0, 0, 9)), "invalid array element type")
	// A duplicate key: rename "t.i8" to "t.u8".
	i := bytes.Index(valid, []byte("t.i8"))
	assert.ErrorContains(t, read(patch(i, 't', '.', 'u', '8')), "duplicate metadata key")

	// Tensor info corruption: the offset of tensor "b" (after its name, n_dims,
	// one dimension and its type).
	i = bytes.Index(valid, []byte("\x01\x00\x00\x00\x00\x00\x00\x00b")) + 9
	assert.ErrorContains(t, read(patch(i+4+8+4, 64)), "offset")
	assert.ErrorContains(t, read(patch(i, 5)), "dimensions")
	assert.ErrorContains(t, read(patch(i+4+8, 4)), "unknown type")
	assert.ErrorContains(t, read(patch(i+4, 0, 0, 0, 0, 0, 0, 0, 0x80)), "negative")
	assert.ErrorContains(t, read(patch(i+4, 0, 0, 0, 0, 0, 0, 0, 0x10)), "not within the file")
}

func TestOpen(t *testing.T) {
	path := t.TempDir() + "/m.gguf"
	data := writeFile(t, allTypesMetadata(), testTensors())
	require.NoError(t, os.WriteFile(path, data, 0o644))
	r, err := Open(path)
	require.NoError(t, err)
	assert.Len(t, r.Tensors, 4)
	require.NoError(t, r.Close())
	require.NoError(t, r.Close())
	_, err = Open(path + ".missing")
	assert.Error(t, err)
}

func TestFloat16KnownValues(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff},
		{65519.99, 0x7bff},
		{65520, 0x7c00}, // halfway to the next binade rounds to even: Inf
		{1e10, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
		{1.0 / 3, 0x3555},
		{0x1p-14, 0x0400},     // smallest normal
		{0x1p-24, 0x0001},     // smallest subnormal
		{0x1p-25, 0x0000},     // tie between 0 and 2^-24: even is 0
		{0x1.8p-25, 0x0001},   // above the tie
		{0x3p-24, 0x0003},     // exact subnormal
		{0x1.ff8p-15, 0x03ff}, // largest subnormal
		{0x1.ffcp-15, 0x0400}, // tie: rounds to the even smallest normal
		{1 + 0x1p-11, 0x3c00}, // tie: even mantissa stays
		{1 + 0x3p-11, 0x3c02}, // tie: odd mantissa rounds up
		{1 + 0x1p-11 + 0x1p-20, 0x3c01},
	}
	for _, c := range cases {
		assert.Equal(t, c.h, Float32ToFloat16(c.f), "%g", c.f)
	}
	assert.Equal(t, uint16(0x7e00), Float32ToFloat16(float32(math.NaN()))&0x7e00)
	assert.True(t, math.IsNaN(float64(Float16ToFloat32(0x7e01))))
	assert.Equal(t, float32(0x1p-24), Float16ToFloat32(1))
	assert.Equal(t, float32(-65504), Float16ToFloat32(0xfbff))
}

// TestFloat16Exhaustive checks that every binary16 value survives the round
// trip through float32, and that random float32 values round to the nearest
// binary16 value (ties to even), found by brute force over the neighbours.
func TestFloat16Exhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := Float16ToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		require.Equal(t, uint16(h), Float32ToFloat16(f), "0x%04x", h)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		f := math.Float32frombits(rng.Uint32())
		if math.IsNaN(float64(f)) || math.Abs(float64(f)) >= 65520 {
			continue
		}
		h := Float32ToFloat16(f)
		got := float64(Float16ToFloat32(h))
		// Neighbours of h, as bit patterns of the same sign.
		for _, n := range []uint16{h - 1, h + 1} {
			if n&0x7c00 == 0x7c00 || (h&0x7fff == 0 && n == h-1) {
				continue
			}
			other := float64(Float16ToFloat32(n))
			dGot, dOther := math.Abs(got-float64(f)), math.Abs(other-float64(f))
			require.LessOrEqual(t, dGot, dOther, "f=%g h=0x%04x", f, h)
			if dGot == dOther {
				require.Zero(t, h&1, "tie must pick the even mantissa: f=%g", f)
			}
		}
	}
}

func TestQuoteCutsLongNames(t *testing.T) {
	assert.Equal(t, `"llama.block_count"`, Quote("llama.block_count"))
	long := strings.Repeat("k\x00", 5000)
	q := Quote(long)
	assert.Equal(t, strconv.Quote(long[:64])+"... (10000 bytes)", q)
}
