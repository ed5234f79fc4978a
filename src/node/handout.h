// The node agent's own check before it hands a pod its GPU shares. Anyone
// who may create pods can write a tessera.io/assignment annotation and set
// spec.nodeName, skipping the scheduler; the agent therefore hands out an
// assignment only when it is what the pod itself asks for and fits what the
// node has not already handed out. Works on pods decoded once
// (core::PodView); reads no JSON. Pure; thread-safe.
//
//   Status st = CheckHandOut(pod, node_pods, "node-1", inventory);
//   if (!st.ok()) ...  // PERMISSION_DENIED: refuse the Allocate, tell the pod
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/pod_view.h"
#include "core/status.h"
#include "node/pod_views.h"

namespace tessera::node {

// Checks `pod`'s tessera.io/assignment before its first container is
// allocated on `node`:
//   1. against the pod's own request (its view's `request`, decoded with the
//      node agent's resource names): each container gets as many GPUs as it asks for, each share
//      is the asked memory (or, for a whole GPU asked without a size, the
//      card's) and compute, on GPUs of an allowed model, each GPU once, and
//      each GPU is the inventory's (index and UUID);
//   2. against what the node has handed out: the shares of the other pods
//      of `node_pods` bound to `node` with at least one container allocated
//      (tessera.io/allocated) and not finished (Succeeded or Failed) are
//      summed per GPU; with this pod's, no GPU may go over its memory, 100 %
//      of its compute or its max_sharers slots.
//   3. against the pod's own environment: no container (init containers
//      included) sets, in its spec's `env` (the view's spec_env), a variable the agent gives or
//      the library's enforcement reads (IsReservedVariable). Container runtimes merge the two lists
//      differently (one lets the later, the pod's, value replace the
//      agent's; another keeps both, and which one a program reads depends
//      on how it reads), so a share must not depend on which runtime a
//      node has. `envFrom` sources are not read (the agent may not read
//      ConfigMaps or Secrets).
// Pods being deleted still count (their containers may still run), as the
// scheduler counts them until they are gone. OK when all hold;
// PERMISSION_DENIED with a message that names the pod, the container, the
// GPU and the numbers (or the variable) otherwise (the assignment is then
// not the scheduler's, or was copied onto a pod it does not fit).
// Whether a pod's spec may not set `name`: the variables the node agent's
// Allocate answer gives (container_env.h: NVIDIA_VISIBLE_DEVICES, TESSERA_*,
// gpushare's ALIYUN_COM_GPU_MEM_*, HAMi's CUDA_DEVICE_MEMORY_LIMIT* and
// CUDA_DEVICE_SM_LIMIT, MPS's CUDA_MPS_*), and every other TESSERA_* the
// interception library reads (TESSERA_CUDA_DISABLE, TESSERA_MANAGED_MEMORY,
// ... would switch enforcement off or loosen it), except TESSERA_LOG_LEVEL,
// which only says how much it logs.
bool IsReservedVariable(std::string_view name);

// `pod` may be among `node_pods`.
Status CheckHandOut(const core::PodView& pod, const PodViews& node_pods, const std::string& node,
                    const std::vector<core::GpuInfo>& gpus);

}  // namespace tessera::node
