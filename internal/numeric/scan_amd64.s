//go:build amd64 && !purego

#include "textflag.h"

// The scans take 32 scores (four registers) a loop iteration and branch
// once on the OR of their four comparisons; past the last whole 32, 8 at a
// time. The comparisons put the threshold first, so that the scores come
// straight from memory: x >= thr is thr <= x (LE_OQ), !(x < thr) is
// !(thr > x) (NGT_UQ, true for NaN), x > thr is thr < x (LT_OQ). The _OQ
// predicates are false when either side is NaN.

DATA scanneginf<>+0(SB)/4, $0xff800000
GLOBL scanneginf<>(SB), RODATA|NOPTR, $4

// The index of each of 8 lanes.
DATA scanlanes<>+0(SB)/4, $0
DATA scanlanes<>+4(SB)/4, $1
DATA scanlanes<>+8(SB)/4, $2
DATA scanlanes<>+12(SB)/4, $3
DATA scanlanes<>+16(SB)/4, $4
DATA scanlanes<>+20(SB)/4, $5
DATA scanlanes<>+24(SB)/4, $6
DATA scanlanes<>+28(SB)/4, $7
GLOBL scanlanes<>(SB), RODATA|NOPTR, $32

// scanstart loads p into SI and n into CX, and sets AX to 0 and DX to the
// end of the whole 32s.
#define scanstart \
	MOVQ p+0(FP), SI \
	MOVQ n+8(FP), CX \
	XORQ AX, AX \
	MOVQ CX, DX \
	ANDQ $-32, DX

// cmp4 compares thr, Y0, with the 32 scores at AX under predicate pred
// into Y1-Y4.
#define cmp4(pred) \
	VCMPPS $pred, (SI)(AX*4), Y0, Y1 \
	VCMPPS $pred, 32(SI)(AX*4), Y0, Y2 \
	VCMPPS $pred, 64(SI)(AX*4), Y0, Y3 \
	VCMPPS $pred, 96(SI)(AX*4), Y0, Y4

// anyhit sets BX to the OR of the lanes of Y1-Y4 that matched, and ZF
// when there is none.
#define anyhit \
	VORPS Y2, Y1, Y5 \
	VORPS Y4, Y3, Y6 \
	VORPS Y6, Y5, Y5 \
	VMOVMSKPS Y5, BX \
	TESTL BX, BX

// skipgroup jumps to hit with the lanes of Y that matched in BX, or moves AX
// past its group of 8 when none did.
#define skipgroup(Y, hit) \
	VMOVMSKPS Y, BX \
	TESTL BX, BX \
	JNZ hit \
	ADDQ $8, AX

// maskgroup is skipgroup, setting the group to -Inf (Y7) when it moves on.
#define maskgroup(Y, hit) \
	VMOVMSKPS Y, BX \
	TESTL BX, BX \
	JNZ hit \
	VMOVUPS Y7, (SI)(AX*4) \
	ADDQ $8, AX

// hitat returns AX plus the index of the first lane set in BX.
#define hitat \
	BSFL BX, BX \
	ADDQ BX, AX \
	VZEROUPPER \
	MOVQ AX, ret+24(FP) \
	RET

// nohit returns n.
#define nohit \
	VZEROUPPER \
	MOVQ CX, ret+24(FP) \
	RET

// maxblock merges the maxima of a block, lane by lane in Y0-Y3, into the
// running maxima Y12, and records the block's number, R8, in Y13 for the
// lanes whose maximum it raised (strictly: a lane's record is the block of
// the first occurrence of its maximum).
#define maxblock \
	VMAXPS Y1, Y0, Y0 \
	VMAXPS Y3, Y2, Y2 \
	VMAXPS Y2, Y0, Y0 \
	VCMPPS $0x1e, Y12, Y0, Y10 \
	VMAXPS Y12, Y0, Y12 \
	VMOVD R8, X11 \
	VPBROADCASTD X11, Y11 \
	VBLENDVPS Y10, Y11, Y13, Y13

