#include "kubectl/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <string>

namespace tessera::kubectl {

Result<ColorMode> ParseColorMode(std::string_view text) {
  if (text == "auto") return ColorMode::kAuto;
  if (text == "always") return ColorMode::kAlways;
  if (text == "never") return ColorMode::kNever;
  return InvalidArgument("--color: \"" + std::string(text) + "\" is not one of auto, always, never");
}

bool UseColor(ColorMode mode, bool stdout_is_tty, bool no_color) {
  switch (mode) {
    case ColorMode::kAlways: return true;
    case ColorMode::kNever: return false;
    case ColorMode::kAuto: return stdout_is_tty && !no_color;
  }
  return false;
}

int TerminalWidth(int fd, const char* columns_env) {
  winsize ws{};
  if (::isatty(fd) && ::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (columns_env != nullptr) {
    int n = 0;
    const char* end = columns_env + std::strlen(columns_env);
    auto [ptr, ec] = std::from_chars(columns_env, end, n);
    if (ec == std::errc() && ptr == end && n > 0) return n;
  }
  return 0;
}

}  // namespace tessera::kubectl
