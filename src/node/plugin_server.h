// Serves gRPC services to the kubelet, each on its own Unix socket in the
// kubelet's device-plugin folder, and keeps each one registered: the part of
// tessera-node's plugin host (plugin_host.h) that knows sockets and
// registration, and nothing of pods or GPUs. One thread watches the folder
// for all of them (inotify, so a restarting kubelet is noticed at once; a
// check every `resync` is the fallback and the retry period):
//   - a socket file that is gone (a starting kubelet deletes every socket in
//     the folder) is served again, and its resource registered again;
//   - when kubelet.sock is created anew (another inode or change time than
//     the one registered with; inotify's create event wakes the watch at
//     once), every resource is registered again;
//   - a registration that fails (the kubelet is away) is retried every
//     `resync`, each resource on its own.
// Every endpoint registers as a device plugin v1beta1 (Register on
// kubelet.sock, GetPreferredAllocation available, no PreStartContainer).
// Services registered through another mechanism (a DRA driver's, through the
// kubelet's plugin registry) would be one more kind of endpoint here.
//
// Thread-safety: Add, Start and Stop from one thread (Add before Start); the
// services run on gRPC's threads.
//
//   PluginServer server({.dir = "/var/lib/kubelet/device-plugins"}, log);
//   TESSERA_RETURN_IF_ERROR(server.Add({"tessera.io/gpu", "tessera-gpu.sock", &service, [&] { service.EndStreams(); }}));
//   TESSERA_RETURN_IF_ERROR(server.Start());
//   ...
//   server.Stop();
#pragma once

#include <grpcpp/grpcpp.h>
#include <spdlog/logger.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "node/dir_watch.h"

namespace tessera::node {

struct PluginServerOptions {
  // The kubelet's device-plugin folder: kubelet.sock and every served socket.
  std::string dir = "/var/lib/kubelet/device-plugins";
  // Period of the socket check and of registration retries.
  std::chrono::milliseconds resync{1000};
  // Deadline of one Register call.
  std::chrono::milliseconds register_timeout{5000};
  // False: no inotify, only the periodic check (to test the fallback).
  bool inotify = true;
};

// One served device-plugin resource.
struct PluginEndpoint {
  std::string resource;     // the extended resource registered, "tessera.io/gpu"
  std::string socket_name;  // its socket's file name inside PluginServerOptions::dir
  grpc::Service* service = nullptr;  // not owned; must outlive the serving (Stop)
  // Ends the service's open streams at once (may be empty); called before
  // its server is shut down, so a re-serve does not wait for them.
  std::function<void()> end_streams;
};

// "domain/name" with one slash, neither side empty.
bool IsExtendedResourceName(const std::string& name);

class PluginServer {
 public:
  PluginServer(PluginServerOptions options, std::shared_ptr<spdlog::logger> log);
  ~PluginServer();  // Stop()
  PluginServer(const PluginServer&) = delete;
  PluginServer& operator=(const PluginServer&) = delete;

  // Adds an endpoint to serve. INVALID_ARGUMENT naming what to fix: a
  // resource that is not domain/name or is served already, a socket name
  // that is not a plain file name, is kubelet.sock or is taken, no service;
  // FAILED_PRECONDITION once started.
  Status Add(PluginEndpoint endpoint);

  // Serves every endpoint on its socket (a stale file of that name is
  // removed first), then starts the thread that registers them and keeps
  // them served and registered until Stop. INTERNAL naming the socket when
  // one cannot be served (nothing is left serving then); FAILED_PRECONDITION
  // when already started or when there is nothing to serve.
  Status Start();

  // Stops the thread and every server (each endpoint's end_streams first).
  // Idempotent.
  void Stop();

 private:
  struct Entry {
    PluginEndpoint endpoint;
    std::unique_ptr<grpc::Server> server;
    bool registered = false;
  };
  // Who kubelet.sock is: a new file has another inode or change time.
  struct SocketId {
    bool present = false;
    dev_t dev = 0;
    ino_t ino = 0;
    timespec ctime{};
    bool operator==(const SocketId& o) const {
      return present == o.present && dev == o.dev && ino == o.ino && ctime.tv_sec == o.ctime.tv_sec &&
             ctime.tv_nsec == o.ctime.tv_nsec;
    }
  };
  static SocketId Identify(const std::string& path);

  std::string SocketPath(const Entry& e) const;
  std::string KubeletSocket() const;
  Status Serve(Entry& e);
  void StopServing(Entry& e);
  Status Register(const Entry& e);
  void Loop();
  // Whether `events` should wake the loop: kubelet.sock created, or one of
  // the sockets deleted.
  bool Wakes(const std::vector<DirEvent>& events) const;
  // One pass: drop the events queued so far (this pass checks what they
  // report), serve again what is gone, notice a new kubelet.sock, register
  // what is not registered (and still has its socket).
  void Pass(std::optional<DirWatch>& watch);
  // Waits up to resync, less when Stop is called or inotify reports
  // kubelet.sock created or one of the sockets deleted.
  void WaitForWork(std::optional<DirWatch>& watch);

  const PluginServerOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  std::vector<Entry> entries_;  // fixed at Start; then the loop thread's until Stop joins it
  SocketId kubelet_;            // loop thread only: kubelet.sock as last seen
  bool started_ = false;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace tessera::node
