package reference

import (
	"errors"
	"math"
)

// Whisper's log-mel parameters as mtmd's whisper preprocessor sets them
// for the qwen2a, ultravox and voxtral projectors.
const (
	melSampleRate = 16000
	melNFFT       = 400 // also the Hann window's length
	melHop        = 160
	melChunk      = 3000 // frames per chunk clip.cpp's graph takes
)

// LogMel computes the log-mel spectrogram chunks mtmd's Whisper
// preprocessor (mtmd-audio.cpp) makes of 16 kHz mono samples, in float64
// with each stored value rounded to float32 as mtmd stores it:
//
//   - audio shorter than 31 seconds is padded with zeros to 31 seconds
//     (n samples);
//   - 200 samples reflected at the start; (n - 400)/160 + 1 frames of 400
//     samples every 160 (mtmd also appends 30 seconds of zeros but counts
//     frames over n, so it never reads them), times a periodic Hann window,
//     power spectrum of 201 bins, Slaney-scale mel filterbank (librosa's
//     default, area-normalised) of nMel bands, log10 of max(power, 1e-10);
//   - values below the overall maximum minus 8 raised to it, then
//     (x + 4) / 4;
//   - cut into chunks of 3000 frames; an incomplete last chunk is dropped
//     (so up to 31 seconds make one chunk, and the last partial 30 seconds
//     of longer audio are lost, as in mtmd).
//
// Each chunk holds nMel rows of 3000 frames, as EmbedMel takes it. mtmd
// computes the spectrum with a float32 FFT; the difference from this
// float64 one is about 1e-6 relative on the loud bins and larger only on
// bins near the clamp 8 decades down.
func LogMel(samples []float32, nMel int) ([][]float32, error) {
	if len(samples) == 0 || nMel <= 0 {
		return nil, errors.New("reference: no samples or no mel bins")
	}
	n := max(len(samples), melSampleRate*31)
	const pad = melNFFT / 2
	padded := make([]float64, n+30*melSampleRate+2*pad)
	for i, v := range samples {
		padded[pad+i] = float64(v)
	}
	for i := range pad {
		if pad-i < len(samples) {
			padded[i] = float64(samples[pad-i])
		}
	}
	hann := make([]float64, melNFFT)
	for i := range hann {
		hann[i] = float64(float32(0.5 * (1 - float64(float32(math.Cos(2*math.Pi*float64(i)/melNFFT))))))
	}
	nBins := melNFFT/2 + 1
	filters := melFilters(nMel, nBins)
	cosT, sinT := make([]float64, melNFFT), make([]float64, melNFFT)
	for i := range cosT {
		cosT[i], sinT[i] = math.Cos(2*math.Pi*float64(i)/melNFFT), math.Sin(2*math.Pi*float64(i)/melNFFT)
	}
	// mtmd counts frames over the samples before the padding (n_samples
	// is not updated when the non-centred padding is added), so the 30
	// seconds of zeros are never reached and the frames stop 200 samples
	// short of the end.
	nLen := (n-melNFFT)/melHop + 1
	out := make([]float32, nMel*nLen)
	frame := make([]float64, melNFFT)
	power := make([]float64, nBins)
	mmax := math.Inf(-1)
	for f := range nLen {
		off := f * melHop
		silent := true
		for j := range frame {
			frame[j] = hann[j] * padded[off+j]
			silent = silent && frame[j] == 0
		}
		for k := range nBins {
			if silent {
				power[k] = 0
				continue
			}
			re, im := 0.0, 0.0
			for j, v := range frame {
				idx := (k * j) % melNFFT
				re += v * cosT[idx]
				im -= v * sinT[idx]
			}
			power[k] = re*re + im*im
		}
		for m := range nMel {
			s := 0.0
			for k, p := range power {
				s += p * filters[m*nBins+k]
			}
			v := float32(math.Log10(math.Max(s, 1e-10)))
			out[m*nLen+f] = v
			mmax = math.Max(mmax, float64(v))
		}
	}
	mmax -= 8
	for i, v := range out {
		x := math.Max(float64(v), mmax)
		out[i] = float32((x + 4) / 4)
	}
	var chunks [][]float32
	for off := 0; off+melChunk <= nLen; off += melChunk {
		c := make([]float32, 0, nMel*melChunk)
		for m := range nMel {
			c = append(c, out[m*nLen+off:m*nLen+off+melChunk]...)
		}
		chunks = append(chunks, c)
	}
	return chunks, nil
}

// melFilters is mtmd's Slaney-scale filterbank [nMel][nBins] from 0 Hz to
// the Nyquist frequency, area-normalised, rounded to float32.
func melFilters(nMel, nBins int) []float64 {
	const minLogHz, linSlope = 1000.0, 3 / 200.0
	minLogMel, logStep := minLogHz*linSlope, math.Log(6.4)/27
	hzToMel := func(f float64) float64 {
		if f < minLogHz {
			return f * linSlope
		}
		return minLogMel + math.Log(f/minLogHz)/logStep
	}
	melToHz := func(m float64) float64 {
		if m < minLogMel {
			return m / linSlope
		}
		return minLogHz * math.Exp((m-minLogMel)*logStep)
	}
	lo, hi := hzToMel(0), hzToMel(float64(float32(0.5*melSampleRate)))
	hz := make([]float64, nMel+2)
	for i := range hz {
		hz[i] = melToHz(lo + (hi-lo)*(float64(i)/float64(nMel+1)))
	}
	step := float64(melSampleRate) / melNFFT
	out := make([]float64, nMel*nBins)
	for m := range nMel {
		l, c, r := hz[m], hz[m+1], hz[m+2]
		enorm := 2 / math.Max(1e-30, r-l)
		for k := range nBins {
			f := float64(k) * step
			w := 0.0
			if f >= l && f <= c {
				w = (f - l) / math.Max(1e-30, c-l)
			} else if f > c && f <= r {
				w = (r - f) / math.Max(1e-30, r-c)
			}
			out[m*nBins+k] = float64(float32(w * enorm))
		}
	}
	return out
}
