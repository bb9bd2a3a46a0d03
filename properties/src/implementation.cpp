#include "attncheck/implementation.h"

namespace attncheck {

double unit_roundoff(Precision p) { return precision_class(p).unit_roundoff; }

const PrecisionClass& precision_class(Precision p) {
  // unit roundoff, largest, smallest normal, subnormal step, exp underflow
  // (ln of the smallest normal), weight note threshold (6 binades above it).
  static const PrecisionClass fp32{Precision::fp32, 0x1p-24, 0x1.fffffep127, 0x1p-126, 0x1p-149, -87.336544750553921, 0x1p-120};
  static const PrecisionClass bf16{Precision::bf16, 0x1p-8, 0x1.fep127, 0x1p-126, 0x1p-133, -87.336544750553921, 0x1p-120};
  static const PrecisionClass fp16{Precision::fp16, 0x1p-11, 65504.0, 0x1p-14, 0x1p-24, -9.7040605278392877, 0x1p-8};
  static const PrecisionClass fp64{Precision::fp64, 0x1p-53, 0x1.fffffffffffffp1023, 0x1p-1022, 0x1p-1074, -708.39641853226408, 0x1p-1016};
  // Extended and multiprecision implementations still read and write float;
  // their range is float's, their rounding their own.
  static const PrecisionClass extended{Precision::extended, 0x1p-64, 0x1.fffffep127, 0x1p-126, 0x1p-149, -87.336544750553921, 0x1p-120};
  static const PrecisionClass mp{Precision::multiprecision, 0.5e-49, 0x1.fffffep127, 0x1p-126, 0x1p-149, -87.336544750553921, 0x1p-120};
  switch (p) {
    case Precision::fp32: return fp32;
    case Precision::bf16: return bf16;
    case Precision::fp16: return fp16;
    case Precision::fp64: return fp64;
    case Precision::extended: return extended;
    case Precision::multiprecision: return mp;
  }
  return fp32;
}

bool narrower_than_float(Precision p) { return p == Precision::bf16 || p == Precision::fp16; }

std::string to_string(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    case Precision::fp64: return "fp64";
    case Precision::extended: return "extended";
    case Precision::multiprecision: return "multiprecision";
  }
  return "?";
}

}  // namespace attncheck
