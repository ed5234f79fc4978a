#include "node/dir_watch.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace tessera::node {

Result<DirWatch> DirWatch::Open(const std::string& dir) {
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return Internal(std::string("inotify_init1: ") + std::strerror(errno));
  if (inotify_add_watch(fd, dir.c_str(), IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO) < 0) {
    const int err = errno;
    ::close(fd);
    const std::string message = "watching " + dir + ": " + std::strerror(err);
    return err == ENOENT ? NotFound(message) : Internal(message);
  }
  return DirWatch(fd);
}

DirWatch::DirWatch(DirWatch&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

DirWatch& DirWatch::operator=(DirWatch&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DirWatch::~DirWatch() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::vector<DirEvent>> DirWatch::Wait(std::chrono::milliseconds timeout) {
  std::vector<DirEvent> events;
  pollfd pfd{fd_, POLLIN, 0};
  const int ready = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
  if (ready < 0 && errno != EINTR) return Internal(std::string("poll on inotify: ") + std::strerror(errno));
  if (ready <= 0) return events;
  alignas(inotify_event) char buf[4096];
  while (true) {
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      return Internal(std::string("reading inotify: ") + std::strerror(errno));
    }
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      if (ev->len > 0) events.push_back({std::string(ev->name), (ev->mask & (IN_CREATE | IN_MOVED_TO)) != 0});
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
  return events;
}

}  // namespace tessera::node
