// Package gguf reads and writes GGUF version 3 files, the model format of
// llama.cpp, in pure Go.
//
// # Layout
//
// All integers and floats are little-endian. A file is, in order:
//
//  1. The magic "GGUF" (4 bytes) and the version, uint32 3.
//  2. The tensor count and the metadata count, each int64 (uint64 on disk, at
//     most 2^63-1).
//  3. The metadata entries, each: the key (a string), the value type (uint32,
//     see [ValueType]) and the value. A string is a uint64 byte length
//     followed by the bytes, no terminator. A bool is one byte (0 or 1). An
//     array is the element type (uint32, never another array), a uint64 element
//     count and the elements back to back. Keys are unique and non-empty.
//  4. The tensor infos, each: the name (a string shorter than 64 bytes), the
//     number of dimensions (uint32, 1 to 4), the dimensions (uint64 each), the
//     tensor type (uint32, see [TensorType]) and the data offset (uint64).
//  5. Zero padding up to the next multiple of the alignment, then the data
//     section: every tensor's bytes in the order of the infos, each padded with
//     zeros to a multiple of the alignment.
//
// The alignment is the uint32 metadata value "general.alignment" when present
// (a power of two), otherwise 32. A tensor's offset is relative to the start of
// the data section, and llama.cpp's loader requires the offsets to be exactly
// the running sum of the padded sizes of the tensors before it (so tensor 0 is
// at offset 0); this package writes them so and rejects files that differ.
//
// Dimensions are in ggml order: Shape[0] (ne[0]) is the innermost, contiguous
// dimension. A PyTorch weight of shape [out, in] (row-major) is stored with
// Shape = {in, out}: each of the out rows holds in consecutive values. For a
// block-quantized type Shape[0] must be a multiple of the block size, and a
// row takes Shape[0]/BlockSize*BlockBytes bytes.
package gguf
