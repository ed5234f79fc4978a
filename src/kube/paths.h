// Building apiserver paths and queries: percent-escaping of path segments and
// query values, and the paths of the few resources Tessera touches.
// Pure functions; thread-safe.
//
//   client.Get(PodPath("default", "p1"));                    // /api/v1/namespaces/default/pods/p1
//   AppendQuery("/api/v1/pods", "labelSelector", "a=b");     // /api/v1/pods?labelSelector=a%3Db
#pragma once

#include <string>
#include <string_view>

namespace tessera::kube {

// Percent-escapes everything but RFC 3986 unreserved characters
// (A-Z a-z 0-9 - . _ ~), so the result is safe as one path segment or one
// query key or value.
std::string EscapeComponent(std::string_view s);

// Appends "key=value" (both escaped) to `path`, with '?' or '&' as needed.
// An empty value is still appended ("key=").
std::string AppendQuery(std::string path, std::string_view key, std::string_view value);

// Core v1 paths. An empty namespace in a collection path means all namespaces.
std::string NamespacePath(std::string_view name);                 // /api/v1/namespaces/{name}
std::string PodsPath(std::string_view ns);                         // /api/v1[/namespaces/{ns}]/pods
std::string PodPath(std::string_view ns, std::string_view name);   // .../pods/{name}
std::string NodePath(std::string_view name);                      // /api/v1/nodes/{name}
// coordination.k8s.io/v1 Leases.
std::string LeasesPath(std::string_view ns);
std::string LeasePath(std::string_view ns, std::string_view name);

}  // namespace tessera::kube
