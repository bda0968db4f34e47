package llamacpp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // DecodeImage's formats
	_ "image/jpeg"
	_ "image/png"
	"io"
	"math"
	"os"
)

// DecodeImage decodes a PNG, JPEG or GIF (its first frame) with Go's
// standard library into an RGB Media; alpha is dropped (the colour as
// stored, not composited). An image over MaxImagePixels is refused from its
// header, before its pixels are decoded.
func DecodeImage(r io.Reader) (Media, error) {
	br := bufio.NewReaderSize(r, 1<<20) // the header is peeked: room for EXIF
	cfg, format, err := image.DecodeConfig(&peekReader{br: br})
	if err != nil {
		return Media{}, invalid("image: %v (PNG, JPEG and GIF are taken)", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > MaxImagePixels/max(cfg.Height, 1) {
		return Media{}, invalid("%s image of %d×%d pixels is over MaxImagePixels (%d) or empty", format, cfg.Width, cfg.Height, MaxImagePixels)
	}
	img, _, err := image.Decode(br)
	if err != nil {
		return Media{}, invalid("%s image: %v", format, err)
	}
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	rgb := make([]byte, 0, w*h*3)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			if a != 0 && a != 0xffff {
				// un-premultiply: RGBA gives alpha-premultiplied colour
				r, g, bl = r*0xffff/a, g*0xffff/a, bl*0xffff/a
			}
			rgb = append(rgb, byte(r>>8), byte(g>>8), byte(bl>>8))
		}
	}
	return ImageRGB(w, h, rgb)
}

// peekReader lets image.DecodeConfig read the header from a bufio.Reader
// without consuming it, so that image.Decode starts again at the top.
type peekReader struct {
	br  *bufio.Reader
	off int
}

func (p *peekReader) Read(b []byte) (int, error) {
	// Headers are small; bufio's default 4 KiB is not enough for every
	// JPEG (EXIF before SOF), so peek up to the reader's size and fail
	// then rather than consume.
	buf, err := p.br.Peek(min(p.off+len(b), p.br.Size()))
	if p.off >= len(buf) {
		if err == nil {
			err = errors.New("image header longer than the peek buffer")
		}
		return 0, err
	}
	n := copy(b, buf[p.off:])
	p.off += n
	return n, nil
}

// ImageFromFile is DecodeImage of the file at path.
func ImageFromFile(path string) (Media, error) {
	f, err := os.Open(path)
	if err != nil {
		return Media{}, err
	}
	defer f.Close()
	m, err := DecodeImage(f)
	if err != nil {
		return Media{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// maxWAVBytes bounds the data chunk DecodeWAV reads (MaxAudioSamples of
// stereo float32).
const maxWAVBytes = MaxAudioSamples * 8

// DecodeWAV reads a RIFF WAVE file: PCM 16-bit integer (format 1) or
// 32-bit float (format 3, or WAVE_FORMAT_EXTENSIBLE of either), mono or
// stereo (mixed down to mono by averaging), at any sample rate, which the
// Media keeps: Tokenize refuses a rate other than the projector's (no
// resampling is done). Its size is bounded by MaxAudioSamples.
func DecodeWAV(r io.Reader) (Media, error) {
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil || string(hdr[:4]) != "RIFF" || string(hdr[8:]) != "WAVE" {
		return Media{}, invalid("not a RIFF WAVE file")
	}
	var format, channels, bits uint16
	var rate uint32
	haveFmt := false
	for {
		var ch [8]byte
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			return Media{}, invalid("WAV: no data chunk")
		}
		size := binary.LittleEndian.Uint32(ch[4:])
		switch string(ch[:4]) {
		case "fmt ":
			if size < 16 || size > 1024 {
				return Media{}, invalid("WAV: fmt chunk of %d bytes", size)
			}
			b := make([]byte, size+size%2)
			if _, err := io.ReadFull(r, b); err != nil {
				return Media{}, invalid("WAV: truncated fmt chunk")
			}
			format, channels = binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:])
			rate, bits = binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint16(b[14:])
			if format == 0xfffe && size >= 26 { // WAVE_FORMAT_EXTENSIBLE: the sub-format's first two bytes
				format = binary.LittleEndian.Uint16(b[24:])
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return Media{}, invalid("WAV: data before fmt")
			}
			if channels != 1 && channels != 2 {
				return Media{}, invalid("WAV: %d channels (mono and stereo are taken)", channels)
			}
			if !(format == 1 && bits == 16) && !(format == 3 && bits == 32) {
				return Media{}, invalid("WAV: format %d with %d bits (16-bit PCM and 32-bit float are taken)", format, bits)
			}
			if rate == 0 || rate > 384000 {
				return Media{}, invalid("WAV: sample rate %d Hz", rate)
			}
			if size > maxWAVBytes {
				return Media{}, invalid("WAV: data of %d bytes is over %d (MaxAudioSamples)", size, maxWAVBytes)
			}
			frame := int(channels) * int(bits) / 8
			data := make([]byte, int(size)/frame*frame)
			if _, err := io.ReadFull(r, data); err != nil {
				return Media{}, invalid("WAV: data chunk of %d bytes truncated", size)
			}
			pcm := make([]float32, len(data)/frame)
			for i := range pcm {
				var sum float32
				for c := range int(channels) {
					o := i*frame + c*int(bits)/8
					if bits == 16 {
						sum += float32(int16(binary.LittleEndian.Uint16(data[o:]))) / 32768
					} else {
						v := math.Float32frombits(binary.LittleEndian.Uint32(data[o:]))
						if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
							return Media{}, invalid("WAV: sample %d is %v", i, v)
						}
						sum += v
					}
				}
				pcm[i] = sum / float32(channels)
			}
			return AudioPCM(pcm, int(rate))
		default:
			if _, err := io.CopyN(io.Discard, r, int64(size)+int64(size%2)); err != nil {
				return Media{}, invalid("WAV: truncated %q chunk", ch[:4])
			}
		}
	}
}

// AudioFromFile is DecodeWAV of the file at path.
func AudioFromFile(path string) (Media, error) {
	f, err := os.Open(path)
	if err != nil {
		return Media{}, err
	}
	defer f.Close()
	m, err := DecodeWAV(bufio.NewReader(f))
	if err != nil {
		return Media{}, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
