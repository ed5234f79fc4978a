#include "kube/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace tessera::kube {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kube_config_test.XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& text) const {
    const fs::path p = fs::path(path_) / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Sets or clears an environment variable for one test, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

constexpr const char* kTwoContexts = R"(
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority-data: Y2EtcGVt
- name: remote
  cluster:
    server: https://10.0.0.1:443
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: abc123
- name: certs
  user:
    client-certificate-data: Y2VydC1wZW0=
    client-key-data: a2V5LXBlbQ==
contexts:
- name: local
  context: {cluster: local, user: admin}
- name: remote
  context: {cluster: remote, user: certs, namespace: team-a}
current-context: local
)";

TEST(LoadKubeconfigTest, CurrentContextWithTokenAndCaData) {
  TempDir dir;
  auto config = LoadKubeconfig(dir.Write("kubeconfig", kTwoContexts));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://127.0.0.1:6443");  // trailing slash dropped
  EXPECT_EQ(config->token, "abc123");
  EXPECT_EQ(config->ca_data, "ca-pem");
  EXPECT_TRUE(config->ca_file.empty());
  EXPECT_FALSE(config->insecure_skip_tls_verify);
  EXPECT_TRUE(config->default_namespace.empty());
}

TEST(LoadKubeconfigTest, ExplicitContextWithCertDataInsecureAndNamespace) {
  TempDir dir;
  auto config = LoadKubeconfig(dir.Write("kubeconfig", kTwoContexts), "remote");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://10.0.0.1:443");
  EXPECT_TRUE(config->insecure_skip_tls_verify);
  EXPECT_EQ(config->cert_data, "cert-pem");
  EXPECT_EQ(config->key_data, "key-pem");
  EXPECT_TRUE(config->token.empty());
  EXPECT_EQ(config->default_namespace, "team-a");
}

