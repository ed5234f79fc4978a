#include "kube/paths.h"

namespace tessera::kube {

std::string EscapeComponent(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                            c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

std::string AppendQuery(std::string path, std::string_view key, std::string_view value) {
  path += path.find('?') == std::string::npos ? '?' : '&';
  path += EscapeComponent(key);
  path += '=';
  path += EscapeComponent(value);
  return path;
}

std::string NamespacePath(std::string_view name) { return "/api/v1/namespaces/" + EscapeComponent(name); }

std::string PodsPath(std::string_view ns) {
  return ns.empty() ? "/api/v1/pods" : NamespacePath(ns) + "/pods";
}

std::string PodPath(std::string_view ns, std::string_view name) {
  return PodsPath(ns) + "/" + EscapeComponent(name);
}

std::string NodePath(std::string_view name) { return "/api/v1/nodes/" + EscapeComponent(name); }

std::string LeasesPath(std::string_view ns) {
  std::string p = "/apis/coordination.k8s.io/v1";
  if (!ns.empty()) p += "/namespaces/" + EscapeComponent(ns);
  return p + "/leases";
}

std::string LeasePath(std::string_view ns, std::string_view name) {
  return LeasesPath(ns) + "/" + EscapeComponent(name);
}

}  // namespace tessera::kube
