// MakePolicy and PolicyNames (policy.h).
#include "core/baseline_policies.h"
#include "core/deployed_policy.h"
#include "core/fgd_policy.h"
#include "core/interference_policy.h"
#include "core/tessera_policy.h"

namespace tessera::core {

std::vector<std::string> PolicyNames() {
  return {"random", "dotprod", "clustering", "packing", "bestfit", "fgd", "tessera", "tessera-interference", "tessera-v3", "tessera-v2", "tessera-v1"};
}

Result<std::unique_ptr<PlacementPolicy>> MakePolicy(std::string_view name, const PolicyConfig& config) {
  if (name.ends_with(kDeployedSuffix) && name.size() > kDeployedSuffix.size()) {
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<PlacementPolicy> gpu,
                             MakePolicy(name.substr(0, name.size() - kDeployedSuffix.size()), config));
    return std::unique_ptr<PlacementPolicy>(std::make_unique<DeployedPolicy>(std::move(gpu)));
  }
  std::unique_ptr<PlacementPolicy> p;
  if (name == "random") p = std::make_unique<RandomPolicy>();
  else if (name == "dotprod") p = std::make_unique<DotProdPolicy>();
  else if (name == "clustering") p = std::make_unique<ClusteringPolicy>();
  else if (name == "packing") p = std::make_unique<PackingPolicy>();
  else if (name == "bestfit") p = std::make_unique<BestFitPolicy>();
  else if (name == "fgd") p = std::make_unique<FgdPolicy>(config.workload);
  else if (name == "tessera") p = std::make_unique<TesseraPolicy>();
  else if (name == "tessera-v3") p = std::make_unique<TesseraPolicy>(TesseraPolicyOptions::V3(), "tessera-v3");
  else if (name == "tessera-v2") p = std::make_unique<TesseraPolicy>(TesseraPolicyOptions::V2(), "tessera-v2");
  else if (name == "tessera-v1") p = std::make_unique<TesseraPolicy>(TesseraPolicyOptions::V1(), "tessera-v1");
  else if (name == "tessera-interference") p = std::make_unique<InterferencePolicy>(config.interference, config.load);
  if (!p) {
    std::string known;
    for (const auto& n : PolicyNames()) known += (known.empty() ? "" : ", ") + n;
    return InvalidArgument("unknown policy \"" + std::string(name) + "\" (known: " + known +
                           "; each also as NAME+kube, placing pods without GPUs as kube-scheduler does)");
  }
  return p;
}

}  // namespace tessera::core
