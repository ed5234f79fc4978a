// gpu_nvml_inventory: tessera-node's NVML reader (src/nvml) on a real GPU,
// compared field by field with nvidia-smi. Prints both; exits 1 on any
// mismatch, 2 when either side cannot be read. Needs only a C++ compiler and
// nvml.h to build, and the driver (libnvidia-ml.so.1, nvidia-smi) to run.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "nvml/gpu_reader.h"
#include "nvml/model_name.h"

namespace {

struct SmiGpu {
  int index = -1;
  std::string uuid;
  std::string name;
  long long memory_mib = -1;
};

std::string Trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r\n");
  const auto b = s.find_last_not_of(" \t\r\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// One line of `--format=csv,noheader,nounits`: "0, GPU-..., NVIDIA H100 80GB HBM3, 81559".
bool ParseLine(const std::string& line, SmiGpu& out) {
  std::vector<std::string> fields;
  std::stringstream in(line);
  for (std::string f; std::getline(in, f, ',');) fields.push_back(Trim(f));
  if (fields.size() != 4) return false;
  try {
    out.index = std::stoi(fields[0]);
    out.uuid = fields[1];
    out.name = fields[2];
    out.memory_mib = std::stoll(fields[3]);
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

bool ReadSmi(std::vector<SmiGpu>& out) {
  FILE* p = popen("nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits", "r");
  if (p == nullptr) return false;
  std::string text;
  char buf[512];
  while (fgets(buf, sizeof buf, p) != nullptr) text += buf;
  if (pclose(p) != 0) return false;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (Trim(line).empty()) continue;
    SmiGpu g;
    if (!ParseLine(line, g)) {
      std::cerr << "cannot parse nvidia-smi line: " << line << "\n";
      return false;
    }
    out.push_back(g);
  }
  return true;
}

}  // namespace

int main() {
  using tessera::nvml::GpuReader;
  tessera::nvml::GpuReaderOptions options;
  options.log = [](tessera::nvml::LogLevel, const std::string& m) { std::cerr << "nvml: " << m << "\n"; };
  auto reader = GpuReader::Open(options);
  if (!reader.ok()) {
    std::cerr << "NVML: " << reader.status().ToString() << "\n";
    return 2;
  }
  auto gpus = (*reader)->Read();
  if (!gpus.ok()) {
    std::cerr << "NVML: " << gpus.status().ToString() << "\n";
    return 2;
  }
  std::vector<SmiGpu> smi;
  if (!ReadSmi(smi)) {
    std::cerr << "nvidia-smi failed\n";
    return 2;
  }

  int mismatches = 0;
  auto check = [&](int index, const char* field, const std::string& ours, const std::string& theirs) {
    const bool same = ours == theirs;
    std::cout << (index < 0 ? std::string("all GPUs") : "GPU " + std::to_string(index)) << " " << field << ": tessera=" << ours << " nvidia-smi=" << theirs
              << (same ? "" : "   MISMATCH") << "\n";
    mismatches += same ? 0 : 1;
  };
  check(-1, "count", std::to_string(gpus->size()), std::to_string(smi.size()));
  for (size_t i = 0; i < gpus->size() && i < smi.size(); ++i) {
    const auto& g = (*gpus)[i];
    const SmiGpu& s = smi[i];
    check(g.index, "index", std::to_string(g.index), std::to_string(s.index));
    check(g.index, "uuid", g.uuid, s.uuid);
    check(g.index, "model", g.model, tessera::nvml::ShortModelName(s.name));
    std::cout << "GPU " << g.index << " nvidia-smi name: " << s.name << "\n";
    check(g.index, "memory_mib", std::to_string(g.memory_mib), std::to_string(s.memory_mib));
    check(g.index, "healthy", g.healthy ? "true" : "false", "true");
    std::cout << "GPU " << g.index << " sm_count=" << g.sm_count << " numa_node=" << g.numa_node
              << " (not compared)\n";
  }
  // The load the usage pass reads: memory in use should match nvidia-smi's
  // within 64 MiB (other processes may allocate between the two reads);
  // utilization is printed, not compared (it moves).
  auto load = (*reader)->ReadLoad();
  if (!load.ok()) {
    std::cerr << "NVML load: " << load.status().ToString() << "\n";
    return 2;
  }
  FILE* p = popen("nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits", "r");
  std::vector<std::pair<long long, long long>> smi_load;
  if (p != nullptr) {
    long long used = 0, util = 0;
    while (fscanf(p, " %lld , %lld", &used, &util) == 2) smi_load.emplace_back(used, util);
    pclose(p);
  }
  for (const auto& l : *load) {
    const long long ours = static_cast<long long>(l.memory_used_bytes >> 20);
    const size_t i = static_cast<size_t>(l.index);
    const long long theirs = i < smi_load.size() ? smi_load[i].first : -1;
    const bool close = theirs >= 0 && std::llabs(ours - theirs) <= 64;
    std::cout << "GPU " << l.index << " memory_used_mib: tessera=" << ours << " nvidia-smi=" << theirs
              << (close ? "" : "   MISMATCH") << "; utilization: tessera="
              << (l.utilization ? std::to_string(*l.utilization) : std::string("n/a"))
              << " nvidia-smi=" << (i < smi_load.size() ? std::to_string(smi_load[i].second) + "%" : "?") << "\n";
    mismatches += close ? 0 : 1;
  }
  std::cout << (mismatches == 0 ? "OK" : "FAILED") << ": " << mismatches << " mismatch(es)\n";
  if (!gpus->empty()) {  // for run.sh's results.json
    const auto& g = gpus->front();
    std::cout << "RESULT {\"gpus\": " << gpus->size() << ", \"mismatches\": " << mismatches
              << ", \"memory_mib_0\": " << g.memory_mib << ", \"sm_count_0\": " << g.sm_count << "}\n";
  }
  return mismatches == 0 ? 0 : 1;
}
