// A stand-in for the kubelet's device manager on one simulated node, for
// tests: serves Registration on <dir>/kubelet.sock, follows the plugin's
// ListAndWatch, and admits the pods bound to its node (read from the real API
// server) in creation order, choosing device IDs as the kubelet does (healthy
// and free; the plugin's preference when it offers one, else an arbitrary
// pick) and calling Allocate once per container over the plugin's socket.
// It never reads Tessera's annotations to choose devices.
//
// What it records: on success the pod gets the annotation
// kubelet-sim.tessera.io/allocations (JSON: container -> deviceIDs, envs,
// mounts) and the status a kubelet writes once the containers run (phase
// Running, conditions Initialized, ContainersReady and Ready, and per
// container a started, ready, running status: kubectl shows READY 1/1 and
// Deployments count the pod available); on an Allocate error, phase Failed
// with reason UnexpectedAdmissionError and the plugin's message, as the
// kubelet does. Nothing ever runs, so a pod never ends by itself; but the
// stand-in that serves kubelet.sock finishes the deletion of every pod of its
// node that is being deleted (deletionTimestamp set), as a kubelet does once
// the containers stopped: a graceful delete does not hang in Terminating.
// Like the kubelet it also serves the pod-resources API (v1.PodResourcesLister
// List, Get, GetAllocatableResources) on its own socket, answering from what
// it actually allocated: per admitted pod, every container with its device
// IDs of the resource, until the pod finishes or is deleted. And it plays the
// kubelet's node-status role for the resource: whenever the plugin's list
// changes it PATCHes the Node's status (subresource) with capacity = every
// listed device and allocatable = the healthy ones (0 when the stream breaks).
// A streamed list shows in Devices() only after its PATCH was sent, so a test
// that waited for a list can read the Node right away.
// Thread-safety: all methods from any thread.
//
//   KubeletSim kubelet(client, {.node = "n1", .dir = tmp});
//   TESSERA_RETURN_IF_ERROR(kubelet.Start());
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kube/client.h"

namespace tessera::testing {

inline constexpr const char* kSimAllocationsAnnotation = "kubelet-sim.tessera.io/allocations";

struct KubeletSimOptions {
  std::string node;                           // the Node whose pods it admits
  std::string dir;                            // the device-plugin directory (kubelet.sock goes here)
  std::string resource = "tessera.io/gpu";    // the only resource it manages
  uint64_t seed = 1;                          // the arbitrary pick's shuffle
  std::chrono::milliseconds poll{200};        // how often it lists pods
  // The pod-resources socket; "" -> <dir>/../pod-resources/kubelet.sock (the
  // kubelet's layout). Unix socket paths must stay under 108 bytes.
  std::string pod_resources_socket = "";
  // False for a stand-in of a second resource on the same node: it serves no
  // kubelet.sock of its own and gets its registrations through the one that
  // does (Forward), as a real kubelet's device manager serves every resource
  // through one socket.
  bool serve_registration = true;
};

struct SimDevice {
  std::string id, health;
};

class KubeletSim {
 public:
  KubeletSim(kube::Client client, KubeletSimOptions options);
  ~KubeletSim();  // Stop()

  // Serves kubelet.sock and starts admitting. INTERNAL when it cannot serve.
  Status Start();
  // Registrations for `other`'s resource (a stand-in on the same node and
  // device-plugin folder, built with serve_registration false) are handed to
  // it; each stand-in admits the pods that ask for its own resource. Call
  // before Start; `other` must outlive this one's server.
  void Forward(KubeletSim* other);
  void Stop();
  // While paused no pod is admitted (lets a test make several pods pending at once).
  void SetPaused(bool paused);

  // The last device list the plugin streamed.
  std::vector<SimDevice> Devices() const;
  // Registrations received so far.
  int Registrations() const;
  // Polls `done(Devices())` until true or the timeout.
  bool WaitForDevices(const std::function<bool(const std::vector<SimDevice>&)>& done,
                      std::chrono::milliseconds timeout) const;

  // The pod-resources socket it serves.
  std::string PodResourcesSocket() const;

  // Test-only: makes the pod-resources record of `container` in pod ns/name
  // lie, listing `device_ids` instead of what was allocated (a real kubelet
  // never does; it lets tests reach the plugin's mismatch path). NOT_FOUND
  // when the pod has no record or no such container.
  Status CorruptRecord(const std::string& ns, const std::string& pod, const std::string& container,
                       const std::vector<std::string>& device_ids);

  // Like a kubelet restart: deletes every socket in the directory (the
  // plugin's too; only kubelet.sock when `wipe_plugin_sockets` is false) and
  // serves kubelet.sock again.
  Status Restart(bool wipe_plugin_sockets = true);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::testing
