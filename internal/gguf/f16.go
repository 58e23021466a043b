package gguf

import "math"

// f32ToF16 converts to IEEE 754 half precision, rounding to nearest even.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case int32(b>>23&0xff) == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp >= 0x1f: // overflow
		return sign | 0x7c00
	case exp <= 0: // subnormal or zero
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		half := uint32(1) << (shift - 1)
		rounded := mant + half - 1 + (mant>>shift)&1
		return sign | uint16(rounded>>shift)
	}
	rounded := mant + 0xfff + (mant>>13)&1
	if rounded&0x800000 != 0 { // mantissa overflowed into the exponent
		rounded = 0
		exp++
		if exp >= 0x1f {
			return sign | 0x7c00
		}
	}
	return sign | uint16(exp)<<10 | uint16(rounded>>13)
}
