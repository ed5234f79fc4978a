// The short GPU model Tessera uses everywhere (node label tessera.io/gpu-model,
// the inventory annotation, pod annotations such as "A100|H100" matched
// exactly) derived from NVML's marketing name. Pure; thread-safe.
//
//   ShortModelName("NVIDIA H100 80GB HBM3") == "H100"
//   ShortModelName("NVIDIA GeForce RTX 4090") == "RTX4090"
#pragma once

#include <string>
#include <string_view>

namespace tessera::nvml {

// Drops the brand words (NVIDIA, Tesla, Quadro, GeForce), keeps the first
// remaining word up to its first '-', and joins series words (RTX, GTX, TITAN,
// PRO) to the word after them. The result holds only [A-Za-z0-9], so it is a
// valid label value; "unknown" when nothing is left.
//   "NVIDIA A100-SXM4-40GB" -> "A100", "Tesla V100-SXM2-16GB" -> "V100",
//   "Tesla T4" -> "T4", "NVIDIA RTX A6000" -> "RTXA6000".
std::string ShortModelName(std::string_view nvml_name);

}  // namespace tessera::nvml
