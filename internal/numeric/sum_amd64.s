//go:build amd64 && !purego

#include "textflag.h"

// Offsets of the vectors of termVecConsts (32 bytes each): the coefficients c10 ... c1, ExpFloor,
// Term's clamped value, -Inf, 0.
#define C10 0
#define C9 32
#define C8 64
#define C7 96
#define C6 128
#define C5 160
#define C4 192
#define C3 224
#define C2 256
#define C1 288
#define FLOOR 320
#define CLAMP 352
#define NEGINF 384
#define ZERO 416

// TERM4 computes the terms of the 4 entries at off(SI) into P as addLanesGo does, and in M the
// lanes that Term handles otherwise (d < ExpFloor, -Inf, NaN): d = x - m, z = fma(d, inv, sh),
// kf = z - sh, r = fma(kf, -lo, fma(kf, -hi, d)), r2 = r*r, the even and odd halves of the
// polynomial in r2, p = fma(odd, r, even), term = bits(p) + bits(z)<<52. D ends as r, Z as
// z<<52; R2 and O are scratch. Registers: Y15 m, Y14 1/ln2, Y13 ExpShifter, Y12 -ln2hi, Y11
// -ln2lo, Y10 1.
#define TERM4(off, D, M, Z, P, R2, O) \
	VCVTPS2PD off(SI), D \
	VSUBPD Y15, D, D \
	VCMPPD $0x19, FLOOR(R9), D, M \
	VMOVAPD D, Z \
	VFMADD213PD Y13, Y14, Z \
	VSUBPD Y13, Z, P \
	VFMADD231PD Y12, P, D \
	VFMADD231PD Y11, P, D \
	VMULPD D, D, R2 \
	VMOVUPD C10(R9), P \
	VFMADD213PD C8(R9), R2, P \
	VFMADD213PD C6(R9), R2, P \
	VFMADD213PD C4(R9), R2, P \
	VFMADD213PD C2(R9), R2, P \
	VFMADD213PD Y10, R2, P \
	VMOVUPD C9(R9), O \
	VFMADD213PD C7(R9), R2, O \
	VFMADD213PD C5(R9), R2, O \
	VFMADD213PD C3(R9), R2, O \
	VFMADD213PD C1(R9), R2, O \
	VFMADD231PD O, D, P \
	VPSLLQ $52, Z, Z \
	VPADDQ Z, P, P

// OTHER4 gives the lanes M of the terms P of the entries at off(SI) Term's other values: 0 for
// -Inf, NaN for NaN, e^ExpFloor below the floor. D and T are scratch.
#define OTHER4(off, P, M, D, T) \
	VCVTPS2PD off(SI), D \
	VSUBPD Y15, D, D \
	VBLENDVPD M, CLAMP(R9), P, P \
	VCMPPD $0x00, NEGINF(R9), D, T \
	VBLENDVPD T, ZERO(R9), P, P \
	VCMPPD $0x03, D, D, T \
	VBLENDVPD T, D, P, P

// func expLanesAVX2(row *float32, groups int, m float64, l *lanes, vars *[15]float64, consts *[14][4]float64)
TEXT ·expLanesAVX2(SB), NOSPLIT, $0-48
	MOVQ row+0(FP), SI
	MOVQ groups+8(FP), CX
	MOVQ l+24(FP), DI
	MOVQ vars+32(FP), R8
	MOVQ consts+40(FP), R9
	VBROADCASTSD m+16(FP), Y15
	VBROADCASTSD 0(R8), Y14
	VBROADCASTSD 8(R8), Y13
	VBROADCASTSD 16(R8), Y12
	VBROADCASTSD 24(R8), Y11
	VBROADCASTSD 32(R8), Y10
	VMOVUPD (DI), Y0
	VMOVUPD 32(DI), Y1

loop2:
	TERM4(0, Y2, Y3, Y4, Y5, Y6, Y7)
	VMOVMSKPD Y3, BX
	TESTL BX, BX
	JNZ  other2a

add2a:
	VADDPD Y5, Y0, Y0
	TERM4(16, Y2, Y3, Y4, Y5, Y6, Y7)
	VMOVMSKPD Y3, BX
	TESTL BX, BX
	JNZ  other2b

add2b:
	VADDPD Y5, Y1, Y1
	ADDQ $32, SI
	DECQ CX
	JNZ  loop2

	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VZEROUPPER
	RET

