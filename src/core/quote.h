// QuoteInput: user input echoed in an error message, made safe to print on
// one line. Pure; no I/O.
#pragma once

#include <string>
#include <string_view>

namespace tessera {

// `text` in double quotes, with quotes, backslashes and control or non-ASCII
// bytes escaped (\x1b), and cut at 64 characters ("...").
std::string QuoteInput(std::string_view text);

}  // namespace tessera