TEST(LoadKubeconfigTest, RelativeFilesResolveAgainstKubeconfigFolder) {
  TempDir dir;
  dir.Write("pki/ca.crt", "ca");
  dir.Write("pki/client.crt", "cert");
  dir.Write("pki/client.key", "key");
  dir.Write("token", "  s3cret\n");
  const std::string path = dir.Write("conf/kubeconfig", R"(
clusters:
- name: c
  cluster: {server: "https://h:1", certificate-authority: ../pki/ca.crt}
users:
- name: u
  user: {tokenFile: ../token, client-certificate: ../pki/client.crt, client-key: )" + dir.path() + R"(/pki/client.key}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
)");
  auto config = LoadKubeconfig(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(fs::canonical(config->ca_file), fs::canonical(dir.path() + "/pki/ca.crt"));
  EXPECT_EQ(fs::canonical(config->cert_file), fs::canonical(dir.path() + "/pki/client.crt"));
  EXPECT_EQ(fs::canonical(config->key_file), fs::canonical(dir.path() + "/pki/client.key"));
  EXPECT_EQ(fs::canonical(config->token_file), fs::canonical(dir.path() + "/token"));
  EXPECT_EQ(config->token, "s3cret");
}

TEST(LoadKubeconfigTest, UserIsOptional) {
  TempDir dir;
  auto config = LoadKubeconfig(dir.Write("k", R"(
clusters: [{name: c, cluster: {server: "http://127.0.0.1:8080"}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
)"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "http://127.0.0.1:8080");
}

struct BadCase {
  const char* name;
  std::string yaml;
  std::string context;
  StatusCode code;
  std::string message_part;  // "<path>" is replaced by the file's path
};

class LoadKubeconfigErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(LoadKubeconfigErrorTest, ClearError) {
  TempDir dir;
  const BadCase& c = GetParam();
  const std::string path = dir.Write("kubeconfig", c.yaml);
  auto config = LoadKubeconfig(path, c.context);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), c.code) << config.status().ToString();
  std::string want = c.message_part;
  if (auto at = want.find("<path>"); at != std::string::npos) want.replace(at, 6, path);
  EXPECT_NE(config.status().message().find(want), std::string::npos)
      << config.status().message() << "\n  should contain: " << want;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LoadKubeconfigErrorTest,
    ::testing::Values(
        BadCase{"MalformedYaml", "clusters: [unclosed\n  - {", "", StatusCode::kInvalidArgument,
                "kubeconfig <path>: malformed YAML"},
        BadCase{"NotAMapping", "- a\n- b\n", "", StatusCode::kInvalidArgument, "not a YAML mapping"},
        BadCase{"MissingContext", kTwoContexts, "foo", StatusCode::kInvalidArgument,
                "kubeconfig <path>: context \"foo\" not found"},
        BadCase{"NoCurrentContext", "clusters: []\n", "", StatusCode::kInvalidArgument, "no current-context"},
        BadCase{"MissingCluster",
                "contexts: [{name: x, context: {cluster: gone, user: u}}]\ncurrent-context: x\n", "",
                StatusCode::kInvalidArgument, "cluster \"gone\" (of context \"x\") not found"},
        BadCase{"MissingUser",
                "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                "contexts: [{name: x, context: {cluster: c, user: nobody}}]\ncurrent-context: x\n",
                "", StatusCode::kInvalidArgument, "user \"nobody\" (of context \"x\") not found"},
        BadCase{"NoServer",
                "clusters: [{name: c, cluster: {}}]\ncontexts: [{name: x, context: {cluster: c}}]\n"
                "current-context: x\n",
                "", StatusCode::kInvalidArgument, "cluster \"c\": no server"},
        BadCase{"MissingCaFile",
                "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority: nope.crt}}]\n"
                "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
                "", StatusCode::kInvalidArgument, "certificate-authority: "},
        BadCase{"BadBase64",
                "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority-data: '!!!'}}]\n"
                "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
                "", StatusCode::kInvalidArgument, "certificate-authority-data is not valid base64"},
        BadCase{"BadBool",
                "clusters: [{name: c, cluster: {server: 'https://h', insecure-skip-tls-verify: maybe}}]\n"
                "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
                "", StatusCode::kInvalidArgument, "kubeconfig <path>: malformed YAML"},
        BadCase{"CertWithoutKey",
                "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                "users: [{name: u, user: {client-certificate-data: Y2VydC1wZW0=}}]\n"
                "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
                "", StatusCode::kInvalidArgument, "needs its key"},
        BadCase{"ExecPlugin",
                "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                "users: [{name: u, user: {exec: {command: aws}}}]\n"
                "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
                "", StatusCode::kUnimplemented, "exec credentials are not supported"}),
    [](const ::testing::TestParamInfo<BadCase>& p) { return std::string(p.param.name); });

TEST(LoadKubeconfigTest, MissingFileIsNotFound) {
  auto config = LoadKubeconfig("/nonexistent/kubeconfig");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kNotFound);
  EXPECT_NE(config.status().message().find("kubeconfig /nonexistent/kubeconfig"), std::string::npos);
}

TEST(InClusterConfigTest, ReadsServiceAccountDir) {
  TempDir dir;
  dir.Write("token", "sa-token\n");
  dir.Write("ca.crt", "ca");
  dir.Write("namespace", "tessera-system");
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  auto config = InClusterConfig(dir.path());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->token, "sa-token");
  EXPECT_EQ(config->token_file, dir.path() + "/token");
  EXPECT_EQ(config->ca_file, dir.path() + "/ca.crt");
  EXPECT_EQ(config->default_namespace, "tessera-system");
}

TEST(InClusterConfigTest, Ipv6HostIsBracketed) {
  TempDir dir;
  dir.Write("token", "t");
  dir.Write("ca.crt", "ca");
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00::1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "6443");
  auto config = InClusterConfig(dir.path());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://[fd00::1]:6443");
}

