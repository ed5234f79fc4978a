// The node agent's pods as its loops share them: each pod decoded once
// (core::PodView) where it came from the API server (NodePods' watch cache,
// ListNodePods) and handed on by shared pointer, never copied or decoded
// again. Thread-safe to share: the views are immutable.
//
//   PodViews pods = *allocator.CachedPods();
//   for (const auto& pod : pods) if (pod->uid == uid) ...
#pragma once

#include <memory>
#include <vector>

#include "core/pod_view.h"

namespace tessera::node {

// A list of decoded pods. Holds no nullptr: whoever decodes leaves out a
// pod that cannot be decoded (one without a name).
using PodViews = std::vector<std::shared_ptr<const core::PodView>>;

}  // namespace tessera::node
