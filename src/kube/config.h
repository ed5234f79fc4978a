// Where and how to reach a kube-apiserver (ClientConfig), filled from a
// kubeconfig file, from a pod's service account, or by the usual precedence.
// Functions read files and the environment when called; thread-compatible.
//
//   TESSERA_ASSIGN_OR_RETURN(ClientConfig config, ResolveConfig(flags.kubeconfig));
//   Client client(std::move(config));
#pragma once

#include <chrono>
#include <string>

#include "core/status.h"

namespace tessera::kube {

struct ClientConfig {
  std::string server;             // "https://127.0.0.1:6443"; no trailing slash needed
  std::string token;              // bearer token; empty: none
  std::string token_file;         // when set, the client re-reads the token from it every minute
                                  // (service-account tokens rotate); `token` holds the value at load
  std::string ca_file, ca_data;   // PEM CA bundle to trust, as a path or the PEM text itself
  std::string cert_file, cert_data;  // client certificate (PEM path or text)
  std::string key_file, key_data;    // client key (PEM path or text)
  bool insecure_skip_tls_verify = false;
  std::string default_namespace;  // the context's namespace or the pod's; empty when not given
  double qps = 50;                // client-side token bucket: refill per second (<= 0: unlimited)
  int burst = 100;                //   and size
  int max_retries = 4;            // retries of 429/5xx/transport errors (see client.h)
  std::chrono::milliseconds timeout{30000};  // per request (watches: timeoutSeconds + 30 s)
  std::string user_agent = "tessera";
  bool http2 = false;             // true: requests may speak HTTP/2 (offered by ALPN). The default,
                                  // HTTP/1.1, costs this client about 30 % less CPU per request
                                  // (bench/kube_client_bench); watches offer HTTP/2 either way
  bool share_tls_sessions = true; // true: all of the client's connections (requests and watches) share
                                  // one TLS session cache and one DNS cache, so a new connection
                                  // resumes a TLS session instead of a full handshake; false: each
                                  // libcurl handle keeps its own (bench/kube_client_bench --compare share)
};

// Reads a kubeconfig: the `context` given, else current-context; its cluster
// (server, certificate-authority[-data], insecure-skip-tls-verify) and user
// (token, tokenFile, client-certificate[-data], client-key[-data]). Relative
// file paths resolve against the kubeconfig's folder; files named are checked
// to be readable, tokenFile is read. *-data fields are base64-decoded.
// Errors: kNotFound when the file is missing; kInvalidArgument naming the file
// and what is wrong (`kubeconfig /p: context "foo" not found`, malformed YAML
// with its line); kUnimplemented for exec/auth-provider users and basic auth.
Result<ClientConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

// The pod's own credentials: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT,
// token and ca.crt (and namespace, if present) from `secret_dir`.
// Errors: kFailedPrecondition when the variables are unset or a file is unreadable.
Result<ClientConfig> InClusterConfig(const std::string& secret_dir = kServiceAccountDir);

// The usual precedence: `kubeconfig_flag` when non-empty; else $KUBECONFIG
// (the first existing file of a ':' list; files are not merged); else
// in-cluster when KUBERNETES_SERVICE_HOST is set; else ~/.kube/config.
// `context` (kubectl's --context) selects a context of the kubeconfig chosen
// instead of its current-context; with in-cluster config it is an error.
// Errors: those of the source chosen; kFailedPrecondition when none exists.
Result<ClientConfig> ResolveConfig(const std::string& kubeconfig_flag, const std::string& context = "");

}  // namespace tessera::kube
