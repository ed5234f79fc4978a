#include "node/plugin_host.h"

namespace tessera::node {

PluginHost::PluginHost(PluginHostOptions options, kube::Api& api, MountPaths mounts,
                       std::shared_ptr<spdlog::logger> log)
    : log_(log),
      allocator_(api, options.node, std::move(mounts), log, std::move(options.pods)),
      server_(std::move(options.server), log) {}

PluginHost::~PluginHost() { Stop(); }

Status PluginHost::Add(const std::string& resource, const std::string& socket_name,
                       std::unique_ptr<HostedPlugin> plugin) {
  if (!plugin) return InvalidArgument("no plugin given for " + resource);
  HostedPlugin* raw = plugin.get();
  TESSERA_RETURN_IF_ERROR(server_.Add(PluginEndpoint{resource, socket_name, raw->GrpcService(),
                                                     [raw] { raw->EndStreams(); }}));
  plugins_.push_back(Hosted{resource, std::move(plugin)});
  return Status::Ok();
}

Status PluginHost::SetGpus(const std::vector<core::GpuInfo>& gpus) {
  Status first = Status::Ok();
  for (Hosted& h : plugins_) {
    if (Status st = h.plugin->SetGpus(gpus); !st.ok() && first.ok()) {
      first = InvalidArgument(h.resource + ": " + st.message());
    }
  }
  return first;
}

Status PluginHost::Start() {
  if (plugins_.empty()) return FailedPrecondition("the plugin host has no resource to serve");
  TESSERA_RETURN_IF_ERROR(allocator_.Start());
  return server_.Start();
}

void PluginHost::Stop() {
  for (Hosted& h : plugins_) h.plugin->Shutdown();
  server_.Stop();
}

std::vector<std::string> PluginHost::Resources() const {
  std::vector<std::string> out;
  for (const Hosted& h : plugins_) out.push_back(h.resource);
  return out;
}

}  // namespace tessera::node