TEST(InClusterConfigTest, Errors) {
  TempDir dir;
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
    auto config = InClusterConfig(dir.path());
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(config.status().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);
  }
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  auto no_token = InClusterConfig(dir.path());
  ASSERT_FALSE(no_token.ok());
  EXPECT_EQ(no_token.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(no_token.status().message().find(dir.path() + "/token"), std::string::npos);
  dir.Write("token", "t");
  auto no_ca = InClusterConfig(dir.path());
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.status().message().find("ca.crt"), std::string::npos);
}

constexpr const char* kMinimal = R"(
clusters: [{name: c, cluster: {server: "https://%s"}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
)";

std::string Minimal(const std::string& host) {
  std::string s = kMinimal;
  s.replace(s.find("%s"), 2, host);
  return s;
}

TEST(ResolveConfigTest, Precedence) {
  TempDir dir;
  const std::string flag = dir.Write("flag", Minimal("flag"));
  const std::string env = dir.Write("env", Minimal("env"));
  dir.Write("home/.kube/config", Minimal("home"));
  ScopedEnv home("HOME", (dir.path() + "/home").c_str());
  ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);

  {
    ScopedEnv kubeconfig("KUBECONFIG", (dir.path() + "/missing:" + env).c_str());
    auto from_flag = ResolveConfig(flag);
    ASSERT_TRUE(from_flag.ok()) << from_flag.status().ToString();
    EXPECT_EQ(from_flag->server, "https://flag");
    auto from_env = ResolveConfig("");  // first existing file of the list
    ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
    EXPECT_EQ(from_env->server, "https://env");
  }
  {
    ScopedEnv kubeconfig("KUBECONFIG", nullptr);
    auto from_home = ResolveConfig("");
    ASSERT_TRUE(from_home.ok()) << from_home.status().ToString();
    EXPECT_EQ(from_home->server, "https://home");
  }
  {
    ScopedEnv kubeconfig("KUBECONFIG", nullptr);
    ScopedEnv nohome("HOME", (dir.path() + "/nowhere").c_str());
    auto none = ResolveConfig("");
    ASSERT_FALSE(none.ok());
    EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  }
}

TEST(ResolveConfigTest, ContextSelectsAnotherContextOfTheChosenFile) {
  TempDir dir;
  const std::string two = dir.Write("two", R"(
clusters:
- {name: c1, cluster: {server: "https://one"}}
- {name: c2, cluster: {server: "https://two"}}
contexts:
- {name: first, context: {cluster: c1, namespace: ns1}}
- {name: second, context: {cluster: c2, namespace: ns2}}
current-context: first
)");
  dir.Write("home/.kube/config", Minimal("home"));
  ScopedEnv home("HOME", (dir.path() + "/home").c_str());
  ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
  {
    ScopedEnv kubeconfig("KUBECONFIG", nullptr);
    auto current = ResolveConfig(two);
    ASSERT_TRUE(current.ok()) << current.status().ToString();
    EXPECT_EQ(current->server, "https://one");
    EXPECT_EQ(current->default_namespace, "ns1");
    auto second = ResolveConfig(two, "second");
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(second->server, "https://two");
    EXPECT_EQ(second->default_namespace, "ns2");
    auto missing = ResolveConfig(two, "third");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(missing.status().message().find("context \"third\" not found"), std::string::npos)
        << missing.status().message();
    auto from_home = ResolveConfig("", "x");  // ~/.kube/config's context x
    ASSERT_TRUE(from_home.ok()) << from_home.status().ToString();
    EXPECT_EQ(from_home->server, "https://home");
  }
  {
    ScopedEnv kubeconfig("KUBECONFIG", two.c_str());
    auto second = ResolveConfig("", "second");
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(second->server, "https://two");
  }
  {
    ScopedEnv kubeconfig("KUBECONFIG", nullptr);
    ScopedEnv in_pod("KUBERNETES_SERVICE_HOST", "10.0.0.1");
    auto in_cluster = ResolveConfig("", "second");
    ASSERT_FALSE(in_cluster.ok());
    EXPECT_EQ(in_cluster.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(in_cluster.status().message().find("no kubeconfig"), std::string::npos)
        << in_cluster.status().message();
  }
}

}  // namespace
}  // namespace tessera::kube