// max32 takes the 32 scores at AX into the block's maxima Y0-Y3 and the
// NaN lanes Y4-Y5, and moves AX on.
#define max32 \
	VMOVUPS (SI)(AX*4), Y6 \
	VMOVUPS 32(SI)(AX*4), Y7 \
	VMOVUPS 64(SI)(AX*4), Y8 \
	VMOVUPS 96(SI)(AX*4), Y9 \
	VMAXPS Y0, Y6, Y0 \
	VMAXPS Y1, Y7, Y1 \
	VMAXPS Y2, Y8, Y2 \
	VMAXPS Y3, Y9, Y3 \
	VCMPPS $0x03, Y7, Y6, Y10 \
	VCMPPS $0x03, Y9, Y8, Y11 \
	VORPS Y10, Y4, Y4 \
	VORPS Y11, Y5, Y5 \
	ADDQ $32, AX

// func maxAVX2(p *float32, n int) (m float32, block int, nan bool)
//
// The scores go in blocks of 256, the last one shorter. VMAXPS returns its
// second source (the maximum so far) when either is NaN: a NaN score leaves
// the maximum alone; UNORD_Q between two registers of scores flags a NaN
// in either.
TEXT ·maxAVX2(SB), NOSPLIT, $0-33
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS scanneginf<>(SB), Y15
	VMOVAPS Y15, Y12  // running maxima
	VPXOR   Y13, Y13, Y13 // their blocks
	VXORPS  Y4, Y4, Y4 // lanes that saw a NaN
	VXORPS  Y5, Y5, Y5
	XORQ AX, AX
	XORQ R8, R8 // block number
	MOVQ CX, DX
	ANDQ $-256, DX

maxblocks:
	CMPQ AX, DX
	JAE  maxrest
	LEAQ 256(AX), R9
	VMOVAPS Y15, Y0
	VMOVAPS Y15, Y1
	VMOVAPS Y15, Y2
	VMOVAPS Y15, Y3

maxinner:
	max32
	CMPQ AX, R9
	JB   maxinner
	maxblock
	INCQ R8
	JMP  maxblocks

maxrest: // the last block, fewer than 256
	CMPQ AX, CX
	JAE  maxreduce
	VMOVAPS Y15, Y0
	VMOVAPS Y15, Y1
	VMOVAPS Y15, Y2
	VMOVAPS Y15, Y3
	MOVQ CX, R9
	ANDQ $-32, R9

maxrest32:
	CMPQ AX, R9
	JAE  maxrest8
	max32
	JMP  maxrest32

maxrest8:
	CMPQ AX, CX
	JAE  maxrestdone
	VMOVUPS (SI)(AX*4), Y6
	VMAXPS  Y0, Y6, Y0
	VCMPPS  $0x03, Y6, Y6, Y10
	VORPS   Y10, Y4, Y4
	ADDQ    $8, AX
	JMP     maxrest8

maxrestdone:
	maxblock

maxreduce:
	// The maximum into every lane of X0.
	VEXTRACTF128 $1, Y12, X1
	VMAXPS X1, X12, X0
	VPERMILPS $0x4e, X0, X1 // swap the halves
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1 // swap within the halves
	VMAXPS X1, X0, X0
	// The first block among the lanes that hold it.
	VBROADCASTSS X0, Y1
	VCMPPS $0x00, Y1, Y12, Y1 // EQ_OQ
	VPCMPEQD Y2, Y2, Y2
	VPSRLD $1, Y2, Y2 // MaxInt32 in the other lanes
	VBLENDVPS Y1, Y13, Y2, Y2
	VEXTRACTI128 $1, Y2, X3
	VPMINSD X3, X2, X2
	VPSHUFD $0x4e, X2, X3
	VPMINSD X3, X2, X2
	VPSHUFD $0xb1, X2, X3
	VPMINSD X3, X2, X2
	VMOVD X2, DX
	VORPS  Y5, Y4, Y4
	VMOVMSKPS Y4, BX
	TESTL BX, BX
	SETNE BX
	VMOVSS X0, m+16(FP)
	MOVQ DX, block+24(FP)
	MOVB BX, nan+32(FP)
	VZEROUPPER
	RET

// firstwhere is the body of a scan for the first score that matches pred
// against thr, which the caller broadcasts into Y0, with its labels named by
// the caller: FirstAtLeast and FirstNotBelow differ in their predicate alone.
#define firstwhere(pred, L32, L8, FOUND, HIT, NONE) \
L32: \
	CMPQ AX, DX \
	JAE  L8 \
	cmp4(pred) \
	anyhit \
	JNZ  FOUND \
	ADDQ $32, AX \
	JMP  L32 \