other2a: // rare: a masked entry, a NaN, or one far below the largest
	OTHER4(0, Y5, Y3, Y2, Y4)
	JMP  add2a

other2b:
	OTHER4(16, Y5, Y3, Y2, Y4)
	JMP  add2b

// func expLanesAVX512(row *float32, groups int, m float64, l *lanes, scalars *[18]float64)
//
// TERM4's arithmetic on 8 lanes at once, the constants in registers: Z31 m, Z30 1/ln2, Z29
// ExpShifter, Z28 -ln2hi, Z27 -ln2lo, Z26 1, Z25 ... Z16 c10 ... c1, Z15 ExpFloor, Z14 Term's
// clamped value, Z13 -Inf, Z12 0; Z0 holds the lanes. K1 marks the lanes Term handles otherwise.
TEXT ·expLanesAVX512(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), SI
	MOVQ groups+8(FP), CX
	MOVQ l+24(FP), DI
	MOVQ scalars+32(FP), R8
	VBROADCASTSD m+16(FP), Z31
	VBROADCASTSD 0(R8), Z30
	VBROADCASTSD 8(R8), Z29
	VBROADCASTSD 16(R8), Z28
	VBROADCASTSD 24(R8), Z27
	VBROADCASTSD 32(R8), Z26
	VBROADCASTSD 40(R8), Z25
	VBROADCASTSD 48(R8), Z24
	VBROADCASTSD 56(R8), Z23
	VBROADCASTSD 64(R8), Z22
	VBROADCASTSD 72(R8), Z21
	VBROADCASTSD 80(R8), Z20
	VBROADCASTSD 88(R8), Z19
	VBROADCASTSD 96(R8), Z18
	VBROADCASTSD 104(R8), Z17
	VBROADCASTSD 112(R8), Z16
	VBROADCASTSD 120(R8), Z15
	VBROADCASTSD 128(R8), Z14
	VBROADCASTSD 136(R8), Z13
	VPXORQ Z12, Z12, Z12
	VMOVUPD (DI), Z0

loop8:
	VCVTPS2PD (SI), Z1
	VSUBPD Z31, Z1, Z1
	VCMPPD $0x19, Z15, Z1, K1
	VMOVAPD Z1, Z2
	VFMADD213PD Z29, Z30, Z2
	VSUBPD Z29, Z2, Z3
	VMOVAPD Z1, Z4
	VFMADD231PD Z28, Z3, Z4
	VFMADD231PD Z27, Z3, Z4
	VMULPD Z4, Z4, Z6
	VMOVAPD Z25, Z5
	VFMADD213PD Z23, Z6, Z5
	VFMADD213PD Z21, Z6, Z5
	VFMADD213PD Z19, Z6, Z5
	VFMADD213PD Z17, Z6, Z5
	VFMADD213PD Z26, Z6, Z5
	VMOVAPD Z24, Z7
	VFMADD213PD Z22, Z6, Z7
	VFMADD213PD Z20, Z6, Z7
	VFMADD213PD Z18, Z6, Z7
	VFMADD213PD Z16, Z6, Z7
	VFMADD231PD Z7, Z4, Z5
	VPSLLQ $52, Z2, Z2
	VPADDQ Z2, Z5, Z5
	KORTESTW K1, K1
	JNZ  other8

add8:
	VADDPD Z5, Z0, Z0
	ADDQ $32, SI
	DECQ CX
	JNZ  loop8

	VMOVUPD Z0, (DI)
	VZEROUPPER
	RET

other8: // rare: a masked entry, a NaN, or one far below the largest
	VMOVAPD Z14, K1, Z5
	VCMPPD $0x00, Z13, Z1, K2
	VMOVAPD Z12, K2, Z5
	VCMPPD $0x03, Z1, Z1, K3
	VMOVAPD Z1, K3, Z5
	JMP  add8

