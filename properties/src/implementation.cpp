#include "attncheck/implementation.h"

namespace attncheck {

double unit_roundoff(Precision p) {
  switch (p) {
    case Precision::fp32: return 0x1p-24;
    case Precision::bf16: return 0x1p-8;
    case Precision::fp16: return 0x1p-11;
    case Precision::fp64: return 0x1p-53;
    case Precision::extended: return 0x1p-64;
    case Precision::multiprecision: return 0.5e-49;
  }
  return 1;
}

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