FOUND: \
	skipgroup(Y1, HIT) \
	skipgroup(Y2, HIT) \
	skipgroup(Y3, HIT) \
	VMOVMSKPS Y4, BX \
	JMP HIT \
L8: \
	CMPQ AX, CX \
	JAE  NONE \
	VCMPPS $pred, (SI)(AX*4), Y0, Y1 \
	skipgroup(Y1, HIT) \
	JMP L8 \
HIT: \
	hitat \
NONE: \
	nohit

// func firstAtLeastAVX2(p *float32, n int, thr float32) int
TEXT ·firstAtLeastAVX2(SB), NOSPLIT, $0-32
	scanstart
	VBROADCASTSS thr+16(FP), Y0
	firstwhere(0x12, ge32, ge8, gefound, gehit, genone)

// func firstNotBelowAVX2(p *float32, n int, thr float32) int
TEXT ·firstNotBelowAVX2(SB), NOSPLIT, $0-32
	scanstart
	VBROADCASTSS thr+16(FP), Y0
	firstwhere(0x1a, nb32, nb8, nbfound, nbhit, nbnone)

// func maskBelowAVX2(p *float32, n int, thr float32) int
TEXT ·maskBelowAVX2(SB), NOSPLIT, $0-32
	scanstart
	VBROADCASTSS thr+16(FP), Y0
	VBROADCASTSS scanneginf<>(SB), Y7

mask32:
	CMPQ AX, DX
	JAE  mask8
	cmp4(0x1a)
	anyhit
	JNZ  maskfound
	VMOVUPS Y7, (SI)(AX*4)
	VMOVUPS Y7, 32(SI)(AX*4)
	VMOVUPS Y7, 64(SI)(AX*4)
	VMOVUPS Y7, 96(SI)(AX*4)
	ADDQ $32, AX
	JMP  mask32

maskfound: // the groups before the first with a hit are all below thr
	maskgroup(Y1, maskhit)
	maskgroup(Y2, maskhit)
	maskgroup(Y3, maskhit)
	VMOVMSKPS Y4, BX
	JMP maskhit

mask8:
	CMPQ AX, CX
	JAE  masknone
	VCMPPS $0x1a, (SI)(AX*4), Y0, Y1
	maskgroup(Y1, maskhit)
	JMP mask8

maskhit:
	// The lanes before the hit are below thr: -Inf into them alone.
	BSFL BX, DX
	VMOVD DX, X8
	VPBROADCASTD X8, Y8
	VMOVDQU scanlanes<>(SB), Y9
	VPCMPGTD Y9, Y8, Y8 // hit > lane
	VMASKMOVPS Y7, Y8, (SI)(AX*4)
	hitat

masknone:
	nohit

// func firstAboveSumAVX2(p *float32, n int, add, thr float32) int
//
// VADDPS rounds as ADDSS does (both under MXCSR, which Go leaves at round
// to nearest, no flush to zero): the sums are Go's.
TEXT ·firstAboveSumAVX2(SB), NOSPLIT, $0-32
	scanstart
	VBROADCASTSS add+16(FP), Y8
	VBROADCASTSS thr+20(FP), Y0

sum32:
	CMPQ AX, DX
	JAE  sum8
	VADDPS (SI)(AX*4), Y8, Y1
	VADDPS 32(SI)(AX*4), Y8, Y2
	VADDPS 64(SI)(AX*4), Y8, Y3
	VADDPS 96(SI)(AX*4), Y8, Y4
	VCMPPS $0x11, Y1, Y0, Y1
	VCMPPS $0x11, Y2, Y0, Y2
	VCMPPS $0x11, Y3, Y0, Y3
	VCMPPS $0x11, Y4, Y0, Y4
	anyhit
	JNZ  sumfound
	ADDQ $32, AX
	JMP  sum32

sumfound:
	skipgroup(Y1, sumhit)
	skipgroup(Y2, sumhit)
	skipgroup(Y3, sumhit)
	VMOVMSKPS Y4, BX
	JMP sumhit

sum8:
	CMPQ AX, CX
	JAE  sumnone
	VADDPS (SI)(AX*4), Y8, Y1
	VCMPPS $0x11, Y1, Y0, Y1
	skipgroup(Y1, sumhit)
	JMP sum8

sumhit:
	hitat

sumnone:
	nohit
