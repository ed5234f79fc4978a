// The node agent's own check before it hands a pod its GPU shares. Anyone
// who may create pods can write a tessera.io/assignment annotation and set
// spec.nodeName, skipping the scheduler; the agent therefore hands out an
// assignment only when it is what the pod itself asks for (this check) and
// fits what the node has not already handed out (the node's GpuBook,
// gpu_book.h, which counts other pods and DRA claims). Works on pods decoded
// once (core::PodView); reads no JSON. Pure; thread-safe.
//
//   Status st = CheckHandOut(pod, inventory);
//   if (!st.ok()) ...  // PERMISSION_DENIED: refuse the Allocate, tell the pod
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/pod_view.h"
#include "core/status.h"

namespace tessera::node {

// Checks `pod`'s tessera.io/assignment before its first container is
// allocated, against the pod itself (other holders of its GPUs are the
// GpuBook's to check):
//   1. against the pod's own request (its view's `request`, decoded with the
//      node agent's resource names): each container gets as many GPUs as it asks for, each share
//      is the asked memory (or, for a whole GPU asked without a size, the
//      card's) and compute, on GPUs of an allowed model, each GPU once, and
//      each GPU is the inventory's (index and UUID);
//   2. against the pod's own environment: no container (init containers
//      included) sets, in its spec's `env` (the view's spec_env), a variable the agent gives or
//      the library's enforcement reads (IsReservedVariable). Container runtimes merge the two lists
//      differently (one lets the later, the pod's, value replace the
//      agent's; another keeps both, and which one a program reads depends
//      on how it reads), so a share must not depend on which runtime a
//      node has. `envFrom` sources are not read (the agent may not read
//      ConfigMaps or Secrets).
// OK when both hold; PERMISSION_DENIED with a message that names the pod,
// the container, the GPU and the numbers (or the variable) otherwise (the
// assignment is then not the scheduler's).
// Whether a pod's spec may not set `name`: the variables the node agent's
// Allocate answer gives (container_env.h: NVIDIA_VISIBLE_DEVICES, TESSERA_*,
// gpushare's ALIYUN_COM_GPU_MEM_*, HAMi's CUDA_DEVICE_MEMORY_LIMIT* and
// CUDA_DEVICE_SM_LIMIT, MPS's CUDA_MPS_*), and every other TESSERA_* the
// interception library reads (TESSERA_CUDA_DISABLE, TESSERA_MANAGED_MEMORY,
// ... would switch enforcement off or loosen it), except TESSERA_LOG_LEVEL,
// which only says how much it logs.
bool IsReservedVariable(std::string_view name);

Status CheckHandOut(const core::PodView& pod, const std::vector<core::GpuInfo>& gpus);

}  // namespace tessera::node
