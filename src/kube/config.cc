#include "kube/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tessera::kube {
namespace {

namespace fs = std::filesystem;

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FailedPrecondition(path + ": " + std::strerror(errno));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string Trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(s.find_last_not_of(ws) + 1);
  s.erase(0, s.find_first_not_of(ws));
  return s;
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

std::string Scalar(const YAML::Node& map, const char* key) {
  const YAML::Node v = map[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

// The `field` ("context", "cluster", "user") of the entry named `name` in the
// list `root[list]`, or an undefined node.
YAML::Node FindNamed(const YAML::Node& root, const char* list, const char* field, const std::string& name) {
  const YAML::Node items = root[list];
  if (!items || !items.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& item : items) {
    if (item.IsMap() && Scalar(item, "name") == name) {
      const YAML::Node v = item[field];
      return v && v.IsMap() ? v : YAML::Node(YAML::NodeType::Map);
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// A file path from the kubeconfig: relative paths are relative to its folder.
// The file must be readable, so mistakes surface at load, not at first use.
Result<std::string> ResolveFile(const std::string& value, const fs::path& dir, const std::string& where) {
  fs::path p(value);
  if (p.is_relative()) p = dir / p;
  std::ifstream in(p);
  if (!in) return InvalidArgument(where + ": " + p.string() + ": " + std::strerror(errno));
  return p.string();
}

Result<std::string> DecodeData(const std::string& value, const std::string& where) {
  const std::vector<unsigned char> bytes = YAML::DecodeBase64(value);
  if (bytes.empty() && !Trim(value).empty()) return InvalidArgument(where + " is not valid base64");
  return std::string(bytes.begin(), bytes.end());
}

Status ParseCluster(const YAML::Node& cluster, const fs::path& dir, const std::string& where, ClientConfig& out) {
  out.server = Scalar(cluster, "server");
  if (out.server.empty()) return InvalidArgument(where + ": no server");
  while (out.server.size() > 1 && out.server.back() == '/') out.server.pop_back();
  if (const std::string v = Scalar(cluster, "certificate-authority-data"); !v.empty()) {
    TESSERA_ASSIGN_OR_RETURN(out.ca_data, DecodeData(v, where + ": certificate-authority-data"));
  } else if (const std::string f = Scalar(cluster, "certificate-authority"); !f.empty()) {
    TESSERA_ASSIGN_OR_RETURN(out.ca_file, ResolveFile(f, dir, where + ": certificate-authority"));
  }
  if (const YAML::Node v = cluster["insecure-skip-tls-verify"]; v && v.IsScalar()) {
    out.insecure_skip_tls_verify = v.as<bool>();
  }
  return Status::Ok();
}

Status ParseUser(const YAML::Node& user, const fs::path& dir, const std::string& where, ClientConfig& out) {
  out.token = Scalar(user, "token");
  if (const std::string f = Scalar(user, "tokenFile"); !f.empty() && out.token.empty()) {
    TESSERA_ASSIGN_OR_RETURN(out.token_file, ResolveFile(f, dir, where + ": tokenFile"));
    TESSERA_ASSIGN_OR_RETURN(std::string token, ReadFile(out.token_file));
    out.token = Trim(std::move(token));
  }
  if (const std::string v = Scalar(user, "client-certificate-data"); !v.empty()) {
    TESSERA_ASSIGN_OR_RETURN(out.cert_data, DecodeData(v, where + ": client-certificate-data"));
  } else if (const std::string f = Scalar(user, "client-certificate"); !f.empty()) {
    TESSERA_ASSIGN_OR_RETURN(out.cert_file, ResolveFile(f, dir, where + ": client-certificate"));
  }
  if (const std::string v = Scalar(user, "client-key-data"); !v.empty()) {
    TESSERA_ASSIGN_OR_RETURN(out.key_data, DecodeData(v, where + ": client-key-data"));
  } else if (const std::string f = Scalar(user, "client-key"); !f.empty()) {
    TESSERA_ASSIGN_OR_RETURN(out.key_file, ResolveFile(f, dir, where + ": client-key"));
  }
  const bool has_cert = !out.cert_data.empty() || !out.cert_file.empty();
  const bool has_key = !out.key_data.empty() || !out.key_file.empty();
  if (has_cert != has_key) return InvalidArgument(where + ": a client certificate needs its key and vice versa");
  if (out.token.empty() && !has_cert) {
    for (const char* unsupported : {"exec", "auth-provider", "username"}) {
      if (user[unsupported]) {
        return Status(StatusCode::kUnimplemented,
                      where + ": " + unsupported + " credentials are not supported; use a token or client certificate");
      }
    }
  }
  return Status::Ok();
}

Result<ClientConfig> Parse(const YAML::Node& root, const std::string& file, const fs::path& dir,
                           const std::string& context) {
  const std::string where = "kubeconfig " + file;
  const std::string context_name = context.empty() ? Scalar(root, "current-context") : context;
  if (context_name.empty()) return InvalidArgument(where + ": no context given and no current-context");
  const YAML::Node ctx = FindNamed(root, "contexts", "context", context_name);
  if (!ctx) return InvalidArgument(where + ": context " + Quote(context_name) + " not found");

  ClientConfig out;
  out.default_namespace = Scalar(ctx, "namespace");
  const std::string cluster_name = Scalar(ctx, "cluster");
  if (cluster_name.empty()) return InvalidArgument(where + ": context " + Quote(context_name) + " names no cluster");
  const YAML::Node cluster = FindNamed(root, "clusters", "cluster", cluster_name);
  if (!cluster) {
    return InvalidArgument(where + ": cluster " + Quote(cluster_name) + " (of context " + Quote(context_name) +
                           ") not found");
  }
  TESSERA_RETURN_IF_ERROR(ParseCluster(cluster, dir, where + ": cluster " + Quote(cluster_name), out));

  const std::string user_name = Scalar(ctx, "user");
  if (!user_name.empty()) {
    const YAML::Node user = FindNamed(root, "users", "user", user_name);
    if (!user) {
      return InvalidArgument(where + ": user " + Quote(user_name) + " (of context " + Quote(context_name) +
                             ") not found");
    }
    TESSERA_RETURN_IF_ERROR(ParseUser(user, dir, where + ": user " + Quote(user_name), out));
  }
  return out;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

Result<ClientConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("kubeconfig " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  std::error_code ec;
  const fs::path dir = fs::absolute(fs::path(path), ec).parent_path();
  try {
    const YAML::Node root = YAML::Load(text.str());
    if (!root.IsMap()) return InvalidArgument("kubeconfig " + path + ": not a YAML mapping");
    return Parse(root, path, dir, context);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("kubeconfig " + path + ": malformed YAML: " + e.what());
  }
}

Result<ClientConfig> InClusterConfig(const std::string& secret_dir) {
  std::string host = Env("KUBERNETES_SERVICE_HOST");
  const std::string port = Env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return FailedPrecondition("not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  if (host.find(':') != std::string::npos) host = "[" + host + "]";  // IPv6 literal
  ClientConfig out;
  out.server = "https://" + host + ":" + port;
  out.token_file = secret_dir + "/token";
  auto token = ReadFile(out.token_file);
  if (!token.ok()) return token.status().WithContext("in-cluster config: service-account token");
  out.token = Trim(std::move(token).value());
  if (out.token.empty()) return FailedPrecondition("in-cluster config: " + out.token_file + " is empty");
  out.ca_file = secret_dir + "/ca.crt";
  if (std::ifstream ca(out.ca_file); !ca) {
    return FailedPrecondition("in-cluster config: service-account CA: " + out.ca_file + ": " + std::strerror(errno));
  }
  if (auto ns = ReadFile(secret_dir + "/namespace"); ns.ok()) out.default_namespace = Trim(std::move(ns).value());
  return out;
}

Result<ClientConfig> ResolveConfig(const std::string& kubeconfig_flag, const std::string& context) {
  if (!kubeconfig_flag.empty()) return LoadKubeconfig(kubeconfig_flag, context);
  if (const std::string list = Env("KUBECONFIG"); !list.empty()) {
    std::stringstream parts(list);
    std::string first, part;
    while (std::getline(parts, part, ':')) {
      if (part.empty()) continue;
      if (first.empty()) first = part;
      if (fs::exists(part)) return LoadKubeconfig(part, context);
    }
    if (!first.empty()) return LoadKubeconfig(first, context);  // reports the missing file
  }
  if (!Env("KUBERNETES_SERVICE_HOST").empty()) {
    if (!context.empty()) {
      return FailedPrecondition("context \"" + context +
                                "\" given, but there is no kubeconfig (in a pod, without --kubeconfig or KUBECONFIG)");
    }
    return InClusterConfig();
  }
  if (const std::string home = Env("HOME"); !home.empty() && fs::exists(home + "/.kube/config")) {
    return LoadKubeconfig(home + "/.kube/config", context);
  }
  return FailedPrecondition(
      "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, run in a pod, or create ~/.kube/config");
}

}  // namespace tessera::kube
