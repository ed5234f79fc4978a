// Where kubectl-tessera's output goes: whether to colour it and how wide the
// terminal is. Colour follows --color (auto|always|never); auto colours only
// a terminal, and never when NO_COLOR is set (https://no-color.org).
//
//   bool color = UseColor(ColorMode::kAuto, isatty(1), getenv("NO_COLOR") != nullptr);
//   int width = TerminalWidth(1, getenv("COLUMNS"));
#pragma once

#include <string_view>

#include "core/status.h"

namespace tessera::kubectl {

enum class ColorMode { kAuto, kAlways, kNever };

// "auto", "always", "never"; INVALID_ARGUMENT otherwise.
Result<ColorMode> ParseColorMode(std::string_view text);

// Pure: the decision from the flag, whether stdout is a terminal, and
// whether NO_COLOR is set (to anything non-empty).
bool UseColor(ColorMode mode, bool stdout_is_tty, bool no_color);

// The terminal's columns from TIOCGWINSZ on `fd`, else from `columns_env`
// ($COLUMNS) when it is a positive number, else 0 (unknown: nothing is cut).
int TerminalWidth(int fd, const char* columns_env);

}  // namespace tessera::kubectl