// func termsAVX512(dst *float64, row *float32, groups int, m float64, scalars *[18]float64)
//
// expLanesAVX512's terms stored in dst instead of added to lanes.
TEXT ·termsAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ row+8(FP), SI
	MOVQ groups+16(FP), CX
	MOVQ scalars+32(FP), R8
	VBROADCASTSD m+24(FP), Z31
	VBROADCASTSD 0(R8), Z30
	VBROADCASTSD 8(R8), Z29
	VBROADCASTSD 16(R8), Z28
	VBROADCASTSD 24(R8), Z27
	VBROADCASTSD 32(R8), Z26
	VBROADCASTSD 40(R8), Z25
	VBROADCASTSD 48(R8), Z24
	VBROADCASTSD 56(R8), Z23
	VBROADCASTSD 64(R8), Z22
	VBROADCASTSD 72(R8), Z21
	VBROADCASTSD 80(R8), Z20
	VBROADCASTSD 88(R8), Z19
	VBROADCASTSD 96(R8), Z18
	VBROADCASTSD 104(R8), Z17
	VBROADCASTSD 112(R8), Z16
	VBROADCASTSD 120(R8), Z15
	VBROADCASTSD 128(R8), Z14
	VBROADCASTSD 136(R8), Z13
	VPXORQ Z12, Z12, Z12

tloop8:
	VCVTPS2PD (SI), Z1
	VSUBPD Z31, Z1, Z1
	VCMPPD $0x19, Z15, Z1, K1
	VMOVAPD Z1, Z2
	VFMADD213PD Z29, Z30, Z2
	VSUBPD Z29, Z2, Z3
	VMOVAPD Z1, Z4
	VFMADD231PD Z28, Z3, Z4
	VFMADD231PD Z27, Z3, Z4
	VMULPD Z4, Z4, Z6
	VMOVAPD Z25, Z5
	VFMADD213PD Z23, Z6, Z5
	VFMADD213PD Z21, Z6, Z5
	VFMADD213PD Z19, Z6, Z5
	VFMADD213PD Z17, Z6, Z5
	VFMADD213PD Z26, Z6, Z5
	VMOVAPD Z24, Z7
	VFMADD213PD Z22, Z6, Z7
	VFMADD213PD Z20, Z6, Z7
	VFMADD213PD Z18, Z6, Z7
	VFMADD213PD Z16, Z6, Z7
	VFMADD231PD Z7, Z4, Z5
	VPSLLQ $52, Z2, Z2
	VPADDQ Z2, Z5, Z5
	KORTESTW K1, K1
	JNZ  tother8

store8:
	VMOVUPD Z5, (DI)
	ADDQ $64, DI
	ADDQ $32, SI
	DECQ CX
	JNZ  tloop8

	VZEROUPPER
	RET

tother8: // rare: a masked entry, a NaN, or one far below the largest
	VMOVAPD Z14, K1, Z5
	VCMPPD $0x00, Z13, Z1, K2
	VMOVAPD Z12, K2, Z5
	VCMPPD $0x03, Z1, Z1, K3
	VMOVAPD Z1, K3, Z5
	JMP  store8

// func termsAVX2(dst *float64, row *float32, groups int, m float64, vars *[15]float64, consts *[14][4]float64)
//
// expLanesAVX2's terms stored in dst instead of added to lanes.
TEXT ·termsAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ row+8(FP), SI
	MOVQ groups+16(FP), CX
	MOVQ vars+32(FP), R8
	MOVQ consts+40(FP), R9
	VBROADCASTSD m+24(FP), Y15
	VBROADCASTSD 0(R8), Y14
	VBROADCASTSD 8(R8), Y13
	VBROADCASTSD 16(R8), Y12
	VBROADCASTSD 24(R8), Y11
	VBROADCASTSD 32(R8), Y10

tloop2:
	TERM4(0, Y2, Y3, Y4, Y5, Y6, Y7)
	VMOVMSKPD Y3, BX
	TESTL BX, BX
	JNZ  tother2a

store2a:
	VMOVUPD Y5, (DI)
	TERM4(16, Y2, Y3, Y4, Y5, Y6, Y7)
	VMOVMSKPD Y3, BX
	TESTL BX, BX
	JNZ  tother2b

store2b:
	VMOVUPD Y5, 32(DI)
	ADDQ $64, DI
	ADDQ $32, SI
	DECQ CX
	JNZ  tloop2

	VZEROUPPER
	RET

tother2a: // rare: a masked entry, a NaN, or one far below the largest
	OTHER4(0, Y5, Y3, Y2, Y4)
	JMP  store2a

tother2b:
	OTHER4(16, Y5, Y3, Y2, Y4)
	JMP  store2b

