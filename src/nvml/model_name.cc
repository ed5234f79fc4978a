#include "nvml/model_name.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

namespace tessera::nvml {
namespace {

std::string Upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

bool OneOf(std::string_view word, const auto& list) {
  const std::string up = Upper(word);
  return std::find(list.begin(), list.end(), up) != list.end();
}

constexpr std::array<std::string_view, 4> kBrands = {"NVIDIA", "TESLA", "QUADRO", "GEFORCE"};
// Words that name a series, not a model: the model is the word after them.
constexpr std::array<std::string_view, 4> kSeries = {"RTX", "GTX", "TITAN", "PRO"};

std::vector<std::string_view> Words(std::string_view s) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) words.push_back(s.substr(i, j - i));
    i = j;
  }
  return words;
}

// The word up to its first '-', alphanumerics only.
std::string Stem(std::string_view word) {
  std::string out;
  for (char c : word.substr(0, word.find('-'))) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += c;
  }
  return out;
}

}  // namespace

std::string ShortModelName(std::string_view nvml_name) {
  const std::vector<std::string_view> words = Words(nvml_name);
  size_t i = 0;
  while (i < words.size() && OneOf(words[i], kBrands)) ++i;
  std::string model;
  for (; i < words.size(); ++i) {
    model += Stem(words[i]);
    if (!OneOf(words[i], kSeries)) break;
  }
  return model.empty() ? "unknown" : model;
}

}  // namespace tessera::nvml
